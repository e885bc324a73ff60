package egress_test

import (
	"context"
	"net/http"
	"net/http/httptest"
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

// TestAdaptiveUsesABucketStatedPerWindow: egress's own middleware states
// a token bucket's rate as a quota per window and what is left of its
// burst as what remains ("bucket";q=47;w=1 over a burst of 9). The
// adaptive recipe read the 38 units missing from the first answer as
// another client's and paced at 8.7/s, then climbed back over seconds:
// 73% of the limit used by 600 requests from 32 callers, where the goal
// for "no limit configured, headers present" is 90% with at most 1%
// refused. Now 92%: paced at 97% of the 47 a second stated, after the
// first four answers.
func TestAdaptiveUsesABucketStatedPerWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rate, burst, n = 48, 9, 600
		took, failed, refused := adaptiveAgainstMiddleware(t, rate, burst, n)
		least := time.Duration(float64(n-burst) / rate * float64(time.Second))
		t.Logf("%v for %d requests (the least %v: %.0f%% used), %d refused", took, n, least, 100*least.Seconds()/took.Seconds(), refused)
		assert.Zero(t, failed, "requests failed")
		assert.GreaterOrEqual(t, least.Seconds()/took.Seconds(), 0.9, "utilization")
		assert.LessOrEqual(t, refused, int64(n/100), "refused")
	})
}

// TestAdaptiveWaitsOnABucketOfBurstOne: over a bucket of 10/s and burst
// 1, egress's middleware states "r=0;t=1" on every answer (t is whole
// seconds). The adaptive recipe held the key to that reset after every
// answer, and took the first answer's missing units (9 of 10) for
// another client's: it laid 32 callers out a second apart, past the max
// wait, and 119 of 150 requests failed with a LimitError. The second
// answer at 0, past a hold to the reset, tells a bucket: its units come
// back one refill apart, and nobody else spends them. Then it used 48%
// of the bucket: every answer at 0 read as a sliding window at its limit,
// and held the key one unit's drain, on top of the pace. A quota pinned
// as a bucket stating its burst is no sliding window: 91% (the first
// answer's hold to its reset costs a second of the 16).
func TestAdaptiveWaitsOnABucketOfBurstOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 150
		took, failed, refused := adaptiveAgainstMiddleware(t, 10, 1, n)
		least := time.Duration(float64(n-1) / 10 * float64(time.Second))
		t.Logf("%v for %d requests (the least %v: %.0f%% used), %d failed, %d refused", took, n, least, 100*least.Seconds()/took.Seconds(), failed, refused)
		assert.Zero(t, failed, "requests failed")
		assert.LessOrEqual(t, refused, int64(n/100), "refused")
		assert.GreaterOrEqual(t, least.Seconds()/took.Seconds(), 0.85, "utilization")
	})
}

