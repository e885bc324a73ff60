package middleware_test

import (
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/middleware"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// limitCase is a limiter and the Policies that describe it.
type limitCase struct {
	name string
	give func() (throttle.Limiter, *middleware.Policies)
}

func single(l throttle.Limiter) (throttle.Limiter, *middleware.Policies) {
	return l, middleware.Describe(l)
}

var limitCases = []limitCase{
	{name: "token bucket", give: func() (throttle.Limiter, *middleware.Policies) {
		return single(must(throttle.NewTokenBucket(throttle.PerSecond(10), 5)))
	}},
	{name: "token bucket, slow", give: func() (throttle.Limiter, *middleware.Policies) {
		return single(must(throttle.NewTokenBucket(throttle.Rate{N: 2, Per: 3 * time.Second}, 3)))
	}},
	{name: "fixed window", give: func() (throttle.Limiter, *middleware.Policies) {
		return single(must(throttle.NewFixedWindow(20, time.Minute)))
	}},
	{name: "sliding window", give: func() (throttle.Limiter, *middleware.Policies) {
		return single(must(throttle.NewSlidingWindow(10, 10*time.Second)))
	}},
	{name: "sliding window counter", give: func() (throttle.Limiter, *middleware.Policies) {
		return single(must(throttle.NewSlidingWindowCounter(10, 10*time.Second)))
	}},
	{name: "all: burst and minute", give: func() (throttle.Limiter, *middleware.Policies) {
		b := must(throttle.NewTokenBucket(throttle.PerSecond(5), 5))
		w := must(throttle.NewFixedWindow(60, time.Minute))
		return throttle.All(b, w), middleware.Describe(b, w)
	}},
}

// serve returns the handler for a case, keyed by the X-Client header.
func serve(tc limitCase) http.Handler {
	l, p := tc.give()
	return middleware.New(l,
		middleware.WithKey(middleware.KeyByHeader("X-Client")),
		middleware.WithPolicies(func(string) *middleware.Policies { return p }),
	).Wrap(okHandler)
}

// TestObeyingClientsAreNeverRefused runs random clients, each with its own
// key, that believe the headers: after each answer, a client sends at most
// the remaining it was told, at random instants before the reset it was
// told, or, told 0, waits for the reset (as egress's client does). None of
// them may ever be refused.
func TestObeyingClientsAreNeverRefused(t *testing.T) {
	const clients, rounds = 200, 30
	for _, tc := range limitCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := serve(tc)
				var refused, sent atomic.Int64
				var wg sync.WaitGroup
				for c := range clients {
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(c), 7))
						id := "client-" + strconv.Itoa(c)
						time.Sleep(time.Duration(rng.Int64N(int64(time.Minute))))
						resp := get(h, "203.0.113.7:1", "X-Client", id)
						sent.Add(1)
						for range rounds {
							if resp.StatusCode != http.StatusOK {
								refused.Add(1)
							}
							now := time.Now()
							if d, ok := retryafter.Parse(resp.Header, now); ok {
								time.Sleep(d)
								resp = get(h, "203.0.113.7:1", "X-Client", id)
								sent.Add(1)
								continue
							}
							r, reset := budget(t, resp.Header, now)
							// k sends at random instants before the reset.
							k := 1 + rng.IntN(r)
							at := make([]time.Duration, k)
							for i := range at {
								if reset > 0 {
									at[i] = time.Duration(rng.Int64N(int64(reset)))
								}
							}
							slices.Sort(at)
							for i, a := range at {
								time.Sleep(time.Until(now.Add(a)))
								resp = get(h, "203.0.113.7:1", "X-Client", id)
								sent.Add(1)
								if i < k-1 && resp.StatusCode != http.StatusOK {
									refused.Add(1)
								}
							}
							if rng.IntN(4) == 0 { // now and then, a pause to think
								time.Sleep(time.Duration(rng.Int64N(int64(2*reset + time.Second))))
							}
						}
						if resp.StatusCode != http.StatusOK {
							refused.Add(1)
						}
					})
				}
				wg.Wait()
				assert.Zero(t, refused.Load(), "refused of %d sent", sent.Load())
				assert.Greater(t, sent.Load(), int64(clients*rounds), "the clients sent more than one request a round")
			})
		})
	}
}

// budget returns what the headers promise: the fewest remaining across
// the limits, before the earliest reset among them.
func budget(t *testing.T, h http.Header, now time.Time) (int, time.Duration) {
	qs := retryafter.ParseQuota(h, now)
	require.NotEmpty(t, qs)
	r, reset := qs[0].Remaining, qs[0].Reset
	for _, q := range qs[1:] {
		r, reset = min(r, q.Remaining), min(reset, q.Reset)
	}
	require.Positive(t, r, "a remaining of 0 comes with a reset to wait for")
	return r, reset
}

// TestRetryAfterAdmits sends greedily until refused, then waits exactly
// Retry-After and sends again: that request must be admitted, whatever the
// phase of the refusal.
func TestRetryAfterAdmits(t *testing.T) {
	const clients, rounds = 100, 10
	for _, tc := range limitCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := serve(tc)
				var refusedAfterWait, refusals atomic.Int64
				var wg sync.WaitGroup
				for c := range clients {
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(c), 9))
						id := "client-" + strconv.Itoa(c)
						for range rounds {
							time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Second))))
							resp := get(h, "203.0.113.7:1", "X-Client", id)
							for resp.StatusCode == http.StatusOK {
								time.Sleep(time.Duration(rng.Int64N(int64(50 * time.Millisecond))))
								resp = get(h, "203.0.113.7:1", "X-Client", id)
							}
							refusals.Add(1)
							secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
							if err != nil || secs < 1 {
								refusedAfterWait.Add(1)
								continue
							}
							time.Sleep(time.Duration(secs) * time.Second)
							if get(h, "203.0.113.7:1", "X-Client", id).StatusCode != http.StatusOK {
								refusedAfterWait.Add(1)
							}
						}
					})
				}
				wg.Wait()
				assert.Equal(t, int64(clients*rounds), refusals.Load())
				assert.Zero(t, refusedAfterWait.Load(), "refused after waiting Retry-After")
			})
		})
	}
}
