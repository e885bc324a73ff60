package throttle

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// settleClock is a clock moved by hand, safe for concurrent use.
type settleClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *settleClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *settleClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// settleBooking is one OK reservation of the model run and the units it
// really used as far as the run knows: its estimate until it is settled.
type settleBooking struct {
	r         *Reservation
	units     int64
	cancelled bool
	settled   bool
}

// modelUnit is a booking as the checks see it: where its units are due
// now (pauses included) and how many it really used.
type modelUnit struct {
	slot  int64
	units int64
}

// settleSeeds is how many random runs each model test makes.
var settleSeeds = 200

// modelCheck reports whether a new booking of n units at slot keeps the
// limiter's bound, given every earlier booking still standing, in
// booking order, with the units it really used.
type modelCheck func(before []modelUnit, slot, n int64) error

// runSettleModel drives l with random reserves, settles (smaller or, when
// charge is set, larger than the estimate), cancels, clock steps and,
// when pause is set, pauses, and checks every new booking with check
// against what the earlier ones really used. The clock starts at a
// window boundary of the Unix epoch.
func runSettleModel(t *testing.T, seed uint64, build func(clk func() time.Time) (Limiter, error), maxN, capacity int, step time.Duration, charge, pause bool, check modelCheck) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	clk := &settleClock{t: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)}
	l, err := build(clk.now)
	require.NoError(t, err)
	start := clk.now()
	ctx := context.Background()
	var books []*settleBooking
	slotOf := func(b *settleBooking) int64 {
		return int64(clk.now().Sub(start)) + int64(b.r.booking.Until())
	}
	standing := func() []modelUnit {
		var us []modelUnit
		for _, b := range books {
			if !b.cancelled {
				us = append(us, modelUnit{slot: slotOf(b), units: b.units})
			}
		}
		return us
	}
	for op := range 400 {
		switch k := rng.IntN(10); {
		case k < 4:
			n := 1 + rng.IntN(maxN)
			r, err := l.Reserve(ctx, "k", n, -1)
			require.NoError(t, err)
			require.True(t, r.OK)
			b := &settleBooking{r: r, units: int64(n)}
			require.NoError(t, check(standing(), slotOf(b), int64(n)), "seed %d op %d: booking %d of %d units", seed, op, len(books), n)
			books = append(books, b)
		case k < 7 && len(books) > 0:
			b := books[rng.IntN(len(books))]
			actual := rng.IntN(int(b.units) + 1)
			if charge && rng.IntN(3) == 0 {
				actual = int(b.units) + rng.IntN(capacity)
			}
			err := b.r.Settle(ctx, actual)
			applies := !b.cancelled && !b.settled
			if applies && actual > capacity {
				require.ErrorIs(t, err, ErrExceedsCapacity)
			} else {
				require.NoError(t, err)
			}
			if applies {
				b.units, b.settled = int64(actual), true
			}
		case k < 8 && len(books) > 0:
			b := books[rng.IntN(len(books))]
			require.NoError(t, b.r.Cancel(ctx))
			if !b.settled {
				b.cancelled = true // its units are not sent; a later Settle does nothing
			}
		case k == 8 && pause:
			p, ok := l.(Pauser)
			require.True(t, ok)
			require.NoError(t, p.Pause(ctx, "k", time.Duration(rng.Int64N(int64(4*step)))))
		default:
			clk.advance(time.Duration(rng.Int64N(int64(step))))
		}
	}
}

