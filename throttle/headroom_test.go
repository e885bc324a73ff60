package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// spacing books two units of key one after the other and returns how
// long the second waits after the first, at the bucket's current
// headroom; the clock then moves past both, so the key is full again.
func spacing(t *testing.T, l throttle.Limiter, clk *manualClock, key string) time.Duration {
	t.Helper()
	ctx := context.Background()
	first, err := l.Reserve(ctx, key, 1, -1)
	require.NoError(t, err)
	second, err := l.Reserve(ctx, key, 1, -1)
	require.NoError(t, err)
	clk.Advance(time.Second)
	return second.Delay - first.Delay
}

// answer tells l that one attempt of key came back after latency, sent
// late after its slot, throttled or not, advancing the clock by every.
func answer(t *testing.T, l throttle.Learner, clk *manualClock, every, late, latency time.Duration, throttled bool) {
	t.Helper()
	clk.Advance(every)
	require.NoError(t, l.Learn(context.Background(), "k", throttle.Outcome{N: 1, Late: late, Latency: latency, Throttled: throttled}))
}

// A burst of 1 at 48/s: the constant tolerance lengthened every interval
// by 10ms (1.48x); answers without a refusal take the headroom down to
// nothing, and a refusal the bucket did not expect restores it at once.
func TestTokenBucketHeadroomFollowsAnswers(t *testing.T) {
	const interval = time.Second / 48
	tests := []struct {
		name     string
		giveLate time.Duration // every answer's lateness
		giveWave time.Duration // every other answer's extra latency
		// wantCalm: spacing after 2 s of calm answers; wantAfter: right
		// after a refusal; wantSettled: 2 s of answers after that.
		wantCalm, wantAfter, wantSettled time.Duration
	}{
		{
			name:     "steady path: nothing to keep",
			wantCalm: interval, wantAfter: interval + throttle.DefaultTolerance, wantSettled: interval,
		},
		{
			name:     "jittery path: a refusal keeps its jitter",
			giveLate: time.Millisecond, giveWave: 2 * time.Millisecond,
			wantCalm: interval, wantAfter: interval + throttle.DefaultTolerance, wantSettled: interval + 3*time.Millisecond,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			for _, l := range []interface {
				throttle.Limiter
				throttle.Learner
			}{
				newTokenBucket(t, throttle.PerSecond(48), 1, throttle.WithClock(clk.Now), throttle.WithTolerance(throttle.DefaultTolerance)),
				newLeakyBucket(t, throttle.PerSecond(48), 0, throttle.WithClock(clk.Now), throttle.WithTolerance(throttle.DefaultTolerance)),
			} {
				require.InDelta(t, interval+throttle.DefaultTolerance, spacing(t, l, clk, "a"), float64(time.Microsecond), "a new bucket keeps the whole tolerance")
				calm := func() {
					for i := range 96 {
						answer(t, l, clk, interval, tt.giveLate, 5*time.Millisecond+time.Duration(i%2)*tt.giveWave, false)
					}
				}
				calm()
				assert.InDelta(t, tt.wantCalm, spacing(t, l, clk, "b"), float64(50*time.Microsecond), "after calm answers")
				answer(t, l, clk, interval, 0, 5*time.Millisecond, true)
				assert.InDelta(t, tt.wantAfter, spacing(t, l, clk, "c"), float64(time.Microsecond), "right after a refusal")
				calm()
				assert.InDelta(t, tt.wantSettled, spacing(t, l, clk, "d"), float64(50*time.Microsecond), "settled after the refusal")
			}
		})
	}
}

// A bucket whose burst can spare the tolerance keeps it out of the
// burst's span, whatever the answers say: it pays the tolerance once, not
// on every interval, so following the path would gain little and risk a
// refusal.
func TestTokenBucketToleranceSparedStays(t *testing.T) {
	clk := newManualClock()
	tb := newTokenBucket(t, throttle.PerSecond(50), 5, throttle.WithClock(clk.Now), throttle.WithTolerance(throttle.DefaultTolerance))
	ctx := context.Background()
	for range 200 {
		clk.Advance(20 * time.Millisecond)
		require.NoError(t, tb.Learn(ctx, "other", throttle.Outcome{N: 1, Latency: time.Millisecond}))
	}
	var last time.Duration
	for range 5 {
		r, err := tb.Reserve(ctx, "k", 1, -1)
		require.NoError(t, err)
		last = r.Delay
	}
	assert.Equal(t, throttle.DefaultTolerance, last, "the fifth unit waits the tolerance: it stays in reserve")
}

// Answers without a latency or lateness, failed attempts and throttled
// answers to attempts the bucket did not book say nothing of the jitter
// and do not count as refusals.
func TestTokenBucketHeadroomIgnoresUnbooked(t *testing.T) {
	const interval = time.Second / 48
	clk := newManualClock()
	tb := newTokenBucket(t, throttle.PerSecond(48), 1, throttle.WithClock(clk.Now), throttle.WithTolerance(throttle.DefaultTolerance))
	for range 96 {
		clk.Advance(interval)
		require.NoError(t, tb.Learn(context.Background(), "k", throttle.Outcome{N: 1}))
	}
	require.InDelta(t, interval, spacing(t, tb, clk, "a"), float64(50*time.Microsecond))
	require.NoError(t, tb.Learn(context.Background(), "k", throttle.Outcome{N: 1, Throttled: true, Failed: true}))
	require.NoError(t, tb.Learn(context.Background(), "k", throttle.Outcome{Throttled: true}))
	assert.InDelta(t, interval, spacing(t, tb, clk, "b"), float64(50*time.Microsecond))
}
