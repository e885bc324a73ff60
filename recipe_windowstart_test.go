package egress_test

import (
	"fmt"
	"net/http"
	"sync"
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

// The README's recipe for "N in any window" (a sliding log at the
// published numbers, with the record of what the upstream states)
// against fixed windows that start at a request and state their reset as
// an epoch second, cut down: bench 5c (sethvargo/go-limiter) and 5f
// (ulule/limiter). A greedy client sends each window's limit at its
// start. The record booked every unit past a spent window's reset at a
// sliding counter's even pace (a counter has no room at its boundary),
// and the configured log then kept that shape in every window after:
// 1.05-1.07× the least. Now one unit asks at each boundary (two at the
// first) and the rest wait for its answer (throttle/boundary.go).
func TestRecipeBurstsAtEachWindowStart(t *testing.T) {
	const (
		limit    = 48
		requests = 600
		workers  = 32
	)
	for _, phase := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond} {
		t.Run(fmt.Sprintf("first request %v into a second", phase), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(phase) // the windows' phase against the epoch seconds they state
				up := &simUpstream{algo: "ondemand", limit: limit, window: time.Second, dialect: "x-epoch"}
				base := &simBase{h: up, in: spread(time.Millisecond), out: spread(time.Millisecond)}
				log, err := throttle.NewSlidingWindow(limit, time.Second, throttle.WithTolerance(throttle.DefaultTolerance))
				require.NoError(t, err)
				u, err := throttle.NewUpstream()
				require.NoError(t, err)
				client := &http.Client{Transport: egress.NewTransport(base,
					egress.WithLimiter(log), egress.WithUpstream(u), egress.WithRetry(retryafter.Policy{}))}
				var next, failed atomic.Int64
				var wg sync.WaitGroup
				start := time.Now()
				for range workers {
					wg.Go(func() {
						for next.Add(1) <= requests {
							resp, err := client.Get("http://api.test/")
							if err != nil || resp.StatusCode != http.StatusOK {
								failed.Add(1)
							}
							if err == nil {
								drainClose(t, resp)
							}
						}
					})
				}
				wg.Wait()
				wall := time.Since(start)
				least := time.Duration((requests+limit-1)/limit-1) * time.Second
				_, refused := up.stats()
				t.Logf("wall %v (%.3f× the least, %v), %d refused", wall, wall.Seconds()/least.Seconds(), least, refused)
				assert.Zero(t, failed.Load())
				assert.LessOrEqual(t, refused, requests*5/1000, "429s")
				assert.LessOrEqual(t, wall.Seconds()/least.Seconds(), 1.03, "wall ÷ the least")
			})
		})
	}
}