// gcraCheck is the reference GCRA: replayed over what was really used,
// in slot order (the bucket's bound depends only on when units go), the
// new booking must conform.
func gcraCheck(interval, burst int64) modelCheck {
	return func(before []modelUnit, slot, n int64) error {
		us := append(slices.Clone(before), modelUnit{slot: slot, units: -1}) // -1 marks the new booking
		slices.SortStableFunc(us, func(a, b modelUnit) int { return cmp.Compare(a.slot, b.slot) })
		tat := int64(-1 << 62)
		for _, u := range us {
			if u.units == -1 {
				if earliest := tat + (n-burst)*interval; slot < earliest {
					return fmt.Errorf("slot %d is before the reference's earliest %d (tat %d)", slot, earliest, tat)
				}
				return nil
			}
			if u.units > 0 { // a booking of nothing is no booking
				tat = max(tat, u.slot) + u.units*interval
			}
		}
		return nil
	}
}

// windowCheck checks that the fixed window of the new booking holds at
// most limit units really used, its own included.
func windowCheck(limit, w int64) modelCheck {
	return func(before []modelUnit, slot, n int64) error {
		used := n
		for _, u := range before {
			if floorDiv(u.slot, w) == floorDiv(slot, w) {
				used += u.units
			}
		}
		if used > limit {
			return fmt.Errorf("window %d holds %d units really used, limit %d", floorDiv(slot, w), used, limit)
		}
		return nil
	}
}

// logCheck checks that (slot-w, slot] holds at most limit units really
// used, the new booking's included.
func logCheck(limit, w int64) modelCheck {
	return func(before []modelUnit, slot, n int64) error {
		used := n
		for _, u := range before {
			if u.slot > slot-w && u.slot <= slot {
				used += u.units
			}
		}
		if used > limit {
			return fmt.Errorf("(%d, %d] holds %d units really used, limit %d", slot-w, slot, used, limit)
		}
		return nil
	}
}

// counterCheck checks the counter's own estimate at the new booking's
// slot over what was really used: current window plus the previous one
// weighted, its own units included.
func counterCheck(limit, w int64) modelCheck {
	return func(before []modelUnit, slot, n int64) error {
		j := floorDiv(slot, w)
		cur, prev := n, int64(0)
		for _, u := range before {
			switch floorDiv(u.slot, w) {
			case j:
				cur += u.units
			case j - 1:
				prev += u.units
			}
		}
		rest := w - 1 - (slot - j*w)
		if est := cur + mulDivUp(prev, rest, w); est > limit {
			return fmt.Errorf("estimate %d at %d is over limit %d", est, slot, limit)
		}
		return nil
	}
}

func TestSettleModel(t *testing.T) {
	const (
		burst = 8
		limit = 12
	)
	interval := int64(100 * time.Millisecond)
	window := time.Second
	tests := []struct {
		name      string
		giveBuild func(clk func() time.Time) (Limiter, error)
		giveMaxN  int
		giveCap   int
		giveStep  time.Duration
		givePause bool
		wantCheck modelCheck
	}{
		{
			name: "TokenBucket",
			giveBuild: func(clk func() time.Time) (Limiter, error) {
				return NewTokenBucket(PerSecond(10), burst, WithClock(clk))
			},
			giveMaxN: 4, giveCap: burst, giveStep: 300 * time.Millisecond, givePause: true,
			wantCheck: gcraCheck(interval, burst),
		},
		{
			name: "LeakyBucket",
			giveBuild: func(clk func() time.Time) (Limiter, error) {
				return NewLeakyBucket(PerSecond(10), 2, WithClock(clk))
			},
			giveMaxN: 3, giveCap: 3, giveStep: 300 * time.Millisecond, givePause: true,
			wantCheck: gcraCheck(interval, 3),
		},
		{
			name: "FixedWindow",
			giveBuild: func(clk func() time.Time) (Limiter, error) {
				return NewFixedWindow(limit, window, WithClock(clk))
			},
			giveMaxN: 5, giveCap: limit, giveStep: 400 * time.Millisecond, givePause: true,
			wantCheck: windowCheck(limit, int64(window)),
		},
		{
			name: "SlidingWindow",
			giveBuild: func(clk func() time.Time) (Limiter, error) {
				return NewSlidingWindow(limit, window, WithClock(clk))
			},
			giveMaxN: 5, giveCap: limit, giveStep: 400 * time.Millisecond, givePause: true,
			wantCheck: logCheck(limit, int64(window)),
		},
		{
			name: "SlidingWindowCounter",
			giveBuild: func(clk func() time.Time) (Limiter, error) {
				return NewSlidingWindowCounter(limit, window, WithClock(clk))
			},
			giveMaxN: 5, giveCap: limit, giveStep: 400 * time.Millisecond,
			wantCheck: counterCheck(limit, int64(window)),
		},
	}
	for _, tt := range tests {
		for _, charge := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/charge=%v", tt.name, charge), func(t *testing.T) {
				for seed := range uint64(settleSeeds) {
					runSettleModel(t, seed, tt.giveBuild, tt.giveMaxN, tt.giveCap, tt.giveStep, charge, tt.givePause, tt.wantCheck)
				}
			})
		}
	}
}

