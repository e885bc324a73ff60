package throttle

import (
	"context"
	"math/bits"
	"time"
)

// SlidingWindowCounter approximates [SlidingWindow] with two counters per
// key: the units of the current window of a fixed grid and of the one
// before it. At a time e nanoseconds into a window of w nanoseconds it
// estimates the units in the last w as
//
//	current + previous × (w-1-e)/w
//
// the previous window weighted by the share of it that still lies within
// the last w nanoseconds, and admits n units when that estimate plus n is
// at most limit. A caller who finds no room is given the first slot with
// room, in this window or a later one, and never retries.
//
// Pick it for a sliding limit with O(1) memory per key (48 bytes) when
// limit is too large to log every unit. The price is precision: the
// estimate assumes the previous window's units were spread evenly. Each
// window of the grid holds at most limit units, and any interval of
// length w holds at most
//
//	limit + ⌊limit × (w-1)/w⌋ = 2×limit − ⌈limit/w⌉
//
// units, which is 2×limit−1 unless w is under limit nanoseconds. The
// worst case is a window with nothing in its first half: limit units on
// its last nanosecond, then the decaying allowance of the next window up
// to its second-to-last nanosecond, limit−1 more. A saturated key gets
// limit units per window in the long run: the previous window's weight
// reaches 0 on the last nanosecond of the current one.
//
// w is the window plus any [WithTolerance]. A pause shifts the key's
// grid with its bookings, as if the key had been stopped for the pause:
// already sent units then count as if sent that much later, which can
// only delay what follows.
//
// A SlidingWindowCounter is safe for concurrent use.
type SlidingWindowCounter struct {
	e      *engine[counterState, *slidingCounter]
	limit  int
	window time.Duration
}

// NewSlidingWindowCounter returns a limiter that allows about limit units
// per key in any interval of length window, and never more than
// 2×limit−1 (see [SlidingWindowCounter]). Its windows are aligned to the
// Unix epoch. With [WithTolerance](d) the window is treated as d longer.
func NewSlidingWindowCounter(limit int, window time.Duration, opts ...Option) (*SlidingWindowCounter, error) {
	c := newConfig(opts)
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := checkWindow(limit, window, c.tolerance); err != nil {
		return nil, err
	}
	w := int64(window + c.tolerance)
	k := newEngine(&slidingCounter{limit: int64(limit), g: grid{w: w}}, limit, c)
	k.alg.g.phase = floorMod(k.tl.unixNano(0), w)
	return &SlidingWindowCounter{e: k, limit: limit, window: window}, nil
}

// Limit returns how many units a window allows.
func (w *SlidingWindowCounter) Limit() int { return w.limit }

// Window returns the window's length as configured, before any
// tolerance.
func (w *SlidingWindowCounter) Window() time.Duration { return w.window }

// slidingCounter is the arithmetic of SlidingWindowCounter.
type slidingCounter struct {
	limit int64
	g     grid
}

type counterState struct {
	idx   int64 // the cursor: the window of the latest booking
	cur   int64 // units in window idx
	prev  int64 // units in window idx-1
	floor int64 // the latest slot booked; no slot goes below it
	lag   int64 // how far pauses have moved this key's grid
}

func (c *slidingCounter) index(s *counterState, t int64) int64 { return c.g.index(t - s.lag) }

func (c *slidingCounter) start(s *counterState, j int64) int64 { return c.g.start(j) + s.lag }

// counts returns the units in window j, which is not before the cursor's,
// and in the window before it.
func (c *slidingCounter) counts(s *counterState, j int64) (cur, prev int64) {
	switch j {
	case s.idx:
		return s.cur, s.prev
	case s.idx + 1:
		return 0, s.cur
	}
	return 0, 0
}

// used returns the estimate at t, rounded up: cur + ⌈prev×(w-1-e)/w⌉.
func (c *slidingCounter) used(s *counterState, t int64) int64 {
	return c.estimate(s, max(c.index(s, t), s.idx), t)
}

// estimate is used for a t in window j, which is not before the cursor's.
func (c *slidingCounter) estimate(s *counterState, j, t int64) int64 {
	cur, prev := c.counts(s, j)
	rest := c.g.w - 1 - max(t-c.start(s, j), 0)
	return cur + mulDivUp(prev, rest, c.g.w)
}

func (c *slidingCounter) earliest(s *counterState, now, from int64, n int) int64 {
	t := max(now, from, s.floor)
	for j := max(c.index(s, t), s.idx); ; j++ {
		cur, prev := c.counts(s, j)
		room := c.limit - int64(n) - cur
		if room < 0 {
			t = c.start(s, j+1)
			continue
		}
		if prev <= room {
			return t // n fits anywhere in window j
		}
		// n fits at e when prev×(w-1-e) <= room×w.
		e := c.g.w - 1 - mulDiv(room, c.g.w, prev)
		return max(t, c.start(s, j)+e)
	}
}

