package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

func newLeakyBucket(t *testing.T, r throttle.Rate, capacity int, opts ...throttle.Option) *throttle.LeakyBucket {
	t.Helper()
	lb, err := throttle.NewLeakyBucket(r, capacity, opts...)
	require.NoError(t, err)
	return lb
}

func TestLeakyBucketSaturatedRun(t *testing.T) {
	rate := throttle.PerSecond(1000)
	clk := newManualClock()
	lb := newLeakyBucket(t, rate, 5, throttle.WithClock(clk.Now))

	slots := saturatedRun(t, lb, clk, 8, 100_000, time.Millisecond)

	interval, err := rate.Interval()
	require.NoError(t, err)
	for _, span := range []time.Duration{0, interval - 1, interval, 7 * interval, time.Second, 10 * time.Second} {
		assert.LessOrEqual(t, maxInWindow(slots, span), 1+int(span/interval), "units in any %v", span)
	}
	assertLongRunRate(t, rate, slots)
}

func TestLeakyBucketSameInstant(t *testing.T) {
	clk := newManualClock()
	lb := newLeakyBucket(t, throttle.PerSecond(1), 10, throttle.WithClock(clk.Now))
	assert.Equal(t, 1, admitTogether(100, func() bool {
		ok, err := throttle.Allow(context.Background(), lb, "k", 1)
		return err == nil && ok
	}), "no burst")
}

func TestLeakyBucketCapacity(t *testing.T) {
	clk := newManualClock()
	lb := newLeakyBucket(t, throttle.PerSecond(10), 3, throttle.WithClock(clk.Now))
	ctx := context.Background()

	var delays []time.Duration
	for range 4 {
		r, err := lb.Reserve(ctx, "k", 1, -1)
		require.NoError(t, err)
		require.True(t, r.OK)
		delays = append(delays, r.Delay)
	}
	assert.Equal(t, []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}, delays,
		"one now and capacity 3 in the future, evenly spaced")

	r, err := lb.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	assert.False(t, r.OK, "the line is full")
	assert.Equal(t, 100*time.Millisecond, r.Delay)
	assert.Equal(t, 0, r.Remaining)

	clk.Advance(r.Delay)
	r, err = lb.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	assert.True(t, r.OK, "Delay said when the same call succeeds")
	assert.Equal(t, 300*time.Millisecond, r.Delay)
	assert.Equal(t, 3, lb.Capacity())
	assert.Equal(t, throttle.PerSecond(10), lb.Rate())
}

func TestLeakyBucketMultipleUnits(t *testing.T) {
	clk := newManualClock()
	lb := newLeakyBucket(t, throttle.PerSecond(10), 3, throttle.WithClock(clk.Now))
	ctx := context.Background()

	r, err := lb.Reserve(ctx, "k", 3, -1)
	require.NoError(t, err)
	require.True(t, r.OK)
	assert.Equal(t, time.Duration(0), r.Delay)

	r, err = lb.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	require.True(t, r.OK)
	assert.Equal(t, 300*time.Millisecond, r.Delay, "the next unit waits n intervals")

	_, err = lb.Reserve(ctx, "k", 5, -1)
	assert.ErrorIs(t, err, throttle.ErrExceedsCapacity)
}

func TestLeakyBucketTolerance(t *testing.T) {
	clk := newManualClock()
	lb := newLeakyBucket(t, throttle.PerSecond(50), 3, throttle.WithClock(clk.Now), throttle.WithTolerance(throttle.DefaultTolerance))
	ctx := context.Background()
	_, err := lb.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	r, err := lb.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	assert.Equal(t, 30*time.Millisecond, r.Delay)
}
