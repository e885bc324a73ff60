package throttle_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// learningLimiter is a limiter that learns from answers: a bucket its
// key's rate, a window its key's limit.
type learningLimiter interface {
	throttle.Limiter
	throttle.Learner
	throttle.Pauser
}

// steadyInterval returns the spacing of key's bookings once its burst is
// spent, after a pause long enough to refill it.
func steadyInterval(t *testing.T, l throttle.Limiter, key string, burst int) time.Duration {
	t.Helper()
	time.Sleep(10 * time.Second)
	var last, prev time.Duration
	for range burst + 2 {
		r, err := l.Reserve(context.Background(), key, 1, -1)
		require.NoError(t, err)
		prev, last = last, r.Delay
	}
	return last - prev
}

// A bucket configured above the upstream's rate learns, from the
// refusals, a rate below what the upstream admits, and keeps it: the
// README's recipe 25% too high (recipe_upstreams_test.go). The upstream
// is a bucket of the same burst, and each refusal pauses the key for a
// second, as a 429's Retry-After does through a Transport.
func TestBucketLearnsRateFromRefusals(t *testing.T) {
	tests := []struct {
		name         string
		giveClient   func(t *testing.T) learningLimiter
		giveUpstream func(t *testing.T) throttle.Allower
		// wantMaxRefused bounds the refusals in 30 s, wantMinAdmitted
		// what the upstream admitted (20/s for 30 s is 600, and a
		// second's pause costs 20).
		wantMaxRefused, wantMinAdmitted int
	}{
		{
			name:            "token bucket 25/s against 20/s, burst 10",
			giveClient:      func(t *testing.T) learningLimiter { return newTokenBucket(t, throttle.PerSecond(25), 10) },
			giveUpstream:    func(t *testing.T) throttle.Allower { return newTokenBucket(t, throttle.PerSecond(20), 10) },
			wantMaxRefused:  3,
			wantMinAdmitted: 545, // the goal: at most 1.10× the time 600 take
		},
		{
			name:            "leaky bucket 25/s against 20/s, capacity 4",
			giveClient:      func(t *testing.T) learningLimiter { return newLeakyBucket(t, throttle.PerSecond(25), 4) },
			giveUpstream:    func(t *testing.T) throttle.Allower { return newLeakyBucket(t, throttle.PerSecond(20), 4) },
			wantMaxRefused:  3,
			wantMinAdmitted: 545, // the goal: at most 1.10× the time 600 take
		},
		{
			name:            "the published rate: nothing to learn",
			giveClient:      func(t *testing.T) learningLimiter { return newTokenBucket(t, throttle.PerSecond(20), 10) },
			giveUpstream:    func(t *testing.T) throttle.Allower { return newTokenBucket(t, throttle.PerSecond(20), 10) },
			wantMaxRefused:  0,
			wantMinAdmitted: 600,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				refused, admitted := sendThrough(t, tt.giveClient(t), tt.giveUpstream(t), 30*time.Second)
				assert.LessOrEqual(t, refused, tt.wantMaxRefused, "refusals")
				assert.GreaterOrEqual(t, admitted, tt.wantMinAdmitted, "admitted")
			})
		})
	}
}

// sendThrough sends one unit at a time through client to upstream for d,
// telling client of every answer; each refusal pauses the key for a
// second, as a 429's Retry-After does through a Transport.
func sendThrough(t *testing.T, client learningLimiter, upstream throttle.Allower, d time.Duration) (refused, admitted int) {
	t.Helper()
	ctx := context.Background()
	for end := time.Now().Add(d); time.Now().Before(end); {
		r, err := client.Reserve(ctx, "k", 1, -1)
		require.NoError(t, err)
		require.NoError(t, r.Wait(ctx))
		ok, err := upstream.AllowN(ctx, "k", 1)
		require.NoError(t, err)
		if !ok {
			refused++
			require.NoError(t, client.Pause(ctx, "k", time.Second))
		} else {
			admitted++
		}
		require.NoError(t, client.Learn(ctx, "k", throttle.Outcome{N: 1, Throttled: !ok}))
	}
	t.Logf("refused %d, admitted %d", refused, admitted)
	return refused, admitted
}

