package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// TestSettleTokenBucket settles bookings of a bucket of 10 at 10/s and
// checks what the next caller can take at once.
func TestSettleTokenBucket(t *testing.T) {
	tests := []struct {
		name string
		// give books on the bucket and settles, moving clk as it likes.
		give          func(t *testing.T, tb *throttle.TokenBucket, clk *manualClock)
		wantRemaining int
	}{
		{
			name: "the latest booking gives back in full",
			give: func(t *testing.T, tb *throttle.TokenBucket, clk *manualClock) {
				r := reserve(t, tb, 10, 0)
				require.NoError(t, r.Settle(context.Background(), 4))
			},
			wantRemaining: 6,
		},
		{
			name: "an earlier booking in the same run gives back in full",
			give: func(t *testing.T, tb *throttle.TokenBucket, clk *manualClock) {
				r1 := reserve(t, tb, 5, 0)
				reserve(t, tb, 3, 0)
				require.NoError(t, r1.Settle(context.Background(), 1))
			},
			wantRemaining: 6,
		},
		{
			name: "an earlier booking gives back only the slack the later one left",
			give: func(t *testing.T, tb *throttle.TokenBucket, clk *manualClock) {
				r1 := reserve(t, tb, 10, 0)
				reserve(t, tb, 4, -1) // waits 4 intervals, for r1's units: they stay before it
				require.NoError(t, r1.Settle(context.Background(), 0))
			},
			wantRemaining: 2, // the 4 units at 4 intervals keep tat 8 intervals ahead
		},
		{
			name: "a booking before an idle stretch gives back nothing",
			give: func(t *testing.T, tb *throttle.TokenBucket, clk *manualClock) {
				r1 := reserve(t, tb, 10, 0)
				clk.Advance(2 * time.Second) // the bucket refilled: the stretch absorbed r1
				reserve(t, tb, 1, 0)
				require.NoError(t, r1.Settle(context.Background(), 0))
			},
			wantRemaining: 9,
		},
		{
			name: "a settle after the slot is the normal case",
			give: func(t *testing.T, tb *throttle.TokenBucket, clk *manualClock) {
				r := reserve(t, tb, 10, 0)
				clk.Advance(300 * time.Millisecond)
				require.NoError(t, r.Settle(context.Background(), 5))
			},
			wantRemaining: 8, // 10 - 5 + 3 refilled
		},
		{
			name: "an excess is charged",
			give: func(t *testing.T, tb *throttle.TokenBucket, clk *manualClock) {
				r := reserve(t, tb, 2, 0)
				require.NoError(t, r.Settle(context.Background(), 7))
			},
			wantRemaining: 3,
		},
		{
			name: "a second settle does nothing",
			give: func(t *testing.T, tb *throttle.TokenBucket, clk *manualClock) {
				r := reserve(t, tb, 4, 0)
				require.NoError(t, r.Settle(context.Background(), 2))
				require.NoError(t, r.Settle(context.Background(), 0))
			},
			wantRemaining: 8,
		},
		{
			name: "a cancelled reservation settles to nothing",
			give: func(t *testing.T, tb *throttle.TokenBucket, clk *manualClock) {
				reserve(t, tb, 4, 0)
				r := reserve(t, tb, 6, 0)
				require.NoError(t, r.Cancel(context.Background()))
				require.NoError(t, r.Settle(context.Background(), 9))
			},
			wantRemaining: 6,
		},
		{
			name: "Cancel after Settle does nothing",
			give: func(t *testing.T, tb *throttle.TokenBucket, clk *manualClock) {
				r := reserve(t, tb, 4, 0)
				require.NoError(t, r.Settle(context.Background(), 3))
				require.NoError(t, r.Cancel(context.Background()))
			},
			wantRemaining: 7,
		},
		{
			name: "Cancel of a later booking keeps an earlier settle",
			give: func(t *testing.T, tb *throttle.TokenBucket, clk *manualClock) {
				r1 := reserve(t, tb, 2, 0)
				r2 := reserve(t, tb, 2, 0)
				require.NoError(t, r1.Settle(context.Background(), 6))
				require.NoError(t, r2.Cancel(context.Background()))
			},
			wantRemaining: 4,
		},
		{
			name: "a refused reservation settles to nothing",
			give: func(t *testing.T, tb *throttle.TokenBucket, clk *manualClock) {
				reserve(t, tb, 10, 0)
				r, err := tb.Reserve(context.Background(), "k", 1, 0)
				require.NoError(t, err)
				require.False(t, r.OK)
				require.NoError(t, r.Settle(context.Background(), 5))
			},
			wantRemaining: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			tb := newTokenBucket(t, throttle.PerSecond(10), 10, throttle.WithClock(clk.Now))
			tt.give(t, tb, clk)
			st, err := tb.Inspect(context.Background(), "k")
			require.NoError(t, err)
			assert.Equal(t, tt.wantRemaining, st.Remaining)
		})
	}
}

func TestSettleBadInput(t *testing.T) {
	tests := []struct {
		name       string
		giveActual []int
		wantErr    string
	}{
		{name: "negative", giveActual: []int{-1}, wantErr: "throttle: Settle's actual cost of part 0 must not be negative, got -1"},
		{name: "none", giveActual: nil, wantErr: "throttle: Settle needs 1 actual costs, one per part, got 0"},
		{name: "two for one part", giveActual: []int{1, 2}, wantErr: "throttle: Settle needs 1 actual costs, one per part, got 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			tb := newTokenBucket(t, throttle.PerSecond(10), 10, throttle.WithClock(clk.Now))
			r := reserve(t, tb, 4, 0)
			err := r.Settle(context.Background(), tt.giveActual...)
			require.Error(t, err)
			assert.EqualError(t, err, tt.wantErr)
			require.NoError(t, r.Settle(context.Background(), 0), "a bad call changes nothing, not even the state")
			st, err := tb.Inspect(context.Background(), "k")
			require.NoError(t, err)
			assert.Equal(t, 10, st.Remaining)
		})
	}
}

