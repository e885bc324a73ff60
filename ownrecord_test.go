package egress_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
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

// The README's first snippet (a limiter at the published numbers and
// WithRetry, no WithUpstream) against a fixed window of 20 per 10 s that
// states its quota: a 200 at remaining 0 holds new requests back until
// the reset and moves nothing booked after it, so every window is used
// (113–120 of 120, as the goroutines happen to run). When such a 200
// paused the key, the pause moved the units booked at the reset a window
// later: 80 of 120.
func TestLimiterWithRetryUsesEveryWindow(t *testing.T) {
	const (
		limit   = 20
		window  = 10 * time.Second
		workers = 4
		run     = 60 * time.Second
	)
	upstreams := map[string]func() (throttle.Limiter, error){
		"fixed window": func() (throttle.Limiter, error) { return throttle.NewFixedWindow(limit, window) },
	}
	for name, newUpstream := range upstreams {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				server, err := newUpstream()
				require.NoError(t, err)
				api := middleware.New(server, middleware.WithKey(func(*http.Request) (string, error) { return "client", nil })).
					Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
				base := &inProcess{h: api}
				limiter, err := throttle.NewSlidingWindow(limit, window, throttle.WithTolerance(throttle.DefaultTolerance))
				require.NoError(t, err)
				client := &http.Client{Transport: egress.NewTransport(base,
					egress.WithLimiter(limiter),
					egress.WithRetry(retryafter.Policy{}),
					egress.WithMaxWait(time.Minute),
				)}

				ctx, cancel := context.WithTimeout(context.Background(), run)
				defer cancel()
				var ok atomic.Int64
				var wg sync.WaitGroup
				for range workers {
					wg.Go(func() {
						for ctx.Err() == nil {
							req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
							require.NoError(t, err)
							resp, err := client.Do(req)
							if err != nil {
								var le *throttle.LimitError
								if !errors.As(err, &le) || !le.Deadline {
									t.Errorf("a request failed: %v", err)
								}
								return // the run is ending
							}
							if resp.StatusCode == http.StatusOK {
								ok.Add(1)
							}
							drainClose(t, resp)
						}
					})
				}
				wg.Wait()

				windows := int64(run / window)
				assert.GreaterOrEqual(t, ok.Load(), windows*limit*9/10, "admitted of %d the windows allow", windows*limit)
				assert.Zero(t, base.tooMany.Load(), "429s")
			})
		})
	}
}
