package throttle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// conforms reports whether units at slots (n units at each) never exceed
// burst + ⌊t/interval⌋ in any closed interval of length t: the token
// bucket's bound, checked by virtual scheduling over the sorted units.
func conforms(slots map[int64]int, interval, burst int64) error {
	times := make([]int64, 0, len(slots))
	for s := range slots {
		times = append(times, s)
	}
	slices.Sort(times)
	tat := int64(-1 << 62)
	for _, s := range times {
		for range slots[s] {
			tat = max(tat, s) + interval
			if tat-s > burst*interval {
				return fmt.Errorf("unit at %d: %d ns of units ahead exceed burst %d×%d", s, tat-s, burst, interval)
			}
		}
	}
	return nil
}

// modelBooking is one booking of the model test, with its slot as the
// schedule now has it.
type modelBooking struct {
	c    claim
	slot int64
	n    int
	live bool
}

// TestCancelModel books (some at a common slot pushed later, as All
// does), cancels and pauses at random, then saturates what is left, and
// checks that the surviving units keep the token bucket's bound: whatever
// Cancel gave back never over-admits.
func TestCancelModel(t *testing.T) {
	const (
		interval = 10
		burst    = 5
		seeds    = 3000
	)
	tests := []struct {
		name      string
		giveBurst int64
		giveMaxN  int
		newL      func(now func() time.Time) (*engine[gcraState, *gcra], error)
	}{
		{name: "TokenBucket", giveBurst: burst, giveMaxN: burst, newL: func(now func() time.Time) (*engine[gcraState, *gcra], error) {
			tb, err := NewTokenBucket(Rate{N: 1, Per: interval}, burst, WithClock(now))
			if err != nil {
				return nil, err
			}
			return tb.e, nil
		}},
		{name: "LeakyBucket", giveBurst: 1, giveMaxN: 1, newL: func(now func() time.Time) (*engine[gcraState, *gcra], error) {
			lb, err := NewLeakyBucket(Rate{N: 1, Per: interval}, 0, WithClock(now))
			if err != nil {
				return nil, err
			}
			return lb.e, nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := range uint64(seeds) {
				checkCancelModel(t, seed, tt.giveBurst, tt.giveMaxN, tt.newL)
			}
		})
	}
}

func checkCancelModel(t *testing.T, seed uint64, burst int64, maxN int, newL func(now func() time.Time) (*engine[gcraState, *gcra], error)) {
	const interval = 10
	rng := rand.New(rand.NewPCG(seed, 7))
	start := time.Unix(0, 0)
	var clock atomic.Int64
	l, err := newL(func() time.Time { return start.Add(time.Duration(clock.Load())) })
	require.NoError(t, err)
	ctx := context.Background()
	var (
		books []*modelBooking
		until int64
		log   []string
	)
	for range 40 {
		now := clock.Load()
		switch op := rng.IntN(12); {
		case op < 6:
			n := 1 + rng.IntN(maxN)
			push := int64(0)
			if rng.IntN(3) == 0 {
				push = rng.Int64N(8 * interval) // a common slot set by another part of an All
			}
			lk, err := l.lockKey("k")
			require.NoError(t, err)
			slot := lk.earliest(now+push, n)
			var c claim
			lk.book(slot, n, &c)
			lk.unlock()
			books = append(books, &modelBooking{c: c, slot: slot, n: n, live: true})
			log = append(log, fmt.Sprintf("at %d book %d at %d", now, n, slot))
		case op < 9:
			i := rng.IntN(len(books) + 1)
			if i == len(books) || !books[i].live || books[i].slot < now {
				continue
			}
			books[i].live = false
			books[i].c.key.give(&books[i].c)
			log = append(log, fmt.Sprintf("at %d cancel #%d", now, i))
		case op < 10:
			d := rng.Int64N(5 * interval)
			require.NoError(t, l.pause(ctx, "k", time.Duration(d)))
			if end := now + d; end > until {
				by := end - max(until, now)
				until = end
				for _, b := range books {
					if b.slot > now {
						b.slot += by
					}
				}
			}
			log = append(log, fmt.Sprintf("at %d pause %d", now, d))
		default:
			clock.Add(rng.Int64N(3 * interval))
		}
	}
	units := map[int64]int{}
	for _, b := range books {
		if b.live {
			units[b.slot] += b.n
			if b.slot > clock.Load() {
				assert.Equal(t, b.slot-clock.Load(), int64(b.c.Until()), "a sleeper follows pauses")
			}
		}
	}
	for range 3 * burst {
		r, err := l.reserve(ctx, "k", 1, 0, -1)
		require.NoError(t, err)
		if r.OK {
			units[clock.Load()+int64(r.Delay)]++
		}
	}
	require.NoError(t, conforms(units, interval, burst), "seed %d:\n%v", seed, log)
}