// TestBucketStatedPerWindow: egress's middleware over a token bucket of
// 48/s and burst 9 states "bucket";q=47;w=1 with r=0..8 and t=1 (whole
// seconds); WithXRateLimit restates it as X-RateLimit-Limit 9 (the
// burst) with the reset as an epoch or a delay. Measured before, after:
//
//   - the README recipe at the published numbers, IETF fields: 64%, 90%
//     (held to t=1 at every "0 left", the record never saw the bucket
//     refill: a window of 1 s stated to the second cannot tell);
//   - the same, with X-RateLimit epochs: 27%, 90% (the X fields read as
//     a second quota of 9 a window), and delays: 64%, 90%;
//   - the adaptive recipe with X-RateLimit epochs: 18%, 91%;
//   - the README recipe 25% too high (60/s), IETF fields: 64%, 84%, with
//     0 and 1 refused (1.07× the published run's wall time).
//
// The others met no 429 before or after. Those runs had no time between
// the client and the upstream, and the 25% too high row was flaky: in
// about one run in ten with more than one P (go test -cpu 2,4), more of
// the 32 callers booked before the first answer was learned, at the same
// instant, sent past the bucket's burst, and met a 429 and its second's
// pause more: 72-79% used, 2-3 refused. With a millisecond each way, as
// any network has, the callers all book before the first answer, every
// run alike: the published numbers 94% (every dialect), the adaptive
// recipe 91%, 25% too high 81% with 2 refused (0.4%), 1.16× the
// published run's wall time, where the goal is 1.10×: the two 429s that
// teach the configured bucket the upstream's rate cost a second each.
func TestBucketStatedPerWindow(t *testing.T) {
	const rate, burst, n = 48, 9, 489
	configuredAt := func(r int) func(t *testing.T) []egress.Option {
		return func(t *testing.T) []egress.Option {
			l, err := throttle.NewTokenBucket(throttle.PerSecond(r), burst, throttle.WithTolerance(throttle.DefaultTolerance))
			require.NoError(t, err)
			return []egress.Option{egress.WithLimiter(l), egress.WithRetry(retryafter.Policy{})}
		}
	}
	configured := configuredAt(rate)
	adaptive := func(t *testing.T) []egress.Option {
		l, err := throttle.NewAdaptive(throttle.PerSecond(1000))
		require.NoError(t, err)
		return []egress.Option{egress.WithLimiter(l), egress.WithRetry(retryafter.Policy{})}
	}
	tests := []struct {
		name        string
		giveMW      []middleware.Option
		giveRecipe  func(t *testing.T) []egress.Option
		wantUsed    float64 // of the least
		wantRefused int64
	}{
		{name: "published numbers, IETF", giveRecipe: configured, wantUsed: 0.9, wantRefused: n / 200},
		{name: "published numbers, X-RateLimit epochs", giveMW: []middleware.Option{middleware.WithXRateLimit(middleware.ResetEpoch)}, giveRecipe: configured, wantUsed: 0.9, wantRefused: n / 200},
		{name: "published numbers, X-RateLimit delays", giveMW: []middleware.Option{middleware.WithXRateLimit(middleware.ResetDelta)}, giveRecipe: configured, wantUsed: 0.9, wantRefused: n / 200},
		{name: "25% too high, IETF", giveRecipe: configuredAt(rate * 5 / 4), wantUsed: 0.78, wantRefused: n / 100}, // its goal: 1% refused
		{name: "adaptive, X-RateLimit epochs", giveMW: []middleware.Option{middleware.WithXRateLimit(middleware.ResetEpoch)}, giveRecipe: adaptive, wantUsed: 0.88, wantRefused: n / 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				bucket, err := throttle.NewTokenBucket(throttle.PerSecond(rate), burst)
				require.NoError(t, err)
				took, failed, refused := againstMiddlewareAway(t, middleware.New(bucket, tt.giveMW...), n, time.Millisecond, tt.giveRecipe(t)...)
				least := time.Duration(float64(n-burst) / rate * float64(time.Second))
				t.Logf("%v for %d requests (the least %v: %.0f%% used), %d failed, %d refused", took, n, least, 100*least.Seconds()/took.Seconds(), failed, refused)
				assert.Zero(t, failed, "requests failed")
				assert.LessOrEqual(t, refused, tt.wantRefused, "refused")
				assert.GreaterOrEqual(t, least.Seconds()/took.Seconds(), tt.wantUsed, "utilization")
			})
		})
	}
}

// adaptiveAgainstMiddleware sends n requests from 32 callers through the
// adaptive recipe to egress's middleware over a token bucket of rate and
// burst, served in memory, inside the caller's synctest bubble (see
// againstMiddleware).
func adaptiveAgainstMiddleware(t *testing.T, rate, burst, n int) (took time.Duration, failed, refused int64) {
	t.Helper()
	bucket, err := throttle.NewTokenBucket(throttle.PerSecond(rate), burst)
	require.NoError(t, err)
	learned, err := throttle.NewAdaptive(throttle.PerSecond(1000))
	require.NoError(t, err)
	return againstMiddleware(t, middleware.New(bucket), n, egress.WithLimiter(learned), egress.WithRetry(retryafter.Policy{}))
}

// againstMiddleware sends n requests from 32 callers through a Transport
// with opts to mw, served in memory with a Date as net/http sets it,
// inside the caller's synctest bubble. It returns how long they took, how
// many failed, and how many the upstream refused.
func againstMiddleware(t *testing.T, mw *middleware.Middleware, n int, opts ...egress.Option) (took time.Duration, failed, refused int64) {
	t.Helper()
	return againstMiddlewareAway(t, mw, n, 0, opts...)
}

