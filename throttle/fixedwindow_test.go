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

func newFixedWindow(t *testing.T, limit int, window time.Duration, opts ...throttle.Option) *throttle.FixedWindow {
	t.Helper()
	f, err := throttle.NewFixedWindow(limit, window, opts...)
	require.NoError(t, err)
	return f
}

func TestFixedWindowSaturatedRun(t *testing.T) {
	const limit = 50
	for _, window := range []time.Duration{time.Second, 7 * time.Second} {
		t.Run(window.String(), func(t *testing.T) {
			clk := newManualClock()
			f := newFixedWindow(t, limit, window, throttle.WithClock(clk.Now))

			// Enough windows that a partial first one does not skew the rate.
			slots := saturatedRun(t, f, clk, 2*limit, 150_000, 3*time.Millisecond)

			sent := sends{}
			for _, s := range slots {
				sent[s]++
			}
			assert.Equal(t, limit, sent.aligned(window, epoch()), "units in one aligned window")
			assert.LessOrEqual(t, maxInWindow(slots, window-1), 2*limit, "units in any window")
			assertLongRunRate(t, throttle.Rate{N: limit, Per: window}, slots)
		})
	}
}

func TestFixedWindowPauseKeepsWindowsApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit, window = 10, time.Second
		start := time.Now() // synctest's clock starts on a whole second
		f := newFixedWindow(t, limit, window)
		sent := underPressure(t, f, window)
		assert.LessOrEqual(t, sent.aligned(window, start), limit)
	})
}

func TestFixedWindowReserve(t *testing.T) {
	clk := newManualClock()
	clk.Advance(90 * time.Second) // halfway through a minute
	f := newFixedWindow(t, 5, time.Minute, throttle.WithClock(clk.Now))
	type want = reserveWant
	steps := []reserveStep{
		{giveN: 3, giveMaxWait: 0, want: want{ok: true, slot: 90 * time.Second, remaining: 2}},
		{giveN: 3, giveMaxWait: 0, want: want{ok: false, slot: 2 * time.Minute, remaining: 2}},
		// Refused, but with 29s to spare the same call succeeds in 1s.
		{giveN: 3, giveMaxWait: 29 * time.Second, want: want{ok: false, slot: 91 * time.Second, remaining: 2}},
		{giveN: 3, giveMaxWait: 30 * time.Second, want: want{ok: true, slot: 2 * time.Minute, remaining: 2}},
		{giveN: 5, giveMaxWait: -1, want: want{ok: true, slot: 3 * time.Minute, remaining: 0}},
		{giveN: 2, giveMaxWait: -1, want: want{ok: true, slot: 4 * time.Minute, remaining: 3}},
		{giveAdvance: 2 * time.Minute, giveN: 1, giveMaxWait: 0, want: want{ok: false, slot: 4 * time.Minute, remaining: 0}},
		{giveN: 1, giveMaxWait: -1, want: want{ok: true, slot: 4 * time.Minute, remaining: 2}},
	}
	runReserveSteps(t, f, clk, steps)
	assert.Equal(t, 5, f.Limit())
	assert.Equal(t, time.Minute, f.Window())
}

func TestFixedWindowOffset(t *testing.T) {
	tests := []struct {
		name       string
		giveOffset time.Duration
		giveAt     time.Time
		wantReset  time.Time
	}{
		{
			name:      "UTC midnight",
			giveAt:    time.Date(2026, 3, 2, 7, 59, 0, 0, time.UTC),
			wantReset: time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC),
		},
		{
			name:       "Pacific midnight, before the reset",
			giveOffset: 8 * time.Hour,
			giveAt:     time.Date(2026, 3, 2, 7, 59, 0, 0, time.UTC),
			wantReset:  time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC),
		},
		{
			name:       "Pacific midnight, after the reset",
			giveOffset: 8 * time.Hour,
			giveAt:     time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC),
			wantReset:  time.Date(2026, 3, 3, 8, 0, 0, 0, time.UTC),
		},
		{
			name:       "negative offset",
			giveOffset: -2 * time.Hour,
			giveAt:     time.Date(2026, 3, 2, 21, 0, 0, 0, time.UTC),
			wantReset:  time.Date(2026, 3, 2, 22, 0, 0, 0, time.UTC),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			clk.Set(tt.giveAt)
			f := newFixedWindow(t, 2, 24*time.Hour, throttle.WithClock(clk.Now), throttle.WithWindowOffset(tt.giveOffset))
			r, err := f.Reserve(context.Background(), "k", 2, 0)
			require.NoError(t, err)
			require.True(t, r.OK)
			r, err = f.Reserve(context.Background(), "k", 1, -1)
			require.NoError(t, err)
			require.True(t, r.OK)
			assert.Equal(t, tt.wantReset, tt.giveAt.Add(r.Delay))
		})
	}
}

