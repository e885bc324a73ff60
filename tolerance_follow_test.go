package egress_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/throttle"
)

// A token bucket of burst 1 given to a Transport hears every answer: its
// headroom (WithTolerance's, up to 10 ms) falls away while the upstream
// admits everything, so the requests go at the rate itself, and comes
// back when the upstream refuses one.
func TestTransportToleranceFollowsAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			callers  = 8
			requests = 240
			refused  = 100 // the upstream refuses this request
		)
		base := &fakeBase{latency: 5 * time.Millisecond, answer: func(req *http.Request, n int) (*http.Response, error) {
			if n == refused {
				return respond(req, http.StatusTooManyRequests), nil
			}
			return respond(req, http.StatusOK), nil
		}}
		tb, err := throttle.NewTokenBucket(throttle.PerSecond(48), 1, throttle.WithTolerance(throttle.DefaultTolerance))
		require.NoError(t, err)
		tr := egress.NewTransport(base, egress.WithLimiter(tb), egress.WithMaxWait(-1))
		var wg sync.WaitGroup
		var mu sync.Mutex
		left := requests
		for range callers {
			wg.Go(func() {
				for {
					mu.Lock()
					if left == 0 {
						mu.Unlock()
						return
					}
					left--
					mu.Unlock()
					resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
					if assert.NoError(t, err) {
						_ = resp.Body.Close()
					}
				}
			})
		}
		wg.Wait()
		require.Len(t, base.sent, requests)
		gap := func(from, to int) time.Duration { return base.sent[to].Sub(base.sent[from]) / time.Duration(to-from) }
		interval := time.Second / 48
		assert.InDelta(t, interval+throttle.DefaultTolerance, gap(0, callers), float64(time.Millisecond), "the first bookings keep it all")
		assert.InDelta(t, interval, gap(60, refused), float64(200*time.Microsecond), "calm answers take it away")
		assert.Greater(t, gap(refused+callers, refused+callers+10), interval+3*time.Millisecond, "a refusal brings it back")
		assert.InDelta(t, interval, gap(requests-20, requests-1), float64(200*time.Microsecond), "and it falls again")
	})
}