// What a refusal says of the rate depends on the run of answers before
// it: units sent at the key's rate (25/s: 40 ms apart) and admitted.
func TestBucketLearnedRateBound(t *testing.T) {
	const every = 40 * time.Millisecond
	tests := []struct {
		name      string
		giveBurst int
		// giveRuns are runs of admitted units sent every 40 ms, each
		// after an idle stretch of its gap; the refusal follows the last.
		giveRuns []struct {
			gap time.Duration
			n   int
		}
		wantInterval time.Duration
	}{
		{
			name:      "a run refused after 21 admitted: below (21+1-5)/0.84 s",
			giveBurst: 5,
			giveRuns: []struct {
				gap time.Duration
				n   int
			}{{n: 21}},
			wantInterval: 21 * every / 17,
		},
		{
			name:      "an idle stretch starts a new run, too short to say anything",
			giveBurst: 5,
			giveRuns: []struct {
				gap time.Duration
				n   int
			}{{n: 21}, {gap: 2 * time.Second, n: 3}},
			wantInterval: every,
		},
		{
			name:      "a lone refusal at the rate, burst 1: jitter, not the rate",
			giveBurst: 1,
			giveRuns: []struct {
				gap time.Duration
				n   int
			}{{n: 100}},
			wantInterval: every,
		},
		{
			name:      "a refusal just past a large burst: at most 30% off",
			giveBurst: 10,
			giveRuns: []struct {
				gap time.Duration
				n   int
			}{{n: 12}},
			wantInterval: every * 10 / 7,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				for _, l := range []learningLimiter{
					newTokenBucket(t, throttle.PerSecond(25), tt.giveBurst),
					newLeakyBucket(t, throttle.PerSecond(25), tt.giveBurst-1),
				} {
					for _, run := range tt.giveRuns {
						time.Sleep(run.gap)
						for range run.n {
							require.NoError(t, l.Learn(ctx, "k", throttle.Outcome{N: 1}))
							time.Sleep(every)
						}
					}
					require.NoError(t, l.Learn(ctx, "k", throttle.Outcome{N: 1, Throttled: true}))
					assert.InDelta(t, tt.wantInterval, steadyInterval(t, l, "k", tt.giveBurst), float64(time.Microsecond))
					assert.Equal(t, every, steadyInterval(t, l, "other", tt.giveBurst), "another key keeps the bucket's rate")
				}
			})
		})
	}
}

// A learned rate lasts a minute after the refusal that set it: an
// upstream whose limit rose gets the configured rate back.
func TestBucketForgetsLearnedRate(t *testing.T) {
	const every = 40 * time.Millisecond
	tests := []struct {
		name         string
		giveAfter    time.Duration
		wantInterval time.Duration
	}{
		{name: "within the minute: kept", giveAfter: 50 * time.Second, wantInterval: 21 * every / 17},
		{name: "past it: the configured rate", giveAfter: 61 * time.Second, wantInterval: every},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				l := newTokenBucket(t, throttle.PerSecond(25), 5)
				for range 21 {
					require.NoError(t, l.Learn(ctx, "k", throttle.Outcome{N: 1}))
					time.Sleep(every)
				}
				require.NoError(t, l.Learn(ctx, "k", throttle.Outcome{N: 1, Throttled: true}))
				time.Sleep(tt.giveAfter)
				require.NoError(t, l.Learn(ctx, "k", throttle.Outcome{N: 1}))
				assert.InDelta(t, tt.wantInterval, steadyInterval(t, l, "k", 5), float64(time.Microsecond))
			})
		})
	}
}