func (c *slidingCounter) book(s *counterState, now, slot int64, n int, _ uint64, tally bool) (undo int64, remaining int) {
	switch j := c.index(s, slot); {
	case j <= s.idx:
		s.cur += int64(n)
	case j == s.idx+1:
		s.idx, s.prev, s.cur = j, s.cur, int64(n)
	default:
		s.idx, s.prev, s.cur = j, 0, int64(n)
	}
	s.floor = slot
	if !tally {
		return 0, 0
	}
	return 0, int(max(c.limit-c.estimate(s, s.idx, slot), 0)) // slot is in the cursor's window now
}

// give takes the units back only when they are in the cursor's window.
// Units in an earlier window stay counted: later bookings were admitted
// against that window's count.
func (c *slidingCounter) give(s *counterState, now int64, b claim, moved int64, latest bool) {
	if c.index(s, b.slot) != s.idx {
		return
	}
	s.cur -= min(int64(b.n), s.cur)
}

// settle adjusts the count of the booking's window while the counters
// hold it: the cursor's window or the one before. An excess in a window
// after the cursor's (a state that had forgotten the booking) counts
// there like a booking.
func (c *slidingCounter) settle(s *counterState, now int64, b claim, delta int64, latest, stale bool) {
	delta = min(delta, farUnits) // bad input: the window is full either way, and its count does not wrap around
	if delta < 0 && stale {
		return
	}
	switch j := c.index(s, b.slot); {
	case j == s.idx:
		s.cur = max(s.cur+delta, 0)
	case j == s.idx-1:
		s.prev = max(s.prev+delta, 0)
	case j == s.idx+1 && delta > 0:
		s.idx, s.prev, s.cur = j, s.cur, delta
	case j > s.idx+1 && delta > 0:
		s.idx, s.prev, s.cur = j, 0, delta
	}
}

func (c *slidingCounter) due(s *counterState, b *claim, slot int64) int64 { return slot }

// shift moves the key's grid, and every unit counted on it, later by d.
func (c *slidingCounter) shift(s *counterState, now, d int64) {
	s.lag += d
	s.floor += d
}

// ahead reports 1 while units are booked past now: the counters do not
// say how many.
func (c *slidingCounter) pushed(s *counterState, now int64) []aheadEntry { return nil }

// raise does nothing: the counters cannot tell where the units were
// counted (see FixedWindow on All).
func (c *slidingCounter) raise(s *counterState, now int64, units []aheadEntry) {}

func (c *slidingCounter) ahead(s *counterState, now int64) int {
	if s.floor > now {
		return 1
	}
	return 0
}

func (c *slidingCounter) fresh(s *counterState, now int64) bool {
	return s.floor <= now && c.used(s, now) == 0
}

func (c *slidingCounter) left(s *counterState, now int64) int {
	if s.floor > now {
		return 0
	}
	return int(max(c.limit-c.used(s, now), 0))
}

// Reserve implements [Limiter]: it books n units of key, now or at the
// first later slot with room, if that slot lies within maxWait.
func (w *SlidingWindowCounter) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*Reservation, error) {
	return w.e.reserve(ctx, key, n, 0, maxWait)
}

// ReserveAfter implements [Deferrer]: Reserve, with the slot no earlier
// than after from now.
func (w *SlidingWindowCounter) ReserveAfter(ctx context.Context, key string, n int, after, maxWait time.Duration) (*Reservation, error) {
	return w.e.reserve(ctx, key, n, after, maxWait)
}

// AllowN implements [Allower]: it takes n units of key only if they are
// available now, and allocates nothing.
func (w *SlidingWindowCounter) AllowN(ctx context.Context, key string, n int) (bool, error) {
	return w.e.allow(ctx, key, n)
}

// Pause implements [Pauser]: every slot of key still ahead, and every new
// booking, moves later, so that nothing is due for d from now.
func (w *SlidingWindowCounter) Pause(ctx context.Context, key string, d time.Duration) error {
	return w.e.pause(ctx, key, d)
}

// Inspect implements [Inspector].
func (w *SlidingWindowCounter) Inspect(ctx context.Context, key string) (KeyState, error) {
	return w.e.inspect(ctx, key)
}

func (w *SlidingWindowCounter) engine() keyLocker { return w.e }

// mulDiv returns ⌊a×b/c⌋ for a, b ≥ 0 and c > 0 with a×b/c < 2^63, in
// 128 bits: limit × window overflows int64 for a daily limit above about
// 100 000.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

// mulDivUp returns ⌈a×b/c⌉, with mulDiv's conditions.
func mulDivUp(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, r := bits.Div64(hi, lo, uint64(c))
	if r > 0 {
		q++
	}
	return int64(q)
}
