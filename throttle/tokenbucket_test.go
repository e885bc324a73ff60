package throttle_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

func newTokenBucket(t *testing.T, r throttle.Rate, burst int, opts ...throttle.Option) *throttle.TokenBucket {
	t.Helper()
	tb, err := throttle.NewTokenBucket(r, burst, opts...)
	require.NoError(t, err)
	return tb
}

func TestTokenBucketSaturatedRun(t *testing.T) {
	const burst = 10
	rate := throttle.PerSecond(1000)
	clk := newManualClock()
	tb := newTokenBucket(t, rate, burst, throttle.WithClock(clk.Now))

	slots := saturatedRun(t, tb, clk, 4*burst, 100_000, time.Millisecond)

	interval, err := rate.Interval()
	require.NoError(t, err)
	for _, span := range []time.Duration{0, interval / 2, interval, 7 * interval, time.Second, 10 * time.Second} {
		assert.LessOrEqual(t, maxInWindow(slots, span), burst+int(span/interval), "units in any %v", span)
	}
	assert.Equal(t, burst, maxInWindow(slots, 0), "the burst goes at once")
	assertLongRunRate(t, rate, slots)
}

func TestTokenBucketSlotsNeverDecrease(t *testing.T) {
	clk := newManualClock()
	tb := newTokenBucket(t, throttle.PerSecond(10), 3, throttle.WithClock(clk.Now))
	ctx := context.Background()

	var last time.Duration
	for i := range 50 {
		r, err := tb.Reserve(ctx, "k", 1+i%3, -1)
		require.NoError(t, err)
		require.True(t, r.OK)
		slot := clk.Since() + r.Delay
		assert.GreaterOrEqual(t, slot, last)
		last = slot
		clk.Advance(time.Duration(i%4) * 10 * time.Millisecond)
	}
}

func TestTokenBucketSameInstant(t *testing.T) {
	const burst = 7
	tests := []struct {
		name    string
		giveTry func(tb *throttle.TokenBucket) bool
	}{
		{name: "Reserve", giveTry: func(tb *throttle.TokenBucket) bool {
			r, err := tb.Reserve(context.Background(), "k", 1, 0)
			return err == nil && r.OK
		}},
		{name: "Allow", giveTry: func(tb *throttle.TokenBucket) bool {
			ok, err := throttle.Allow(context.Background(), tb, "k", 1)
			return err == nil && ok
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			tb := newTokenBucket(t, throttle.PerSecond(1), burst, throttle.WithClock(clk.Now))
			assert.Equal(t, burst, admitTogether(100, func() bool { return tt.giveTry(tb) }))
		})
	}
}

