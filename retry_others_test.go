package egress_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// A retry's delay holds back the request that waits it out, and no other:
// a local backoff (no server delay) delays this request only, and a
// Retry-After beyond MaxPause holds the key for MaxPause. Booked at once
// for a slot that far ahead, the retry held back every caller booked
// after it on a limiter that never hands out an earlier slot after a
// later one (found by a user's test: a bare 503 on one path stalled
// another path of the same key for the backoff).
func TestRetryDelayHoldsBackThisRequestOnly(t *testing.T) {
	limiters := map[string]func() (throttle.Limiter, error){
		"token bucket": func() (throttle.Limiter, error) { return throttle.NewTokenBucket(throttle.PerSecond(100), 10) },
		"leaky bucket": func() (throttle.Limiter, error) { return throttle.NewLeakyBucket(throttle.PerSecond(100), 9) },
		"sliding window": func() (throttle.Limiter, error) {
			return throttle.NewSlidingWindow(100, time.Second)
		},
	}
	cases := []struct {
		name       string
		policy     retryafter.Policy
		refusal    []string      // the first answer to /a: a 503 with these headers
		wantWaitAt time.Duration // the most /b may wait, sent 100 ms after /a
	}{
		{
			name:       "local backoff",
			policy:     retryafter.Policy{Backoff: func(int) time.Duration { return 800 * time.Millisecond }},
			wantWaitAt: 0,
		},
		{
			name:       "Retry-After beyond MaxPause",
			policy:     retryafter.Policy{MaxPause: 300 * time.Millisecond, Jitter: zeroJitter},
			refusal:    []string{"Retry-After", "1"},
			wantWaitAt: 200 * time.Millisecond, // the pause's end, 300 ms after /a's answer
		},
	}
	for name, newLimiter := range limiters {
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					l, err := newLimiter()
					require.NoError(t, err)
					var refused atomic.Bool
					base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
						if req.URL.Path == "/a" && refused.CompareAndSwap(false, true) {
							return respond(req, http.StatusServiceUnavailable, tc.refusal...), nil
						}
						return respond(req, http.StatusOK), nil
					})
					tr := egress.NewTransport(base, egress.WithLimiter(l), egress.WithRetry(tc.policy))
					done := make(chan int)
					go func() {
						resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.example/a", nil))
						if err != nil {
							done <- 0
							return
						}
						drainClose(t, resp)
						done <- resp.StatusCode
					}()
					time.Sleep(100 * time.Millisecond)
					start := time.Now()
					resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.example/b", nil))
					require.NoError(t, err)
					drainClose(t, resp)
					assert.LessOrEqual(t, time.Since(start), tc.wantWaitAt, "/b waited for /a's retry")
					assert.Equal(t, http.StatusOK, <-done, "/a's retry")
				})
			})
		}
	}
}