func TestSettleAboveCapacityIsChargedAndReported(t *testing.T) {
	clk := newManualClock()
	tb := newTokenBucket(t, throttle.PerSecond(10), 10, throttle.WithClock(clk.Now))
	r := reserve(t, tb, 1, 0)
	err := r.Settle(context.Background(), 25)
	require.ErrorIs(t, err, throttle.ErrExceedsCapacity)
	assert.Contains(t, err.Error(), `key "k" settled at 25 units, charged`)
	next := reserve(t, tb, 1, -1)
	assert.Equal(t, 1600*time.Millisecond, next.Delay, "25 units charged: 15 intervals past a full bucket, plus the unit")
}

func TestSettleNilContext(t *testing.T) {
	tb := newTokenBucket(t, throttle.PerSecond(10), 10)
	r := reserve(t, tb, 1, 0)
	var ctx context.Context // nil
	assert.EqualError(t, r.Settle(ctx, 1), "throttle: nil context")
}

// TestSettleWindows settles on the windowed limiters: the booking's own
// window is adjusted while it is counted, never the window the settle
// arrives in.
func TestSettleWindows(t *testing.T) {
	const limit = 10
	tests := []struct {
		name       string
		giveBuild  func(clk *manualClock) (throttle.Limiter, error)
		giveLater  time.Duration // how long after the booking the settle comes
		giveActual int
		wantNow    int // units that fit at once after the settle
	}{
		{name: "FixedWindow gives back in its window", giveBuild: fixedMinute, giveLater: 10 * time.Second, giveActual: 3, wantNow: 7},
		{name: "FixedWindow charges its window", giveBuild: fixedMinute, giveLater: 10 * time.Second, giveActual: 12, wantNow: 0},
		{name: "FixedWindow leaves the next window alone on a give-back", giveBuild: fixedMinute, giveLater: 70 * time.Second, giveActual: 0, wantNow: limit},
		{name: "FixedWindow leaves the next window alone on a charge", giveBuild: fixedMinute, giveLater: 70 * time.Second, giveActual: 15, wantNow: limit},
		{name: "SlidingWindow gives back at the slot", giveBuild: slidingMinute, giveLater: 10 * time.Second, giveActual: 4, wantNow: 6},
		{name: "SlidingWindow charges at the slot", giveBuild: slidingMinute, giveLater: 10 * time.Second, giveActual: 14, wantNow: 0},
		{name: "SlidingWindow forgets a charge once its window has passed", giveBuild: slidingMinute, giveLater: 61 * time.Second, giveActual: 14, wantNow: limit},
		{name: "SlidingWindowCounter gives back in its window", giveBuild: counterMinute, giveLater: 10 * time.Second, giveActual: 4, wantNow: 6},
		{name: "SlidingWindowCounter gives back in the window before", giveBuild: counterMinute, giveLater: 90 * time.Second, giveActual: 0, wantNow: limit},
		{name: "SlidingWindowCounter charges the window before", giveBuild: counterMinute, giveLater: 90 * time.Second, giveActual: 20, wantNow: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			l, err := tt.giveBuild(clk)
			require.NoError(t, err)
			r := reserve(t, l, limit, 0)
			clk.Advance(tt.giveLater)
			err = r.Settle(context.Background(), tt.giveActual)
			if tt.giveActual > limit {
				require.ErrorIs(t, err, throttle.ErrExceedsCapacity)
			} else {
				require.NoError(t, err)
			}
			st, err := l.(throttle.Inspector).Inspect(context.Background(), "k")
			require.NoError(t, err)
			assert.Equal(t, tt.wantNow, st.Remaining)
		})
	}
}

func fixedMinute(clk *manualClock) (throttle.Limiter, error) {
	return throttle.NewFixedWindow(10, time.Minute, throttle.WithClock(clk.Now))
}

func slidingMinute(clk *manualClock) (throttle.Limiter, error) {
	return throttle.NewSlidingWindow(10, time.Minute, throttle.WithClock(clk.Now))
}

func counterMinute(clk *manualClock) (throttle.Limiter, error) {
	return throttle.NewSlidingWindowCounter(10, time.Minute, throttle.WithClock(clk.Now))
}

// TestSettleAfterTheKeyWasDropped settles a reservation whose key a sweep
// dropped as fresh: a give-back changes nothing, and a charge lands on
// the key's live state.
func TestSettleAfterTheKeyWasDropped(t *testing.T) {
	tests := []struct {
		name          string
		giveActual    int
		wantRemaining int
	}{
		{name: "give-back", giveActual: 0, wantRemaining: 10},
		{name: "charge", giveActual: 8, wantRemaining: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			tb := newTokenBucket(t, throttle.PerSecond(10), 10, throttle.WithClock(clk.Now), throttle.WithMaxKeys(2))
			ctx := context.Background()
			r, err := tb.Reserve(ctx, "a", 1, 0)
			require.NoError(t, err)
			clk.Advance(2 * time.Second)
			_, err = tb.Reserve(ctx, "b", 1, 0)
			require.NoError(t, err)
			clk.Advance(2 * time.Second)
			_, err = tb.Reserve(ctx, "c", 1, 0) // the sweep drops a and b, both fresh
			require.NoError(t, err)

			_ = r.Settle(ctx, tt.giveActual)
			st, err := tb.Inspect(ctx, "a")
			require.NoError(t, err)
			assert.Equal(t, tt.wantRemaining, st.Remaining)
		})
	}
}