func TestFixedWindowCancel(t *testing.T) {
	ctx := context.Background()
	t.Run("latest gives back everything", func(t *testing.T) {
		clk := newManualClock()
		f := newFixedWindow(t, 3, time.Minute, throttle.WithClock(clk.Now))
		_, _ = reserveAt(t, f, clk, 3, 0)
		r, slot := reserveAt(t, f, clk, 2, -1)
		require.Equal(t, time.Minute, slot)
		require.Equal(t, 1, r.Remaining)
		require.NoError(t, r.Cancel(ctx))
		require.NoError(t, r.Cancel(ctx))
		again, slot := reserveAt(t, f, clk, 3, -1)
		assert.Equal(t, time.Minute, slot)
		assert.Equal(t, 0, again.Remaining, "cancelling twice gave back no more")
	})
	t.Run("an earlier window gives back nothing", func(t *testing.T) {
		clk := newManualClock()
		f := newFixedWindow(t, 3, time.Minute, throttle.WithClock(clk.Now))
		_, _ = reserveAt(t, f, clk, 3, 0)
		first, slot := reserveAt(t, f, clk, 3, -1)
		require.Equal(t, time.Minute, slot)
		_, slot = reserveAt(t, f, clk, 1, -1)
		require.Equal(t, 2*time.Minute, slot)
		require.NoError(t, first.Cancel(ctx))
		_, slot = reserveAt(t, f, clk, 2, -1)
		assert.Equal(t, 2*time.Minute, slot, "the cursor's window still has room")
		_, slot = reserveAt(t, f, clk, 1, -1)
		assert.Equal(t, 3*time.Minute, slot, "no slot goes back to window 1")
	})
	t.Run("the cursor's window gives back when not latest", func(t *testing.T) {
		clk := newManualClock()
		f := newFixedWindow(t, 3, time.Minute, throttle.WithClock(clk.Now))
		_, _ = reserveAt(t, f, clk, 3, 0)
		first, _ := reserveAt(t, f, clk, 2, -1)
		_, _ = reserveAt(t, f, clk, 1, -1)
		require.NoError(t, first.Cancel(ctx))
		r, slot := reserveAt(t, f, clk, 2, -1)
		assert.Equal(t, time.Minute, slot)
		assert.Equal(t, 0, r.Remaining)
	})
}

func TestFixedWindowTolerance(t *testing.T) {
	tests := []struct {
		name       string
		giveOpts   []throttle.Option
		wantAfter2 bool
	}{
		{name: "literal", wantAfter2: true},
		{name: "tolerant", giveOpts: []throttle.Option{throttle.WithTolerance(throttle.DefaultTolerance)}, wantAfter2: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			clk.Set(epoch().Add(time.Minute - time.Millisecond)) // just before a reset
			f := newFixedWindow(t, 3, time.Minute, append(tt.giveOpts, throttle.WithClock(clk.Now))...)
			ok, err := throttle.Allow(context.Background(), f, "k", 2)
			require.NoError(t, err)
			require.True(t, ok)

			clk.Advance(time.Millisecond) // the next window
			ok, err = throttle.Allow(context.Background(), f, "k", 2)
			require.NoError(t, err)
			assert.Equal(t, tt.wantAfter2, ok, "units sent just before the reset may arrive after it")
		})
	}

	_, err := throttle.NewFixedWindow(3, time.Second, throttle.WithTolerance(time.Second))
	assert.ErrorContains(t, err, "throttle: WithTolerance must be shorter than the window (1s), got 1s")
}

// TestAllFixedWindowAndTokenBucket books a daily quota and a per-second
// rate together: each unit goes at one slot that suits both, and the
// day's turn releases units at the rate, not as a herd.
func TestAllFixedWindowAndTokenBucket(t *testing.T) {
	clk := newManualClock()
	clk.Set(epoch().Add(24*time.Hour - 2*time.Second))
	day := newFixedWindow(t, 3, 24*time.Hour, throttle.WithClock(clk.Now))
	second := newTokenBucket(t, throttle.PerSecond(1), 1, throttle.WithClock(clk.Now))
	l := throttle.All(day, second)

	var delays []time.Duration
	for range 6 {
		r, err := l.Reserve(context.Background(), "k", 1, -1)
		require.NoError(t, err)
		require.True(t, r.OK)
		delays = append(delays, r.Delay)
	}
	assert.Equal(t, []time.Duration{
		0, time.Second, // the day's last two seconds
		2 * time.Second, 3 * time.Second, 4 * time.Second, // the next day, one a second
		// Its quota is spent: the day after, no earlier in it than the last
		// unit went in its own day, so that a pause can never move two days'
		// units into one.
		24*time.Hour + 4*time.Second,
	}, delays)

	r, err := l.Reserve(context.Background(), "k", 1, 0)
	require.NoError(t, err)
	assert.False(t, r.OK)
	r, err = second.Reserve(context.Background(), "other", 1, 0)
	require.NoError(t, err)
	assert.True(t, r.OK, "a refused All leaves its parts untouched")
}
