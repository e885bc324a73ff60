package throttle_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// countingSettler is a Booking from outside the package that takes three
// actual costs, and says so with SettleParts.
type countingSettler struct{ got [][]int }

func (s *countingSettler) Until() time.Duration         { return 0 }
func (s *countingSettler) Cancel(context.Context) error { return nil }
func (s *countingSettler) SettleParts() int             { return 3 }
func (s *countingSettler) Settle(_ context.Context, actual []int) error {
	if len(actual) != 3 {
		return fmt.Errorf("want 3 values, got %d", len(actual))
	}
	s.got = append(s.got, actual)
	return nil
}

// TestSettleWrongCountLeavesTheSettle: a Settle with the wrong number of
// values changes nothing, also for a Booking from outside this package
// (redislimit's), so the next Settle, with the right ones, is made.
func TestSettleWrongCountLeavesTheSettle(t *testing.T) {
	b := &countingSettler{}
	r := throttle.NewReservation(b, 0, 0)
	ctx := context.Background()
	require.Error(t, r.Settle(ctx, 1, 2))
	require.NoError(t, r.Settle(ctx, 1, 2, 3))
	require.NoError(t, r.Settle(ctx, 4, 5, 6)) // the first Settle made wins
	assert.Equal(t, [][]int{{1, 2, 3}}, b.got)
}

// TestSettleHugeActualIsCharged settles a booking to an actual far beyond
// anything the limiter could admit (a usage field parsed wrong, say): it
// is charged and reported, so the key admits nothing for a long while.
// The charge must not wrap around int64 and leave the key open: a
// TokenBucket of 10/s charged 2^40 units, or any limiter charged
// math.MaxInt, admitted the very next call at once.
func TestSettleHugeActualIsCharged(t *testing.T) {
	builds := []struct {
		name  string
		build func(clk *manualClock) (throttle.Limiter, error)
	}{
		{"TokenBucket", func(clk *manualClock) (throttle.Limiter, error) {
			return throttle.NewTokenBucket(throttle.PerSecond(10), 10, throttle.WithClock(clk.Now))
		}},
		{"LeakyBucket", func(clk *manualClock) (throttle.Limiter, error) {
			return throttle.NewLeakyBucket(throttle.PerSecond(10), 10, throttle.WithClock(clk.Now))
		}},
		{"FixedWindow", fixedMinute},
		{"SlidingWindow", slidingMinute},
		{"SlidingWindowCounter", counterMinute},
	}
	for _, b := range builds {
		for _, actual := range []int{1 << 40, 1 << 55, math.MaxInt - 5, math.MaxInt} {
			t.Run(b.name, func(t *testing.T) {
				clk := newManualClock()
				l, err := b.build(clk)
				require.NoError(t, err)
				r := reserve(t, l, 5, 0)
				require.ErrorIs(t, r.Settle(context.Background(), actual), throttle.ErrExceedsCapacity)
				for range 2 { // and again: the charge stays
					clk.Advance(time.Second)
					next, err := l.Reserve(context.Background(), "k", 1, 30*time.Second)
					require.NoError(t, err)
					assert.False(t, next.OK, "settled at %d: the next call was admitted after %v", actual, next.Delay)
				}
			})
		}
	}
}
