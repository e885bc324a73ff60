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

func newSlidingWindowCounter(t *testing.T, limit int, window time.Duration, opts ...throttle.Option) *throttle.SlidingWindowCounter {
	t.Helper()
	c, err := throttle.NewSlidingWindowCounter(limit, window, opts...)
	require.NoError(t, err)
	return c
}

func TestSlidingWindowCounterSaturatedRun(t *testing.T) {
	const limit = 50
	tests := []struct {
		name       string
		giveWindow time.Duration
	}{
		{name: "starting on a boundary", giveWindow: time.Second},
		{name: "starting inside a window", giveWindow: 7 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			c := newSlidingWindowCounter(t, limit, tt.giveWindow, throttle.WithClock(clk.Now))

			slots := saturatedRun(t, c, clk, 4*limit, 50_000, 3*time.Millisecond)

			assert.LessOrEqual(t, maxInWindow(slots, tt.giveWindow-1), 2*limit-1, "units in any window")
			sent := sends{}
			for _, s := range slots {
				sent[s]++
			}
			assert.Equal(t, limit, sent.aligned(tt.giveWindow, epoch()), "units in one window of the grid")
			assertLongRunRate(t, throttle.Rate{N: limit, Per: tt.giveWindow}, slots)
		})
	}
}

// TestSlidingWindowCounterWorstCase plays the adversarial pattern: an
// idle window, limit units on its last nanosecond, and then everything
// the next window allows. It reaches the documented bound and no more.
func TestSlidingWindowCounterWorstCase(t *testing.T) {
	const limit, window = 10, time.Second
	clk := newManualClock()
	c := newSlidingWindowCounter(t, limit, window, throttle.WithClock(clk.Now))
	boundary := 5 * window
	clk.Set(epoch().Add(boundary - 1))
	r, err := c.Reserve(context.Background(), "k", limit, 0)
	require.NoError(t, err)
	require.True(t, r.OK)

	sent := sends{boundary - 1: limit}
	for {
		r, slot := reserveAt(t, c, clk, 1, -1)
		require.True(t, r.OK)
		if slot > boundary+window-2 {
			assert.Equal(t, boundary+window-1, slot, "the last unit waits for the previous window's weight to reach 0")
			break
		}
		sent[slot]++
	}
	assert.Equal(t, 2*limit-1, sent.most(window), "the bound is reached")
	assert.Equal(t, 2*limit-1, sent.total())
}

func TestSlidingWindowCounterReserve(t *testing.T) {
	clk := newManualClock()
	c := newSlidingWindowCounter(t, 4, 10*time.Second, throttle.WithClock(clk.Now))
	type want = reserveWant
	steps := []reserveStep{
		{giveN: 4, giveMaxWait: 0, want: want{ok: true, slot: 0, remaining: 0}},
		// The next window starts with the previous one's 4 units at
		// weight (w-1)/w: a unit fits once 4(w-1-e)/w <= 3.
		{giveN: 1, giveMaxWait: 0, want: want{ok: false, slot: 12500*time.Millisecond - 1, remaining: 0}},
		{giveN: 1, giveMaxWait: -1, want: want{ok: true, slot: 12500*time.Millisecond - 1, remaining: 0}},
		{giveN: 2, giveMaxWait: -1, want: want{ok: true, slot: 17500*time.Millisecond - 1, remaining: 0}},
		// At 18s the estimate is 3 + 4×(2s-1ns)/10s: no room until the
		// window's last nanosecond.
		{giveAdvance: 18 * time.Second, giveN: 1, giveMaxWait: 0, want: want{ok: false, slot: 20*time.Second - 1, remaining: 0}},
		// At 20s: 0 + 3×(10s-1ns)/10s.
		{giveAdvance: 2 * time.Second, giveN: 1, giveMaxWait: 0, want: want{ok: true, slot: 20 * time.Second, remaining: 0}},
		// At 28s: 1 + 3×(2s-1ns)/10s, rounded up to 2.
		{giveAdvance: 8 * time.Second, giveN: 1, giveMaxWait: 0, want: want{ok: true, slot: 28 * time.Second, remaining: 1}},
	}
	runReserveSteps(t, c, clk, steps)
	assert.Equal(t, 4, c.Limit())
	assert.Equal(t, 10*time.Second, c.Window())
}

func TestSlidingWindowCounterCancel(t *testing.T) {
	ctx := context.Background()
	t.Run("latest gives back everything", func(t *testing.T) {
		clk := newManualClock()
		c := newSlidingWindowCounter(t, 4, time.Second, throttle.WithClock(clk.Now))
		_, _ = reserveAt(t, c, clk, 4, 0)
		r, slot := reserveAt(t, c, clk, 2, -1)
		require.True(t, r.OK)
		require.NoError(t, r.Cancel(ctx))
		require.NoError(t, r.Cancel(ctx))
		again, againSlot := reserveAt(t, c, clk, 2, -1)
		assert.Equal(t, slot, againSlot)
		assert.Equal(t, r.Remaining, again.Remaining, "cancelling twice gave back no more")
	})
	t.Run("earlier window gives back nothing", func(t *testing.T) {
		clk := newManualClock()
		c := newSlidingWindowCounter(t, 2, time.Second, throttle.WithClock(clk.Now))
		_, _ = reserveAt(t, c, clk, 2, 0)
		first, slot := reserveAt(t, c, clk, 2, -1)
		require.Equal(t, 2*time.Second-1, slot, "window 1, once window 0's weight is 0")
		_, slot = reserveAt(t, c, clk, 1, -1)
		require.Equal(t, 2500*time.Millisecond-1, slot, "window 2, at weight 1/2")
		require.NoError(t, first.Cancel(ctx))
		_, slot = reserveAt(t, c, clk, 1, -1)
		assert.Equal(t, 3*time.Second-1, slot, "window 1 still counts 2")
	})
}

func TestSlidingWindowCounterPauseKeepsTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit, window = 10, time.Second
		c := newSlidingWindowCounter(t, limit, window)
		sent := underPressure(t, c, window)
		assert.LessOrEqual(t, sent.most(window), 2*limit-1)
	})
}