// admitTogether starts n goroutines that call try at the same moment and
// returns how many it admitted.
func admitTogether(n int, try func() bool) int {
	var (
		admitted atomic.Int64
		start    = make(chan struct{})
		wg       sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			<-start
			if try() {
				admitted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	return int(admitted.Load())
}

func TestTokenBucketReserve(t *testing.T) {
	clk := newManualClock()
	tb := newTokenBucket(t, throttle.PerSecond(10), 3, throttle.WithClock(clk.Now))
	ctx := context.Background()

	type want struct {
		ok        bool
		delay     time.Duration
		remaining int
	}
	steps := []struct {
		giveN       int
		giveMaxWait time.Duration
		want        want
	}{
		{giveN: 2, giveMaxWait: 0, want: want{ok: true, delay: 0, remaining: 1}},
		{giveN: 2, giveMaxWait: 0, want: want{ok: false, delay: 100 * time.Millisecond, remaining: 1}},
		{giveN: 2, giveMaxWait: 50 * time.Millisecond, want: want{ok: false, delay: 50 * time.Millisecond, remaining: 1}},
		{giveN: 2, giveMaxWait: 100 * time.Millisecond, want: want{ok: true, delay: 100 * time.Millisecond, remaining: 0}},
		{giveN: 3, giveMaxWait: -1, want: want{ok: true, delay: 400 * time.Millisecond, remaining: 0}},
	}
	for _, st := range steps {
		r, err := tb.Reserve(ctx, "k", st.giveN, st.giveMaxWait)
		require.NoError(t, err)
		assert.Equal(t, st.want, want{ok: r.OK, delay: r.Delay, remaining: r.Remaining})
	}

	clk.Advance(700 * time.Millisecond)
	r, err := tb.Reserve(ctx, "k", 3, 0)
	require.NoError(t, err)
	assert.True(t, r.OK, "the bucket is full again 3 intervals after the last slot")
	assert.Equal(t, 3, tb.Burst())
	assert.Equal(t, throttle.PerSecond(10), tb.Rate())
}

func TestTokenBucketKeysAreIndependent(t *testing.T) {
	clk := newManualClock()
	tb := newTokenBucket(t, throttle.PerMinute(1), 1, throttle.WithClock(clk.Now))
	ctx := context.Background()
	for _, key := range []string{"a", "b", ""} {
		ok, err := throttle.Allow(ctx, tb, key, 1)
		require.NoError(t, err)
		assert.True(t, ok, key)
	}
	ok, err := throttle.Allow(ctx, tb, "a", 1)
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestTokenBucketTolerance(t *testing.T) {
	tests := []struct {
		name          string
		giveRate      throttle.Rate
		giveBurst     int
		wantAtOnce    int
		wantNextDelay time.Duration
	}{
		// 10ms at 50/s is half an interval, kept out of the burst: the
		// fifth unit waits 10ms, not a whole interval.
		{name: "burst keeps the tolerance in reserve", giveRate: throttle.PerSecond(50), giveBurst: 5, wantAtOnce: 4, wantNextDelay: 10 * time.Millisecond},
		// At 1/s a whole unit in reserve would hold the tenth unit of a
		// full burst for a second.
		{name: "a slow bucket's last unit waits the tolerance", giveRate: throttle.PerSecond(1), giveBurst: 10, wantAtOnce: 9, wantNextDelay: 10 * time.Millisecond},
		// 10ms at 500/s is five intervals.
		{name: "burst keeps five units in reserve", giveRate: throttle.PerSecond(500), giveBurst: 8, wantAtOnce: 3, wantNextDelay: 2 * time.Millisecond},
		{name: "burst of one lengthens the interval", giveRate: throttle.PerSecond(50), giveBurst: 1, wantAtOnce: 1, wantNextDelay: 30 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			tb := newTokenBucket(t, tt.giveRate, tt.giveBurst, throttle.WithClock(clk.Now), throttle.WithTolerance(throttle.DefaultTolerance))
			assert.Equal(t, tt.wantAtOnce, admitTogether(20, func() bool {
				ok, err := throttle.Allow(context.Background(), tb, "k", 1)
				return err == nil && ok
			}))
			r, err := tb.Reserve(context.Background(), "k", 1, -1)
			require.NoError(t, err)
			assert.Equal(t, tt.wantNextDelay, r.Delay)
		})
	}
}

func TestTokenBucketWithoutToleranceIsLiteral(t *testing.T) {
	clk := newManualClock()
	tb := newTokenBucket(t, throttle.PerSecond(50), 5, throttle.WithClock(clk.Now))
	assert.Equal(t, 5, admitTogether(20, func() bool {
		ok, err := throttle.Allow(context.Background(), tb, "k", 1)
		return err == nil && ok
	}))
}

func TestAllowDoesNotAllocate(t *testing.T) {
	ctx := context.Background()
	key := string([]byte("api.example.com")) // not a constant
	tests := []struct {
		name  string
		giveL throttle.Limiter
	}{
		{name: "TokenBucket", giveL: newTokenBucket(t, throttle.PerSecond(1e9), 1_000_000)},
		{name: "LeakyBucket", giveL: newLeakyBucket(t, throttle.PerSecond(1), 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := throttle.Allow(ctx, tt.giveL, key, 1) // create the key
			require.NoError(t, err)
			allower, ok := tt.giveL.(throttle.Allower)
			require.True(t, ok)
			assert.Zero(t, testing.AllocsPerRun(1000, func() { _, _ = allower.AllowN(ctx, key, 1) }))
			assert.Zero(t, testing.AllocsPerRun(1000, func() { _, _ = throttle.Allow(ctx, tt.giveL, key, 1) }))
		})
	}
}

// A Reservation that stays with its caller lives on the caller's stack,
// as x/time/rate's does: Reserve and Cancel allocate nothing.
func TestReserveAllocatesOnlyItsReservation(t *testing.T) {
	ctx := context.Background()
	key := string([]byte("api.example.com")) // not a constant
	tb := newTokenBucket(t, throttle.PerSecond(1e9), 1_000_000)
	lb := newLeakyBucket(t, throttle.PerSecond(1e9), 1_000_000)
	sw, err := throttle.NewSlidingWindow(1000, 10*time.Microsecond)
	require.NoError(t, err)
	check := func(r *throttle.Reservation, err error) {
		if err == nil && r.OK {
			_ = r.Cancel(ctx)
		}
	}
	assert.LessOrEqual(t, testing.AllocsPerRun(1000, func() { check(tb.Reserve(ctx, key, 1, -1)) }), 1.0, "TokenBucket")
	assert.LessOrEqual(t, testing.AllocsPerRun(1000, func() { check(lb.Reserve(ctx, key, 1, -1)) }), 1.0, "LeakyBucket")
	assert.LessOrEqual(t, testing.AllocsPerRun(1000, func() { check(sw.Reserve(ctx, key, 1, -1)) }), 1.0, "SlidingWindow")
}
