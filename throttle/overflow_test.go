package throttle_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// A capacity of math.MaxInt (a config's "no limit") overflowed capacity+1:
// NewLeakyBucket accepted it, and every Reserve then failed with "at most
// -9223372036854775808 fit". It must be refused at construction, naming
// the field.
func TestLeakyBucketHugeCapacityIsRefused(t *testing.T) {
	for _, c := range []int{math.MaxInt, math.MaxInt - 1, 1 << 62} {
		lb, err := throttle.NewLeakyBucket(throttle.PerSecond(10), c)
		require.Error(t, err, "capacity %d", c)
		assert.Nil(t, lb)
		assert.Contains(t, err.Error(), "capacity")
	}
}

// WithTolerance(math.MaxInt64) (or any tolerance near it) overflowed
// the bucket's ceil(d/interval): NewTokenBucket and NewLeakyBucket
// accepted it, and every Reserve then failed with "booked more than ...
// ahead", even the first one on a fresh key. It must be refused at
// construction, as the windows refuse it.
func TestBucketHugeToleranceIsRefused(t *testing.T) {
	for _, d := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - 50*time.Millisecond} {
		tb, err := throttle.NewTokenBucket(throttle.PerSecond(10), 5, throttle.WithTolerance(d))
		if assert.Error(t, err, "token bucket, tolerance %v", d) {
			assert.Nil(t, tb)
		}
		lb, err := throttle.NewLeakyBucket(throttle.PerSecond(10), 4, throttle.WithTolerance(d))
		if assert.Error(t, err, "leaky bucket, tolerance %v", d) {
			assert.Nil(t, lb)
		}
	}
	// A bucket that accepts a tolerance books its first unit now.
	tb, err := throttle.NewTokenBucket(throttle.PerSecond(10), 5, throttle.WithTolerance(time.Hour))
	require.NoError(t, err)
	r, err := tb.Reserve(context.Background(), "k", 1, 0)
	require.NoError(t, err)
	assert.True(t, r.OK)
}

// WithWindowOffset(d) and WithWindowOffset(d + k×window) name the same
// grid. An offset far from 0 (a config's minutes converted twice, say)
// overflowed "now − offset" and moved the resets to somewhere else.
func TestFixedWindowOffsetFarFromZero(t *testing.T) {
	ctx := context.Background()
	const window = 24 * time.Hour
	near := 8 * time.Hour
	far := near - 106_751*window // near math.MinInt64
	for _, off := range []time.Duration{near + window, near - 3*window, far} {
		clk := newManualClock()
		clk.Set(epoch().Add(7*time.Hour + 59*time.Minute))
		fw, err := throttle.NewFixedWindow(1, window, throttle.WithClock(clk.Now), throttle.WithWindowOffset(off))
		require.NoError(t, err)
		r, err := fw.Reserve(ctx, "k", 1, -1)
		require.NoError(t, err)
		require.Zero(t, r.Delay)
		r, err = fw.Reserve(ctx, "k", 1, -1)
		require.NoError(t, err)
		assert.Equal(t, time.Minute, r.Delay, "offset %v: the window resets at 08:00 UTC", off)
	}
}
