package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// llmBudget is an LLM API's three limits on one key: 10 requests, 1000
// input tokens and 400 output tokens, refilling per second.
type llmBudget struct {
	rpm, itpm, otpm *throttle.TokenBucket
	all             throttle.PartsReserver
}

func newLLMBudget(t *testing.T, clk *manualClock) llmBudget {
	t.Helper()
	b := llmBudget{
		rpm:  newTokenBucket(t, throttle.PerSecond(10), 10, throttle.WithClock(clk.Now)),
		itpm: newTokenBucket(t, throttle.PerSecond(1000), 1000, throttle.WithClock(clk.Now)),
		otpm: newTokenBucket(t, throttle.PerSecond(100), 400, throttle.WithClock(clk.Now)),
	}
	p, ok := throttle.All(b.rpm, b.itpm, b.otpm).(throttle.PartsReserver)
	require.True(t, ok, "All implements PartsReserver")
	b.all = p
	return b
}

// remaining returns what each part of b can give at once.
func (b llmBudget) remaining(t *testing.T) []int {
	t.Helper()
	var got []int
	for _, l := range []*throttle.TokenBucket{b.rpm, b.itpm, b.otpm} {
		st, err := l.Inspect(context.Background(), "k")
		require.NoError(t, err)
		got = append(got, st.Remaining)
	}
	return got
}

func TestReservePartsBadInput(t *testing.T) {
	tests := []struct {
		name      string
		giveCosts []int
		wantErr   string
	}{
		{name: "too few", giveCosts: []int{1, 2}, wantErr: "throttle: ReserveParts needs 3 costs, one per part, got 2"},
		{name: "too many", giveCosts: []int{1, 2, 3, 4}, wantErr: "throttle: ReserveParts needs 3 costs, one per part, got 4"},
		{name: "negative", giveCosts: []int{1, -2, 3}, wantErr: "throttle: ReserveParts' cost of part 1 must not be negative, got -2"},
		{name: "all zero", giveCosts: []int{0, 0, 0}, wantErr: "throttle: ReserveParts needs a positive cost on some part, got [0 0 0]"},
		{name: "over a part's capacity", giveCosts: []int{1, 10, 401}, wantErr: "throttle: All's part 2: throttle: n exceeds the limiter's capacity: n is 401, at most 400 fit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newLLMBudget(t, newManualClock())
			r, err := b.all.ReserveParts(context.Background(), "k", tt.giveCosts, -1)
			assert.EqualError(t, err, tt.wantErr)
			assert.Nil(t, r)
			assert.Equal(t, []int{10, 1000, 400}, b.remaining(t), "nothing was taken")
		})
	}
}

func TestReservePartsOneCommonSlot(t *testing.T) {
	clk := newManualClock()
	b := newLLMBudget(t, clk)
	ctx := context.Background()
	reserve(t, b.otpm, 400, 0) // the output budget is spent: 4s to refill

	r, err := b.all.ReserveParts(ctx, "k", []int{1, 300, 200}, -1)
	require.NoError(t, err)
	require.True(t, r.OK)
	assert.Equal(t, 2*time.Second, r.Delay, "200 output tokens at 100/s")

	clk.Advance(2 * time.Second)
	assert.Equal(t, []int{9, 700, 0}, b.remaining(t), "every part booked at the common slot, each with its own cost")

	require.NoError(t, r.Settle(ctx, 1, 300, 50))
	assert.Equal(t, []int{9, 700, 150}, b.remaining(t), "150 output tokens given back")
}

func TestReservePartsZeroCost(t *testing.T) {
	clk := newManualClock()
	b := newLLMBudget(t, clk)
	ctx := context.Background()
	reserve(t, b.otpm, 400, 0)

	r, err := b.all.ReserveParts(ctx, "k", []int{1, 100, 0}, 0)
	require.NoError(t, err)
	require.True(t, r.OK, "a part of cost 0 does not hold the slot back")
	assert.Equal(t, []int{9, 900, 0}, b.remaining(t))

	clk.Advance(4 * time.Second)
	require.NoError(t, r.Settle(ctx, 1, 100, 30))
	assert.Equal(t, []int{10, 1000, 370}, b.remaining(t), "its actual is charged all the same")
}

func TestReservePartsSettleCount(t *testing.T) {
	b := newLLMBudget(t, newManualClock())
	r, err := b.all.ReserveParts(context.Background(), "k", []int{1, 10, 10}, 0)
	require.NoError(t, err)
	assert.EqualError(t, r.Settle(context.Background(), 5), "throttle: Settle needs 3 actual costs, one per part, got 1")
}

