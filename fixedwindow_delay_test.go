package egress_test

import (
	"context"
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

// runJob sends total requests to tr from workers goroutines, and returns
// how long the job took and how many requests failed.
func runJob(tr http.RoundTripper, workers, total int) (wall time.Duration, failed int) {
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		bad  atomic.Int64
	)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(total) {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://api.test/v1", nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					bad.Add(1)
					continue
				}
				if resp.StatusCode != http.StatusOK {
					bad.Add(1)
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	return time.Since(start), int(bad.Load())
}

// readmeTransport is the README's recipe for "the API allows limit per
// window", configured at factor times the published limit: a sliding
// window with DefaultTolerance, the record of what the upstream states,
// and the default retry policy.
func readmeTransport(t *testing.T, base http.RoundTripper, limit int, window time.Duration, factor float64) *egress.Transport {
	l, err := throttle.NewSlidingWindow(int(float64(limit)*factor+0.5), window, throttle.WithTolerance(throttle.DefaultTolerance))
	require.NoError(t, err)
	return egress.NewTransport(base, egress.WithLimiter(l), egress.WithUpstream(mustUpstream(t)), egress.WithRetry(retryafter.Policy{}))
}

// A fixed window that states its reset as a delay (X-RateLimit-Reset in
// seconds until the window ends, truncated, or IETF RateLimit without
// RateLimit-Policy) paces a client configured 25% too high: what the
// upstream states keeps the 429s to at most 1% of the requests, and the
// job takes at most 1.10× the run configured at the published limit.
// Before the fix, 60/s against 48/s met 144 429s of 600 and took 2×.
func TestFixedWindowDelayResetTooHigh(t *testing.T) {
	tests := []struct {
		name    string
		limit   int
		window  time.Duration
		dialect string
		ceilSec bool
		workers int
	}{
		{name: "48/s X-RateLimit delay", limit: 48, window: time.Second, dialect: "x-delta", workers: 32},
		{name: "48/s IETF no policy", limit: 48, window: time.Second, dialect: "ietf-nopolicy", workers: 32},
		{name: "20 per 10s X-RateLimit delay", limit: 20, window: 10 * time.Second, dialect: "x-delta", workers: 4},
		{name: "20 per 10s X-RateLimit delay rounded up", limit: 20, window: 10 * time.Second, dialect: "x-delta", ceilSec: true, workers: 4},
		{name: "20 per 10s IETF no policy", limit: 20, window: 10 * time.Second, dialect: "ietf-nopolicy", workers: 4},
	}
	const total = 600
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := func(factor float64) (time.Duration, int, int) {
				var wall time.Duration
				var refused, failed int
				synctest.Test(t, func(t *testing.T) {
					up := &simUpstream{algo: "fixed", limit: tt.limit, window: tt.window, offset: 300 * time.Millisecond, dialect: tt.dialect, ceilSec: tt.ceilSec}
					base := &simBase{h: up, in: spread(time.Millisecond, 2*time.Millisecond), out: spread(time.Millisecond, 3*time.Millisecond)}
					wall, failed = runJob(readmeTransport(t, base, tt.limit, tt.window, factor), tt.workers, total)
					_, refused = up.stats()
				})
				return wall, refused, failed
			}
			pubWall, pubRefused, pubFailed := run(1)
			highWall, highRefused, highFailed := run(1.25)
			t.Logf("published: %v, %d 429s, %d failed; 25%% too high: %v (%.2f×), %d 429s, %d failed",
				pubWall, pubRefused, pubFailed, highWall, float64(highWall)/float64(pubWall), highRefused, highFailed)
			assert.Zero(t, highFailed, "failed requests")
			assert.LessOrEqual(t, highRefused, total/100, "429s")
			assert.LessOrEqual(t, float64(highWall), 1.10*float64(pubWall), "wall against the published-limit run")
		})
	}
}
