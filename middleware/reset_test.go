package middleware_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/middleware"
	"github.com/egress-go/egress/throttle"
)

// TestStatedResetsFollowWhatComesBack checks the policy and the t stated
// for the limits whose units come back before they are full again: a
// sliding log's t is when its oldest unit leaves, a sliding counter's the
// end of its grid's window (or, with nothing left, when a unit comes
// back; stated as an epoch, the first end at which one has), and a
// bucket's quota is what it refills per window. Each send is a step of
// give: sleep, then sends requests.
func TestStatedResetsFollowWhatComesBack(t *testing.T) {
	type step struct {
		sleep time.Duration
		sends int
	}
	tests := []struct {
		name       string
		give       func() throttle.Limiter
		giveOpts   []middleware.Option
		giveSteps  []step
		wantField  string
		wantPolicy string
		wantReset  string // X-RateLimit-Reset, when giveOpts asks for it
	}{
		{
			name:       "sliding log, units spread",
			give:       func() throttle.Limiter { return must(throttle.NewSlidingWindow(10, time.Minute)) },
			giveSteps:  []step{{sends: 3}, {sleep: 20 * time.Second, sends: 3}},
			wantField:  `"sliding";r=4;t=40`, // the first three leave at 60 s
			wantPolicy: `"sliding";q=10;w=60`,
		},
		{
			name:       "sliding log, full",
			give:       func() throttle.Limiter { return must(throttle.NewSlidingWindow(10, time.Minute)) },
			giveSteps:  []step{{sends: 4}, {sleep: 30 * time.Second, sends: 6}},
			wantField:  `"sliding";r=0;t=30`,
			wantPolicy: `"sliding";q=10;w=60`,
		},
		{
			name:       "sliding counter, into its window",
			give:       func() throttle.Limiter { return must(throttle.NewSlidingWindowCounter(10, time.Minute)) },
			giveSteps:  []step{{sleep: 20 * time.Second, sends: 4}},
			wantField:  `"sliding";r=6;t=40`,
			wantPolicy: `"sliding";q=10;w=60`,
		},
		{
			// Spent in full 50 s into its window: at the next window's
			// start it still weighs 10, and a unit comes back 6 s in.
			name:       "sliding counter, spent",
			give:       func() throttle.Limiter { return must(throttle.NewSlidingWindowCounter(10, time.Minute)) },
			giveSteps:  []step{{sleep: 50 * time.Second, sends: 10}},
			wantField:  `"sliding";r=0;t=16`,
			wantPolicy: `"sliding";q=10;w=60`,
		},
		{
			// As an epoch, the first end of a window after the unit
			// comes back: 70 s away, at 120 s past midnight.
			name:       "sliding counter, spent, stated as an epoch",
			give:       func() throttle.Limiter { return must(throttle.NewSlidingWindowCounter(10, time.Minute)) },
			giveOpts:   []middleware.Option{middleware.WithXRateLimit(middleware.ResetEpoch)},
			giveSteps:  []step{{sleep: 50 * time.Second, sends: 10}},
			wantField:  `"sliding";r=0;t=70`,
			wantPolicy: `"sliding";q=10;w=60`,
			wantReset:  "946684920",
		},
		{
			// Half way into the next window the first weighs 5: 5 more
			// spend it, and a unit comes back 6 s later, when it weighs 4.
			name:       "sliding counter, spent with a unit back before its end",
			give:       func() throttle.Limiter { return must(throttle.NewSlidingWindowCounter(10, time.Minute)) },
			giveSteps:  []step{{sends: 10}, {sleep: 90 * time.Second, sends: 5}},
			wantField:  `"sliding";r=0;t=6`,
			wantPolicy: `"sliding";q=10;w=60`,
		},
		{
			name:       "token bucket, burst under a second of its rate",
			give:       func() throttle.Limiter { return must(throttle.NewTokenBucket(throttle.PerSecond(20), 10)) },
			giveSteps:  []step{{sends: 4}},
			wantField:  `"bucket";r=6;t=1`,
			wantPolicy: `"bucket";q=20;w=1`, // 20 a second, not the burst of 10
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := middleware.New(tt.give(), tt.giveOpts...).Wrap(okHandler) // the bubble starts at midnight UTC
				var resp *http.Response
				for _, s := range tt.giveSteps {
					time.Sleep(s.sleep)
					for range s.sends {
						resp = get(h, "203.0.113.7:1")
						require.Equal(t, http.StatusOK, resp.StatusCode)
					}
				}
				assert.Equal(t, tt.wantField, resp.Header.Get("RateLimit"))
				assert.Equal(t, tt.wantPolicy, resp.Header.Get("RateLimit-Policy"))
				assert.Equal(t, tt.wantReset, resp.Header.Get("X-RateLimit-Reset"))
			})
		})
	}
}
