package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// KeyState.Remaining is "how many units could be taken now". While a key
// is paused nothing can be, and the buckets and the sliding counter say 0;
// the sliding log and the fixed window said their whole limit.
func TestInspectRemainingIsZeroWhilePaused(t *testing.T) {
	ctx := context.Background()
	clk := newManualClock()
	opt := throttle.WithClock(clk.Now)
	tb, _ := throttle.NewTokenBucket(throttle.PerSecond(10), 2, opt)
	lb, _ := throttle.NewLeakyBucket(throttle.PerSecond(10), 1, opt)
	sw, _ := throttle.NewSlidingWindow(2, time.Second, opt)
	swc, _ := throttle.NewSlidingWindowCounter(2, time.Second, opt)
	fw, _ := throttle.NewFixedWindow(2, time.Second, opt)
	for name, l := range map[string]throttle.Limiter{"TokenBucket": tb, "LeakyBucket": lb, "SlidingWindow": sw, "SlidingWindowCounter": swc, "FixedWindow": fw} {
		require.NoError(t, l.(throttle.Pauser).Pause(ctx, "k", time.Second))
		st, err := l.(throttle.Inspector).Inspect(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, 0, st.Remaining, "%s: %+v", name, st)
		assert.Equal(t, time.Second, st.Paused, name)
		ok, err := throttle.Allow(ctx, l, "k", 1)
		require.NoError(t, err)
		assert.False(t, ok, "%s: Allow agrees: nothing now", name)
	}
}
