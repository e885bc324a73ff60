package egress_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/middleware"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// TestAdaptiveBareRefusals: the recipe for "I do not know the limit"
// against an upstream that answers a bare 429 (no Retry-After, no quota
// fields: egress's middleware with its policy fields off and Retry-After
// taken out), 32 goroutines, 2 ms each way, 30 s of work. A bucket whose
// burst is a second's worth or half of one admits twice its limit in the
// first second, and the rate settled there: each refusal nudged it 2%.
// Refused after 5 s, before: 10/s burst 10, 21%; 10/s burst 5, 13%;
// 20/s burst 10, 5.6%; a fixed window of 10 a second, 5.3%. After:
// 0-0.4% (the goal is 1%).
func TestAdaptiveBareRefusals(t *testing.T) {
	tests := []struct {
		name  string
		limit func() (throttle.Limiter, error)
		rate  int
	}{
		{"bucket 10/s, burst 10", func() (throttle.Limiter, error) { return throttle.NewTokenBucket(throttle.PerSecond(10), 10) }, 10},
		{"bucket 10/s, burst 5", func() (throttle.Limiter, error) { return throttle.NewTokenBucket(throttle.PerSecond(10), 5) }, 10},
		{"bucket 20/s, burst 10", func() (throttle.Limiter, error) { return throttle.NewTokenBucket(throttle.PerSecond(20), 10) }, 20},
		{"fixed window 10 per second", func() (throttle.Limiter, error) { return throttle.NewFixedWindow(10, time.Second) }, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, err := tt.limit()
				require.NoError(t, err)
				upstream := middleware.New(l, middleware.WithPolicies(func(string) *middleware.Policies { return nil })).
					Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
				start := time.Now()
				var admitted, refused atomic.Int64 // after 5 s
				base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
					time.Sleep(2 * time.Millisecond)
					rec := httptest.NewRecorder()
					upstream.ServeHTTP(rec, req)
					resp := rec.Result()
					resp.Header.Del("Retry-After") // a bare 429
					resp.Request = req
					if time.Since(start) >= 5*time.Second {
						if resp.StatusCode == http.StatusTooManyRequests {
							refused.Add(1)
						} else {
							admitted.Add(1)
						}
					}
					time.Sleep(2 * time.Millisecond)
					return resp, nil
				})
				learned, err := throttle.NewAdaptive(throttle.PerSecond(1000))
				require.NoError(t, err)
				client := &http.Client{Transport: egress.NewTransport(base, egress.WithLimiter(learned), egress.WithRetry(retryafter.Policy{}))}

				n := 30 * tt.rate
				failed := sendAll(t, client, n)
				took := time.Since(start)
				share := float64(refused.Load()) / float64(max(refused.Load()+admitted.Load(), 1))
				t.Logf("%v for %d requests, %d failed; after 5 s %d refused of %d (%.1f%%)", took, n, failed, refused.Load(), refused.Load()+admitted.Load(), 100*share)
				assert.Zero(t, failed, "requests failed")
				assert.LessOrEqual(t, share, 0.01, "refused after 5 s")
				assert.LessOrEqual(t, took, 32*time.Second, "wall time")
			})
		})
	}
}
