package egress_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/throttle"
)

// breakerLimiter is an inspectedLimiter behind a circuit breaker.
type breakerLimiter struct {
	*inspectedLimiter
	available bool
}

func (l breakerLimiter) Available() bool { return l.available }

func TestSnapshotBreaker(t *testing.T) {
	tests := []struct {
		name         string
		giveLimiter  throttle.Limiter
		giveUpstream bool
		wantBreaker  string
		wantJSON     string // the start of the JSON form
	}{
		{name: "store answers", giveLimiter: breakerLimiter{newInspected(), true}, wantBreaker: egress.BreakerClosed,
			wantJSON: `{"in_flight":0,"waiting":0,"sent":0,"retries":0,"refused":0,"pauses":0,"breaker":"closed","keys":`},
		{name: "store away", giveLimiter: breakerLimiter{newInspected(), false}, wantBreaker: egress.BreakerOpen,
			wantJSON: `{"in_flight":0,"waiting":0,"sent":0,"retries":0,"refused":0,"pauses":0,"breaker":"open","keys":`},
		{name: "store away, following the upstream", giveLimiter: breakerLimiter{newInspected(), false}, giveUpstream: true,
			wantBreaker: egress.BreakerOpen,
			wantJSON:    `{"in_flight":0,"waiting":0,"sent":0,"retries":0,"refused":0,"pauses":0,"breaker":"open","keys":`},
		{name: "store answers, following the upstream", giveLimiter: breakerLimiter{newInspected(), true}, giveUpstream: true,
			wantBreaker: egress.BreakerClosed,
			wantJSON:    `{"in_flight":0,"waiting":0,"sent":0,"retries":0,"refused":0,"pauses":0,"breaker":"closed","keys":`},
		{name: "no breaker", giveLimiter: newInspected(), wantBreaker: "",
			wantJSON: `{"in_flight":0,"waiting":0,"sent":0,"retries":0,"refused":0,"pauses":0,"keys":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []egress.Option{egress.WithLimiter(tt.giveLimiter)}
			if tt.giveUpstream {
				opts = append(opts, egress.WithUpstream(mustUpstream(t)))
			}
			tr := egress.NewTransport(snapshotBase{}, opts...)

			got, err := tr.Snapshot(context.Background())
			require.NoError(t, err)
			body, err := json.Marshal(got)
			require.NoError(t, err)

			assert.Equal(t, tt.wantBreaker, got.Breaker)
			assert.Contains(t, string(body), tt.wantJSON)
		})
	}
}

// statingBase answers 200 and states a quota of 100 a minute with 7 left,
// due back in 30s, in the X-RateLimit headers.
type statingBase struct{}

func (statingBase) RoundTrip(req *http.Request) (*http.Response, error) {
	h := http.Header{}
	h.Set("X-RateLimit-Limit", "100")
	h.Set("X-RateLimit-Remaining", "7")
	h.Set("X-RateLimit-Reset", "30")
	return &http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody, Request: req}, nil
}

func TestSnapshotStated(t *testing.T) {
	tests := []struct {
		name       string
		giveOpts   func(t *testing.T) []egress.Option
		wantStated map[string][]throttle.Statement
		wantJSON   string
	}{
		{
			name: "following the upstream",
			giveOpts: func(t *testing.T) []egress.Option {
				return []egress.Option{egress.WithLimiter(newInspected()), egress.WithUpstream(mustUpstream(t))}
			},
			// One request answered with 7 left, 10s ago; the fresh key
			// stated nothing.
			wantStated: map[string][]throttle.Statement{
				"api.example.com": {{Name: "x-ratelimit", Unit: throttle.UnitRequests, Limit: 100, Remaining: 7, Reset: 20 * time.Second}},
			},
			wantJSON: `"stated":[{"name":"x-ratelimit","unit":"requests","limit":100,"remaining":7,"reset_seconds":20}]}`,
		},
		{
			name: "without WithUpstream",
			giveOpts: func(t *testing.T) []egress.Option {
				return []egress.Option{egress.WithLimiter(newInspected())}
			},
			wantJSON: `"paused_seconds":0.5}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := egress.NewTransport(statingBase{}, tt.giveOpts(t)...)
				req, err := http.NewRequest(http.MethodGet, "http://api.example.com/", nil)
				require.NoError(t, err)
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
				time.Sleep(10 * time.Second)

				got, err := tr.Snapshot(context.Background(), "api.example.com", "fresh")
				require.NoError(t, err)
				body, err := json.Marshal(got)
				require.NoError(t, err)

				assert.Equal(t, tt.wantStated, got.Stated)
				assert.Contains(t, string(body), tt.wantJSON)
				require.Len(t, got.Keys, 2)
				assert.Equal(t, 10, got.Keys[1].Remaining, "a key the upstream stated nothing for reports the configured limiter's budget")
			})
		})
	}
}
