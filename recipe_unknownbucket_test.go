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

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// The README recipe against a bucket that states what remains but not its
// rate, and a reset only "within a second": until the record has measured
// its refill, the record holds what the statements leave, with nothing
// booked, beside the configured limiter, which paces within it. A limiter
// set above the bucket would otherwise send whatever it allows.
//
// The upstream is didip/tollbooth's: a token bucket of 48 a second and
// burst 48 stating IETF draft-03's RateLimit-Limit, -Remaining and
// -Reset, the reset always "1", and no Retry-After on its 429s. Its
// requests reach it 1-3 ms after they leave, in another order than they
// were sent. Found against the real tollbooth (v7.0.2, loopback, 600
// requests from 32 goroutines): configured 25% too high (a token bucket
// of 60/s, burst 60), the record left the bucket, whose rate it did not
// know, to that limiter, which sent its whole burst: 12 429s. (With
// WithRetry alone, an answer to a request sent 0.1 ms after another,
// stating 47 left where that one had stated 16, was taken as the later
// statement, and the first herd met 20 429s; under synctest the herd's
// answers do not come back in that order, and the row, 0-17 429s in 100
// runs before and after alike, is left out: see
// TestUpstreamAnswersInFlightTogetherAreUnordered in throttle.)
func TestRecipeHoldsABucketItCannotPace(t *testing.T) {
	tests := []struct {
		name        string
		limiter     func() throttle.Limiter
		wantRefused int // at most
	}{
		{name: "published limit", limiter: func() throttle.Limiter {
			l, err := throttle.NewTokenBucket(throttle.PerSecond(48), 48, throttle.WithTolerance(throttle.DefaultTolerance))
			if err != nil {
				panic(err)
			}
			return l
		}},
		{name: "25% too high", limiter: func() throttle.Limiter {
			l, err := throttle.NewTokenBucket(throttle.PerSecond(60), 60, throttle.WithTolerance(throttle.DefaultTolerance))
			if err != nil {
				panic(err)
			}
			return l
		}, wantRefused: 3},
	}
	const total = 600
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := &simUpstream{algo: "bucket", limit: 48, window: time.Second, dialect: "draft03-window", noRA: true}
				// Request n reaches the upstream 1-2.9 ms after it left, in
				// a shuffled order.
				in := func(n int) time.Duration { return time.Millisecond + time.Duration(n*7%32)*60*time.Microsecond }
				base := &simBase{h: up, in: in, out: spread(time.Millisecond)}
				opts := []egress.Option{egress.WithRetry(retryafter.Policy{})}
				if tt.limiter != nil {
					opts = append(opts, egress.WithLimiter(tt.limiter()))
				}
				wall, failed := runStaggered(egress.NewTransport(base, opts...), 32, total, 20*time.Microsecond)
				admitted, refused := up.stats()
				minimum := time.Second * (total - 48) / 48
				t.Logf("wall %v (%.3f× %v), admitted %d, refused %d, failed %d", wall, float64(wall)/float64(minimum), minimum, admitted, refused, failed)
				assert.Zero(t, failed, "failed requests")
				assert.LessOrEqual(t, refused, tt.wantRefused, "429s")
				assert.Less(t, float64(wall), 1.05*float64(minimum), "wall")
			})
		})
	}
}

// runStaggered is runJob with worker w starting w×stagger late, as
// goroutines started together leave a few microseconds apart.
func runStaggered(tr http.RoundTripper, workers, total int, stagger time.Duration) (wall time.Duration, failed int) {
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		bad  atomic.Int64
	)
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			time.Sleep(time.Duration(w) * stagger)
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
		})
	}
	wg.Wait()
	return time.Since(start), int(bad.Load())
}