func TestReservePartsNestedAndRouted(t *testing.T) {
	clk := newManualClock()
	rpm := newTokenBucket(t, throttle.PerSecond(10), 10, throttle.WithClock(clk.Now))
	rpd := newTokenBucket(t, throttle.PerHour(100), 100, throttle.WithClock(clk.Now))
	tpm := newTokenBucket(t, throttle.PerSecond(1000), 1000, throttle.WithClock(clk.Now))
	nested := throttle.All(throttle.All(rpm, rpd), tpm)
	routed := throttle.Route(func(string) throttle.Limiter { return nested })
	single := throttle.Route(func(string) throttle.Limiter { return tpm })
	tests := []struct {
		name      string
		giveL     throttle.Limiter
		giveCosts []int
		wantErr   string
		wantLeft  []int // rpm, rpd, tpm
	}{
		{name: "a nested All is one part", giveL: nested, giveCosts: []int{1, 250}, wantLeft: []int{9, 99, 750}},
		{name: "Route forwards", giveL: routed, giveCosts: []int{1, 250}, wantLeft: []int{9, 99, 750}},
		{name: "Route over one limiter takes one cost", giveL: single, giveCosts: []int{250}, wantLeft: []int{10, 100, 750}},
		{name: "Route over one limiter refuses two", giveL: single, giveCosts: []int{1, 250}, wantErr: `throttle: the Limiter Route picked for key "k" has one part, got 2 costs`, wantLeft: []int{10, 100, 1000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.Advance(time.Hour) // every bucket full again
			_, err := tt.giveL.(throttle.PartsReserver).ReserveParts(context.Background(), "k", tt.giveCosts, 0)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
			} else {
				assert.NoError(t, err)
			}
			var left []int
			for _, l := range []*throttle.TokenBucket{rpm, rpd, tpm} {
				st, err := l.Inspect(context.Background(), "k")
				require.NoError(t, err)
				left = append(left, st.Remaining)
			}
			assert.Equal(t, tt.wantLeft, left)
		})
	}
}

func TestReservePartsForeign(t *testing.T) {
	clk := newManualClock()
	tb := newTokenBucket(t, throttle.PerSecond(10), 10, throttle.WithClock(clk.Now))
	ctx := context.Background()

	t.Run("a foreign part without Settle", func(t *testing.T) {
		foreign := &fakeLimiter{}
		r, err := throttle.All(tb, foreign).(throttle.PartsReserver).ReserveParts(ctx, "k", []int{2, 5}, 0)
		require.NoError(t, err)
		require.Len(t, foreign.bookings, 1)
		assert.ErrorIs(t, r.Settle(ctx, 1, 1), throttle.ErrNoSettle)
	})
	t.Run("a foreign part of cost 0 is not booked", func(t *testing.T) {
		foreign := &fakeLimiter{}
		_, err := throttle.All(tb, foreign).(throttle.PartsReserver).ReserveParts(ctx, "k", []int{2, 0}, 0)
		require.NoError(t, err)
		assert.Empty(t, foreign.bookings)
	})
}

// TestSettleAllSingleCost settles a plain Reserve on All: one actual
// for every part.
func TestSettleAllSingleCost(t *testing.T) {
	clk := newManualClock()
	a := newTokenBucket(t, throttle.PerSecond(10), 10, throttle.WithClock(clk.Now))
	b := newTokenBucket(t, throttle.PerSecond(100), 20, throttle.WithClock(clk.Now))
	r := reserve(t, throttle.All(a, b), 8, 0)
	require.NoError(t, r.Settle(context.Background(), 3))
	var left []int
	for _, l := range []*throttle.TokenBucket{a, b} {
		st, err := l.Inspect(context.Background(), "k")
		require.NoError(t, err)
		left = append(left, st.Remaining)
	}
	assert.Equal(t, []int{7, 17}, left)
}

// settlingBooking is a Booking from outside this package that can
// settle: it records what it was settled to.
type settlingBooking struct {
	fakeBooking
	settled [][]int
}

func (b *settlingBooking) Settle(_ context.Context, actual []int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.settled = append(b.settled, actual)
	return nil
}

// settlingLimiter hands out settlingBookings.
type settlingLimiter struct {
	bookings []*settlingBooking
}

func (l *settlingLimiter) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*throttle.Reservation, error) {
	b := &settlingBooking{}
	l.bookings = append(l.bookings, b)
	return throttle.NewReservation(b, 0, 0), nil
}

func TestSettleForeignSettler(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		give   func(foreign throttle.Limiter, tb *throttle.TokenBucket) (*throttle.Reservation, error)
		giveTo []int
		want   [][]int
	}{
		{
			name: "alone",
			give: func(foreign throttle.Limiter, _ *throttle.TokenBucket) (*throttle.Reservation, error) {
				return foreign.Reserve(ctx, "k", 5, 0)
			},
			giveTo: []int{3},
			want:   [][]int{{3}},
		},
		{
			name: "in All, one cost",
			give: func(foreign throttle.Limiter, tb *throttle.TokenBucket) (*throttle.Reservation, error) {
				return throttle.All(tb, foreign).Reserve(ctx, "k", 5, 0)
			},
			giveTo: []int{2},
			want:   [][]int{{2}},
		},
		{
			name: "in All, a cost per part",
			give: func(foreign throttle.Limiter, tb *throttle.TokenBucket) (*throttle.Reservation, error) {
				return throttle.All(tb, foreign).(throttle.PartsReserver).ReserveParts(ctx, "k", []int{1, 5}, 0)
			},
			giveTo: []int{1, 4},
			want:   [][]int{{4}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			foreign := &settlingLimiter{}
			tb := newTokenBucket(t, throttle.PerSecond(10), 10, throttle.WithClock(newManualClock().Now))
			r, err := tt.give(foreign, tb)
			require.NoError(t, err)
			require.NoError(t, r.Settle(ctx, tt.giveTo...))
			require.NoError(t, r.Settle(ctx, tt.giveTo...), "the second does nothing")
			require.Len(t, foreign.bookings, 1)
			assert.Equal(t, tt.want, foreign.bookings[0].settled)
		})
	}
}
