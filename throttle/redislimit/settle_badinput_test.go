package redislimit

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// TestSettleWrongCountChangesNothing settles a Redis budget's booking
// with the wrong number of values: it is an error, and, as
// throttle.Reservation.Settle says, it changes nothing, so the caller
// may settle again with the right ones (egress.WithActual's doc says so
// too). The wrong Settle had used up the reservation's one Settle: the
// right one returned nil and the estimate stayed booked.
func TestSettleWrongCountChangesNothing(t *testing.T) {
	s := startRedis(t)
	for _, tc := range []struct {
		name string
		give []int
	}{
		{"too few", []int{1, 100}},
		{"too many", []int{1, 100, 100, 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock(0)
			b := newLLMBudget(t, s.client(t), c)
			ctx, key := context.Background(), "count "+tc.name // one server for every subtest
			r, err := b.all.ReserveParts(ctx, key, []int{1, 500, 400}, time.Second)
			require.NoError(t, err)
			require.True(t, r.OK)
			require.Error(t, r.Settle(ctx, tc.give...))
			require.NoError(t, r.Settle(ctx, 1, 100, 100))
			assert.Equal(t, [3]int{4, 900, 400}, b.remaining(t, key), "settled to 1, 100, 100")
		})
	}
}

// TestSettleHugeActualIsCharged settles an LLM budget's booking to an
// actual far beyond anything a limit could admit (a usage field parsed
// wrong): it is charged and reported, so the key admits nothing for a
// long while, and the key's next script call, which carries the settle,
// works. A charge past 2^63 µs did not pack: the bucket's state was lost
// and the key admitted at once (2^55), or the settle made the next
// caller's call on the key fail with a script error (math.MaxInt).
func TestSettleHugeActualIsCharged(t *testing.T) {
	s := startRedis(t)
	for _, actual := range []int{1 << 40, 1 << 55, math.MaxInt} {
		t.Run(strconv.Itoa(actual), func(t *testing.T) {
			c := newClock(0)
			b := newLLMBudget(t, s.client(t), c)
			ctx, key := context.Background(), "k"+strconv.Itoa(actual) // one server for every subtest
			r, err := b.all.ReserveParts(ctx, key, []int{1, 10, 10}, time.Second)
			require.NoError(t, err)
			require.True(t, r.OK)
			require.ErrorIs(t, r.Settle(ctx, 1, actual, 10), throttle.ErrExceedsCapacity)

			for range 2 { // the first call carries the settle; the charge stays
				c.advance(time.Second)
				next, err := b.all.ReserveParts(ctx, key, []int{1, 10, 10}, 30*time.Second)
				require.NoError(t, err, "the call carrying the settle")
				assert.False(t, next.OK, "settled at %d input tokens: the next call was admitted after %v", actual, next.Delay)
			}
			require.NoError(t, b.client.Flush(ctx))
			st, err := b.itpm.Inspect(ctx, key)
			require.NoError(t, err)
			assert.Zero(t, st.Remaining)
			assert.Greater(t, st.Next, 24*time.Hour)
		})
	}
}