// againstMiddlewareAway is againstMiddleware with way each way between
// the client and mw: with none, an answer can be learned at the instant
// another caller books, or after it, as the scheduler happens to run
// them, and a test whose outcome turns on that order is flaky.
func againstMiddlewareAway(t *testing.T, mw *middleware.Middleware, n int, way time.Duration, opts ...egress.Option) (took time.Duration, failed, refused int64) {
	t.Helper()
	upstream := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	var refusedN atomic.Int64
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		time.Sleep(way)
		defer time.Sleep(way)
		rec := httptest.NewRecorder()
		rec.Header().Set("Date", time.Now().UTC().Format(http.TimeFormat))
		upstream.ServeHTTP(rec, req)
		if rec.Code == http.StatusTooManyRequests {
			refusedN.Add(1)
		}
		resp := rec.Result()
		resp.Request = req
		return resp, nil
	})
	client := &http.Client{Transport: egress.NewTransport(base, opts...)}

	start := time.Now()
	failed = sendAll(t, client, n)
	return time.Since(start), failed, refusedN.Load()
}

// sendAll sends n GETs through client from 32 goroutines, as a batch job
// does, and returns how many failed.
func sendAll(t *testing.T, client *http.Client, n int) (failed int64) {
	t.Helper()
	var next, failedN atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://api.test/v1", nil)
				if !assert.NoError(t, err) {
					return
				}
				resp, err := client.Do(req)
				if err != nil {
					failedN.Add(1)
					continue
				}
				drainClose(t, resp)
			}
		})
	}
	wg.Wait()
	return failedN.Load()
}

// TestAdaptiveRetryAfterOnly: an upstream that states no quota and
// answers a 429 with Retry-After in whole seconds (egress's middleware
// with its RateLimit fields taken off) over token buckets. The adaptive
// limiter read each throttled answer, once the Transport's pause had
// moved the bookings a second on, as a refusal at its settled pace, and
// only nudged its rate: it stayed at many times the limit, and each
// second went to a burst, a 429 and a 1 s pause. Before, after (wall ÷
// the least, refused): 20/s burst 10, 2.08×, 9.8% / 1.27×, 2.3%; 10/s
// burst 1, 10×, 99% / 1.67×, 4%; 100/s burst 10, 5.5×, 4.9% / 1.44×,
// 0.4%. Then the descent from the ceiling (a cut of β² a refusal, one a
// second, 7 s to 10/s) left a best estimate to return to after a storm
// of 370/s: every 5 s the rate went back above the limit, met a 429 and
// its pause, and was halved. An estimate that no answers measured is
// none to return to: 10/s burst 1, 1.25×, 2.3% (all in the descent);
// 100/s burst 10, 1.30×, 0.2%. And a second after a pause admitted the
// burst the bucket refilled over it, which read as the limit: 20/s burst
// 10 sat at 26/s, a 429 every 2.6 s (1.27× → 1.19×); a fixed window of
// 48 a second (its least is 30 s too), 1.40× → 1.16×. None meets the
// goals for a headerless upstream (±10% of the limit, 1% refused): each
// refusal still costs a second's pause.
func TestAdaptiveRetryAfterOnly(t *testing.T) {
	bucket := func(rate, burst int) func() (throttle.Limiter, error) {
		return func() (throttle.Limiter, error) { return throttle.NewTokenBucket(throttle.PerSecond(rate), burst) }
	}
	tests := []struct {
		name        string
		limit       func() (throttle.Limiter, error)
		rate, burst int
	}{
		{"20/s, burst 10", bucket(20, 10), 20, 10},
		{"10/s, burst 1", bucket(10, 1), 10, 1},
		{"100/s, burst 10", bucket(100, 10), 100, 10},
		{"fixed window of 48 a second", func() (throttle.Limiter, error) { return throttle.NewFixedWindow(48, time.Second) }, 48, 48},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				limit, err := tt.limit()
				require.NoError(t, err)
				learned, err := throttle.NewAdaptive(throttle.PerSecond(1000))
				require.NoError(t, err)
				mw := middleware.New(limit, middleware.WithPolicies(func(string) *middleware.Policies { return nil }))
				n := tt.burst + 30*tt.rate
				took, failed, refused := againstMiddleware(t, mw, n, egress.WithLimiter(learned), egress.WithRetry(retryafter.Policy{}))
				least := 30 * time.Second
				t.Logf("%v for %d requests (%.2f× the least), %d failed, %d refused (%.1f%%)", took, n, took.Seconds()/least.Seconds(), failed, refused, 100*float64(refused)/float64(n))
				assert.Zero(t, failed, "requests failed")
				assert.LessOrEqual(t, took.Seconds()/least.Seconds(), 1.35, "wall ÷ the least")
				assert.LessOrEqual(t, float64(refused), 0.05*float64(n), "refused")
			})
		})
	}
}