// TestSettlePartsModel books a token bucket, a fixed window and a
// sliding log together through ReserveParts, each part with a random
// cost of its own (0 included), settles each part to a random actual,
// and checks every part's bound over what each really used.
func TestSettlePartsModel(t *testing.T) {
	const (
		burst = 8
		limit = 12
	)
	interval := int64(100 * time.Millisecond)
	window := time.Second
	checks := []modelCheck{gcraCheck(interval, burst), windowCheck(limit, int64(window)), logCheck(limit, int64(window))}
	for seed := range uint64(settleSeeds) {
		rng := rand.New(rand.NewPCG(seed, 11))
		clk := &settleClock{t: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)}
		tb, err := NewTokenBucket(PerSecond(10), burst, WithClock(clk.now))
		require.NoError(t, err)
		fw, err := NewFixedWindow(limit, window, WithClock(clk.now))
		require.NoError(t, err)
		sl, err := NewSlidingWindow(limit, window, WithClock(clk.now))
		require.NoError(t, err)
		all := All(tb, fw, sl).(PartsReserver)
		start := clk.now()
		ctx := context.Background()
		type booking struct {
			r     *Reservation
			slot  int64 // no pauses here: slots stay put
			units []int64
			gone  bool
		}
		var books []*booking
		for op := range 300 {
			switch k := rng.IntN(10); {
			case k < 4:
				costs := []int{rng.IntN(5), rng.IntN(6), rng.IntN(6)}
				costs[rng.IntN(3)]++
				r, err := all.ReserveParts(ctx, "k", costs, -1)
				require.NoError(t, err)
				require.True(t, r.OK)
				slot := int64(clk.now().Sub(start)) + int64(r.Delay)
				for p, check := range checks {
					if costs[p] == 0 {
						continue // nothing booked on this part
					}
					var before []modelUnit
					for _, b := range books {
						if !b.gone {
							before = append(before, modelUnit{slot: b.slot, units: b.units[p]})
						}
					}
					require.NoError(t, check(before, slot, int64(costs[p])), "seed %d op %d part %d", seed, op, p)
				}
				books = append(books, &booking{r: r, slot: slot, units: []int64{int64(costs[0]), int64(costs[1]), int64(costs[2])}})
			case k < 7 && len(books) > 0:
				b := books[rng.IntN(len(books))]
				actual := make([]int, 3)
				for p := range actual {
					actual[p] = rng.IntN(int(b.units[p]) + 2)
				}
				applies := b.r.state.Load() == open
				require.NoError(t, b.r.Settle(ctx, actual...))
				if applies {
					for p := range actual {
						b.units[p] = int64(actual[p])
					}
				}
			case k < 8 && len(books) > 0:
				b := books[rng.IntN(len(books))]
				if b.r.state.Load() == open {
					require.NoError(t, b.r.Cancel(ctx))
					b.gone = true
				}
			default:
				clk.advance(time.Duration(rng.Int64N(int64(400 * time.Millisecond))))
			}
		}
	}
}
