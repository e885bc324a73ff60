package throttle

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// moveBooking is one OK reservation of the moving-up model, with a
// caller asleep in Wait on it.
type moveBooking struct {
	r      *Reservation
	units  []int64 // what each part really used: the estimate until settled
	latest int64   // the slot it held when booked, on the test's clock
	cancel context.CancelFunc
	done   chan struct{}
	sentAt int64 // when Wait returned nil, or -1
	gone   bool  // Wait returned an error: cancelled
}

// gcraConforms replays us in slot order, as the reference GCRA, and
// returns an error for the first unit that comes sooner than the bucket
// allows.
func gcraConforms(us []modelUnit, interval, burst int64) error {
	us = slices.Clone(us)
	slices.SortStableFunc(us, func(a, b modelUnit) int { return cmp.Compare(a.slot, b.slot) })
	tat := int64(-1 << 62)
	for i, u := range us {
		if u.units == 0 {
			continue
		}
		if earliest := tat + (u.units-burst)*interval; u.slot < earliest {
			return fmt.Errorf("unit %d of %d (%d units at %d) before the reference's earliest %d", i, len(us), u.units, u.slot, earliest)
		}
		tat = max(tat, u.slot) + u.units*interval
	}
	return nil
}

// TestMoveUpModel replays random reserves (each with a caller asleep in
// Wait), settles (smaller than the estimate), cancels (by the sleeper's
// context ending) and clock steps against one or two buckets, and after
// every step checks, against the reference GCRA over what was really
// used, the whole schedule: the units sent where they went, the units
// asleep where their slot lies now. No slot lies later than at booking.
func TestMoveUpModel(t *testing.T) {
	const burst = 8
	interval := int64(100 * time.Millisecond)
	for _, parts := range []int{1, 2} {
		t.Run(fmt.Sprintf("parts=%d", parts), func(t *testing.T) {
			for seed := range uint64(settleSeeds / 2) {
				synctest.Test(t, func(t *testing.T) { runMoveUpModel(t, seed, parts, burst, interval) })
			}
		})
	}
}

func runMoveUpModel(t *testing.T, seed uint64, parts int, burst, interval int64) {
	rng := rand.New(rand.NewPCG(seed, 13))
	ctx := context.Background()
	var reserve func(costs []int) (*Reservation, error)
	if parts == 1 {
		tb, err := NewTokenBucket(PerSecond(10), int(burst), WithMoveUp())
		require.NoError(t, err)
		reserve = func(costs []int) (*Reservation, error) { return tb.Reserve(ctx, "k", costs[0], -1) }
	} else {
		a, err := NewTokenBucket(PerSecond(10), int(burst), WithMoveUp())
		require.NoError(t, err)
		b, err := NewLeakyBucket(PerSecond(10), int(burst)-2, WithMoveUp()) // burst-1 units at once
		require.NoError(t, err)
		all := All(a, b).(PartsReserver)
		reserve = func(costs []int) (*Reservation, error) { return all.ReserveParts(ctx, "k", costs, -1) }
	}
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var books []*moveBooking
	for op := range 300 {
		switch k := rng.IntN(10); {
		case k < 4:
			costs := make([]int, parts)
			units := make([]int64, parts)
			for p := range costs {
				costs[p] = 1 + rng.IntN(4)
				units[p] = int64(costs[p])
			}
			r, err := reserve(costs)
			require.NoError(t, err)
			require.True(t, r.OK)
			wctx, cancel := context.WithCancel(ctx)
			b := &moveBooking{r: r, units: units, latest: now() + int64(r.Delay), cancel: cancel, done: make(chan struct{}), sentAt: -1}
			go func() {
				defer close(b.done)
				if err := r.Wait(wctx); err == nil {
					b.sentAt = now()
				} else {
					b.gone = true
				}
			}()
			books = append(books, b)
		case k < 7 && len(books) > 0:
			b := books[rng.IntN(len(books))]
			actual := make([]int, parts)
			for p := range actual {
				actual[p] = rng.IntN(int(b.units[p]) + 1)
			}
			applies := b.r.state.Load() == open || b.r.state.Load() == used
			require.NoError(t, b.r.Settle(ctx, actual...))
			if applies {
				for p := range actual {
					b.units[p] = int64(actual[p])
				}
			}
		case k < 8 && len(books) > 0:
			books[rng.IntN(len(books))].cancel()
		default:
			time.Sleep(time.Duration(rng.Int64N(3 * interval)))
		}
		synctest.Wait()
		us := make([][]modelUnit, parts)
		for i, b := range books {
			if b.gone {
				continue
			}
			at := b.sentAt
			if at < 0 {
				at = now() + int64(b.r.booking.Until())
				require.LessOrEqual(t, at, b.latest, "seed %d op %d: booking %d later than booked", seed, op, i)
			}
			for p := range parts {
				us[p] = append(us[p], modelUnit{slot: at, units: b.units[p]})
			}
		}
		for p := range parts {
			require.NoError(t, gcraConforms(us[p], interval, burst-int64(p)), "seed %d op %d part %d", seed, op, p)
		}
	}
	for _, b := range books {
		b.cancel()
		<-b.done
	}
}
