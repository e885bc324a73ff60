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
	const capacity = 5
	clk := newManualClock()
	lb := newLeakyBucket(t, rate, capacity, throttle.WithClock(clk.Now))

	slots := saturatedRun(t, lb, clk, 8, 100_000, time.Millisecond)

	interval, err := rate.Interval()
	require.NoError(t, err)
	for _, span := range []time.Duration{0, interval - 1, interval, 7 * interval, time.Second, 10 * time.Second} {
		assert.LessOrEqual(t, maxInWindow(slots, span), 1+capacity+int(span/interval), "units in any %v", span)
	}
	assertLongRunRate(t, rate, slots)
}

func TestLeakyBucketSameInstant(t *testing.T) {
	tests := []struct {
		name         string
		giveCapacity int
		want         int
	}{
		{name: "no burst", giveCapacity: 0, want: 1},
		{name: "burst of 8", giveCapacity: 8, want: 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			lb := newLeakyBucket(t, throttle.PerSecond(1), tt.giveCapacity, throttle.WithClock(clk.Now))
			assert.Equal(t, tt.want, admitTogether(100, func() bool {
				ok, err := throttle.Allow(context.Background(), lb, "k", 1)
				return err == nil && ok
			}))
		})
	}
}

// TestLeakyBucketNeverRefusesWithinMaxWait is issue 11's twelfth defect:
// capacity is the upstream's burst, not a bound on the line, so a caller
// whose slot lies within its maxWait always gets it.
func TestLeakyBucketNeverRefusesWithinMaxWait(t *testing.T) {
	clk := newManualClock()
	lb := newLeakyBucket(t, throttle.PerSecond(48), 8, throttle.WithClock(clk.Now))
	interval, err := throttle.PerSecond(48).Interval()
	require.NoError(t, err)
	for i := range 600 {
		r, err := lb.Reserve(context.Background(), "k", 1, 30*time.Second)
		require.NoError(t, err)
		require.True(t, r.OK, "call %d refused with Delay %v", i, r.Delay)
		assert.Equal(t, time.Duration(max(i-8, 0))*interval, r.Delay, "call %d", i)
	}
	r, err := lb.Reserve(context.Background(), "k", 1, time.Second)
	require.NoError(t, err)
	assert.False(t, r.OK, "past maxWait")
	assert.Equal(t, 592*interval-time.Second, r.Delay, "refused with how long until it fits")
}

func TestLeakyBucketCapacity(t *testing.T) {
	clk := newManualClock()
	lb := newLeakyBucket(t, throttle.PerSecond(10), 3, throttle.WithClock(clk.Now))
	ctx := context.Background()

	var delays []time.Duration
	for range 6 {
		r, err := lb.Reserve(ctx, "k", 1, -1)
		require.NoError(t, err)
		require.True(t, r.OK)
		delays = append(delays, r.Delay)
	}
	assert.Equal(t, []time.Duration{0, 0, 0, 0, 100 * time.Millisecond, 200 * time.Millisecond}, delays,
		"1+capacity at once, then one per interval")

	r, err := lb.Reserve(ctx, "k", 1, 0)
	require.NoError(t, err)
	assert.False(t, r.OK)
	assert.Equal(t, 300*time.Millisecond, r.Delay)
	assert.Equal(t, 0, r.Remaining)
	assert.Equal(t, 3, lb.Capacity())
	assert.Equal(t, throttle.PerSecond(10), lb.Rate())
}

func TestLeakyBucketMultipleUnits(t *testing.T) {
	clk := newManualClock()
	lb := newLeakyBucket(t, throttle.PerSecond(10), 0, throttle.WithClock(clk.Now))
	ctx := context.Background()

	_, err := lb.Reserve(ctx, "k", 2, -1)
	assert.ErrorIs(t, err, throttle.ErrExceedsCapacity, "capacity 0 takes one unit at a time")

	lb = newLeakyBucket(t, throttle.PerSecond(10), 2, throttle.WithClock(clk.Now))
	r, err := lb.Reserve(ctx, "k", 3, -1)
	require.NoError(t, err)
	require.True(t, r.OK)
	assert.Equal(t, time.Duration(0), r.Delay)
	r, err = lb.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	require.True(t, r.OK)
	assert.Equal(t, 100*time.Millisecond, r.Delay, "the next unit waits its interval")
}

func TestLeakyBucketTolerance(t *testing.T) {
	tests := []struct {
		name         string
		giveCapacity int
		wantDelays   []time.Duration
	}{
		// 10ms of the capacity's span is kept in reserve: the fourth unit
		// waits 10ms, not a whole interval.
		{name: "capacity spares it", giveCapacity: 3, wantDelays: []time.Duration{0, 0, 0, 10 * time.Millisecond}},
		// Capacity 0 cannot spare a unit: the interval grows by 10ms.
		{name: "capacity cannot", giveCapacity: 0, wantDelays: []time.Duration{0, 30 * time.Millisecond, 60 * time.Millisecond, 90 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			lb := newLeakyBucket(t, throttle.PerSecond(50), tt.giveCapacity, throttle.WithClock(clk.Now), throttle.WithTolerance(throttle.DefaultTolerance))
			var delays []time.Duration
			for range 4 {
				r, err := lb.Reserve(context.Background(), "k", 1, -1)
				require.NoError(t, err)
				delays = append(delays, r.Delay)
			}
			assert.Equal(t, tt.wantDelays, delays)
		})
	}
}
