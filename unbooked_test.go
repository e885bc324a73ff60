package egress_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// Requests in flight to one host, sent before the record heard any quota,
// are not the business of another host's quota: "R more before T" on
// api.test admits R, whatever is still on its way to slow.test.
func TestUnbookedCountIsPerKey(t *testing.T) {
	for _, cfg := range []string{"bucket+upstream", "retry alone"} {
		t.Run(cfg, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
					if req.URL.Host == "slow.test" {
						select {
						case <-time.After(20 * time.Second):
						case <-req.Context().Done():
							return nil, req.Context().Err()
						}
						return respond(req, http.StatusOK), nil
					}
					now := time.Now()
					return respond(req, http.StatusOK, "Date", now.UTC().Format(http.TimeFormat),
						"X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "5",
						"X-RateLimit-Reset", strconv.FormatInt(now.Add(40*time.Second).Unix(), 10)), nil
				}}
				opts := []egress.Option{egress.WithRetry(retryafter.Policy{}), egress.WithMaxWait(-1)}
				if cfg == "bucket+upstream" {
					opts = append(opts, egress.WithLimiter(mustTokenBucket(t, throttle.PerSecond(100), 100)), egress.WithUpstream(mustUpstream(t)))
				}
				tr := egress.NewTransport(base, opts...)
				var wg sync.WaitGroup
				for range 8 {
					wg.Go(func() {
						resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://slow.test/", nil))
						if err == nil {
							drainClose(t, resp)
						}
					})
				}
				time.Sleep(time.Second)
				start := time.Now()
				for range 4 { // the first states remaining 5; 4 more fit
					resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
					require.NoError(t, err)
					drainClose(t, resp)
				}
				took := time.Since(start)
				wg.Wait()
				assert.Less(t, took, 5*time.Second, "api.test held back by requests in flight to slow.test")
				t.Logf("4 requests to api.test took %v", took)
			})
		})
	}
}
