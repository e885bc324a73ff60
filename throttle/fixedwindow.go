package throttle

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// FixedWindow allows limit units per key in each window of a fixed grid
// aligned to the Unix epoch: a 24h window resets at 00:00 UTC, a minute
// window on every whole minute, as daily and per-minute API quotas do.
// [WithWindowOffset] moves the grid, for quotas that reset at midnight
// Pacific time.
//
// Pick it to mirror an upstream quota that resets at fixed times. Its
// weakness is the boundary: limit units at the very end of one window and
// limit more at the start of the next put 2×limit into a span just over
// an instant. When the upstream counts in sliding windows, use
// [SlidingWindow] instead.
//
// When the current window is full, a caller is given a slot in the next
// window with room, at its reset, never a retry: every window between now
// and the one being booked is full.
//
// [FixedWindow.Pause] moves the units booked ahead later by the pause
// while the windows stay put, so units may cross a reset. The limiter
// counts them in the window they land in: when that window would then
// hold more than limit, its latest-booked units move on to the next
// window's reset, and every unit booked after them at least as far, so
// that order and spacing are kept. Every aligned window holds at most
// limit units, pauses included. When the pause comes through [All], a
// bucket part learns where the moved units are due and spaces what
// follows from them; a sliding window part cannot, nor can any part when
// the window alone is paused, and such a part may see more units next to
// the moved ones than it allows.
//
// A FixedWindow is safe for concurrent use.
type FixedWindow struct {
	e      *engine[fixedState, *fixedWindow]
	limit  int
	window time.Duration
}

// NewFixedWindow returns a limiter that allows limit units per key in
// each window, windows being aligned to the Unix epoch moved by
// [WithWindowOffset].
//
// With [WithTolerance](d), a unit booked in the last d of a window also
// counts against the next one: a request sent just before the reset may
// reach the upstream just after it. Units are still booked in that last
// d (a caller there gets Delay 0 while the window has room); they only
// leave less room in the window after. d must be shorter than window.
// Without a tolerance each window is literal.
func NewFixedWindow(limit int, window time.Duration, opts ...Option) (*FixedWindow, error) {
	c := newConfig(opts)
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := checkWindow(limit, window, c.tolerance); err != nil {
		return nil, err
	}
	if c.tolerance >= window {
		return nil, fmt.Errorf("throttle: WithTolerance must be shorter than the window (%v), got %v", window, c.tolerance)
	}
	alg := &fixedWindow{limit: int64(limit), tol: int64(c.tolerance), g: grid{w: int64(window)}}
	k := newEngine(alg, limit, c)
	// The offset is reduced to one window first: now − offset overflowed
	// for an offset far from 0, and moved the grid.
	k.alg.g.phase = floorMod(k.tl.unixNano(0)-floorMod(int64(c.offset), int64(window)), int64(window))
	return &FixedWindow{e: k, limit: limit, window: window}, nil
}

// Limit returns how many units each window allows.
func (w *FixedWindow) Limit() int { return w.limit }

// Window returns the length of a window.
func (w *FixedWindow) Window() time.Duration { return w.window }

// maxWindowLimit is the most units a window limiter takes per window:
// counts run up in int64 (the sliding log's overflowed near MaxInt and
// panicked) and, through Redis, in doubles, exact to 2^53.
const maxWindowLimit = 1 << 53

// checkWindow validates the arguments shared by the windowed limiters,
// whose window is lengthened by tol. No algorithm multiplies limit by the
// window (the counter's weighting works in 128 bits, see mulDiv), so only
// the window itself, tolerance included, is bounded: a daily limit of a
// billion units is fine.
func checkWindow(limit int, window, tol time.Duration) error {
	switch {
	case limit < 1:
		return fmt.Errorf("throttle: limit must be at least 1, got %d", limit)
	case limit > maxWindowLimit:
		return fmt.Errorf("throttle: limit %d is above 2^53, the most a window counts exactly", limit)
	case window <= 0:
		return fmt.Errorf("throttle: window must be positive, got %v", window)
	case int64(window) > maxSpan:
		return fmt.Errorf("throttle: window %v is too long, at most %v", window, time.Duration(maxSpan))
	case int64(tol) > maxSpan-int64(window):
		return fmt.Errorf("throttle: window %v plus tolerance %v is too long", window, tol)
	}
	return nil
}

// grid cuts the limiter's timeline into windows of w nanoseconds. phase
// is where the timeline's origin lies in its window, so that window
// boundaries fall on whole multiples of w in Unix time (plus any offset).
type grid struct {
	w     int64
	phase int64
}

// index returns the number of the window holding t.
func (g grid) index(t int64) int64 { return floorDiv(t+g.phase, g.w) }

// start returns where window i begins.
func (g grid) start(i int64) int64 { return i*g.w - g.phase }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// fixedWindow is the arithmetic of FixedWindow. A key's bookings never
// move back, so it keeps the window of its latest booking (the cursor)
// and its count: every window after the current one and before the
// cursor is closed to new bookings, and windows before the current one
// no longer matter. A window with room takes its first unit at its
// reset, whatever is still ahead in the window before it.
//
// A pause is where windows can mix: it moves every unit ahead later by
// by, and the units ahead of one window can land, across a reset, in the
// window that holds the next one's. So the key also keeps the bookings
// still ahead (ahead, oldest first; nil while there are none), and a
// pause lays them out again, in booking order, each at the later of its
// slot moved by by and the start of the first window with room for it.
// Once one is pushed into a later window, every unit booked after it
// moves by at least as much, so spacing that another limit (under All)
// put between them is kept. redislimit's fixed-window script follows the
// same rule.
type fixedWindow struct {
	limit int64
	tol   int64 // a unit in the last tol of a window counts in the next one too
	g     grid
}

type fixedState struct {
	idx   int64 // the cursor: the window of the latest booking
	cnt   int64 // units counted in window idx
	prev  int64 // units counted in window idx-1, at most (learnlimit.go)
	spill int64 // units of cnt booked in idx's last tol, which count in idx+1 too
	floor int64 // the latest slot booked; no slot goes below it
	ahead []aheadEntry

	learned *learnedLimit // nil until the upstream refused the key's units (learnlimit.go)
}

// aheadEntry records a booking whose slot was in the future when it was
// made. slot is where it is due now, pauses included.
type aheadEntry struct {
	slot int64
	n    int64
	seq  uint64
}

// count returns the units counted in window j, which is not before the
// cursor's.
func (f *fixedWindow) count(s *fixedState, j int64) int64 {
	switch j {
	case s.idx:
		return s.cnt
	case s.idx + 1:
		return s.spill
	}
	return 0
}

// inTail reports whether a unit at t counts in the next window too.
func (f *fixedWindow) inTail(t int64) bool {
	return f.tol > 0 && f.g.index(t+f.tol) != f.g.index(t)
}

func (f *fixedWindow) earliest(s *fixedState, now, from int64, n int) int64 {
	t := max(now, from, s.floor)
	limit := fitting(s.learned, f.limit, now, n)
	for j := max(f.g.index(t), s.idx); ; j++ {
		if f.count(s, j)+int64(n) <= limit {
			return max(t, f.g.start(j))
		}
		t = f.g.start(j + 1)
	}
}

func (f *fixedWindow) book(s *fixedState, now, slot int64, n int, seq uint64, _ bool) (undo int64, remaining int) {
	f.count1(s, slot, int64(n))
	s.floor = slot
	f.dropDue(s, now)
	if slot > now {
		s.ahead = append(s.ahead, aheadEntry{slot: slot, n: int64(n), seq: seq})
	}
	return 0, int(max(limitOf(s.learned, f.limit, now)-s.cnt, 0))
}

// count1 counts n units at t, which is not before the cursor's window,
// and moves the cursor there.
func (f *fixedWindow) count1(s *fixedState, t, n int64) {
	switch j := f.g.index(t); {
	case j == s.idx:
		s.cnt += n
	case j == s.idx+1:
		s.idx, s.prev, s.cnt, s.spill = j, s.cnt, s.spill+n, 0
	default:
		s.idx, s.prev, s.cnt, s.spill = j, 0, n, 0
	}
	if f.inTail(t) {
		s.spill += n
	}
}

// dropDue forgets the bookings ahead that are due at now: a pause no
// longer moves them.
func (f *fixedWindow) dropDue(s *fixedState, now int64) {
	i := 0
	for i < len(s.ahead) && s.ahead[i].slot <= now {
		i++
	}
	switch {
	case i == len(s.ahead):
		s.ahead = s.ahead[:0]
		if cap(s.ahead) > keptRuns {
			s.ahead = nil
		}
	case i > 0:
		s.ahead = append(s.ahead[:0], s.ahead[i:]...)
	}
}

// find returns the index of the booking ahead made with seq, or -1.
func (s *fixedState) find(seq uint64) int {
	i, ok := slices.BinarySearchFunc(s.ahead, seq, func(b aheadEntry, seq uint64) int { return cmp.Compare(b.seq, seq) })
	if !ok {
		return -1
	}
	return i
}

// due returns where booking b is due: the layout of the last pause for a
// booking still ahead, and slot, as the engine computed it, otherwise.
func (f *fixedWindow) due(s *fixedState, c *claim, slot int64) int64 {
	if i := s.find(c.seq); i >= 0 {
		return s.ahead[i].slot
	}
	return slot
}

// give takes the units back only when they are in the cursor's window.
// Units in an earlier window stay counted: that window is closed, and
// counting them keeps the cursor's arithmetic simple. Either way the
// booking leaves ahead, since its units will never be sent.
func (f *fixedWindow) give(s *fixedState, now int64, b claim, moved int64, latest bool) {
	if i := s.find(b.seq); i >= 0 {
		s.ahead = slices.Delete(s.ahead, i, i+1)
	}
	if f.g.index(b.slot) != s.idx {
		return
	}
	n := int64(b.n)
	s.cnt -= min(n, s.cnt)
	if f.inTail(b.slot) {
		s.spill -= min(n, s.spill)
	}
}

// shift moves the units ahead of now later by by, and then lays them out
// again so that no window holds more than limit (see fixedWindow). Units
// due by now stay where they are.
func (f *fixedWindow) shift(s *fixedState, now, by int64) {
	f.dropDue(s, now)
	if s.floor <= now {
		return // nothing booked lies ahead
	}
	s.floor += by
	if len(s.ahead) == 0 {
		return // the latest booking was given back: only the floor moves
	}
	// The window of now may hold units already due; the windows after it
	// hold only units ahead, but for the part of now's window's units in
	// its last tol, which count in the next window too. When the cursor
	// has left now's window its count is gone: take it as full, which
	// costs nothing, since no unit ahead is moved into it.
	p := f.g.index(now)
	var inP, tailP int64
	for _, b := range s.ahead {
		if f.g.index(b.slot) != p {
			break
		}
		inP += b.n
		if f.inTail(b.slot) {
			tailP += b.n
		}
	}
	limit := limitOf(s.learned, f.limit, now)
	dueP, dueSpill := limit-inP, int64(0)
	if f.inTail(now) {
		dueSpill = dueP
	}
	if s.idx == p {
		dueP, dueSpill = s.cnt-inP, s.spill-tailP
	}
	switch {
	case s.idx == p-1:
		s.prev = s.cnt
	case s.idx < p-1:
		s.prev = 0
	case s.idx > p:
		s.prev = f.limit // the cursor was ahead: window p-1's count is gone
	}
	s.idx, s.cnt, s.spill = p, dueP, dueSpill
	extra := int64(0)
	for i := range s.ahead {
		b := &s.ahead[i]
		t := b.slot + by + extra
		for j := f.g.index(t); f.count(s, j)+b.n > max(limit, b.n); j++ {
			t = f.g.start(j + 1)
		}
		extra = t - (b.slot + by)
		b.slot = t
		f.count1(s, t, b.n)
	}
	s.floor = max(s.floor, s.ahead[len(s.ahead)-1].slot)
}

// settle adjusts the count of the booking's window while it is the
// cursor's, giving back no more than it holds; a give-back to an earlier
// window is moot (no booking can go there again). An excess on a unit in
// the last tol of the window before the cursor's counts in the cursor's
// too, and an excess in a window after the cursor's (a state that had
// forgotten it) counts there like a booking.
func (f *fixedWindow) settle(s *fixedState, now int64, c claim, delta int64, latest, stale bool) {
	delta = min(delta, farUnits) // bad input: the window is full either way, and its count does not wrap around
	if i := s.find(c.seq); i >= 0 && !stale && c.n > 0 {
		// A later pause lays out what is really sent; no booking holds
		// more than a window (the layout needs each to fit in one).
		s.ahead[i].n = min(max(s.ahead[i].n+delta, 0), f.limit)
	}
	switch j := f.g.index(c.slot); {
	case j > s.idx && delta > 0:
		f.count1(s, c.slot, delta)
	case j == s.idx && delta > 0:
		f.count1(s, c.slot, delta)
	case j == s.idx && !stale:
		back := min(-delta, s.cnt)
		s.cnt -= back
		if f.inTail(c.slot) {
			s.spill -= min(back, s.spill)
		}
	case j == s.idx-1 && delta > 0 && f.inTail(c.slot):
		s.cnt += delta
	}
}

func (f *fixedWindow) pushed(s *fixedState, now int64) []aheadEntry {
	f.dropDue(s, now)
	return s.ahead
}

func (f *fixedWindow) raise(s *fixedState, now int64, units []aheadEntry) {}

func (f *fixedWindow) ahead(s *fixedState, now int64) int {
	n := int64(0)
	for _, b := range s.ahead {
		if b.slot > now {
			n += b.n
		}
	}
	return int(n)
}

func (f *fixedWindow) fresh(s *fixedState, now int64) bool {
	return s.floor <= now && (s.cnt == 0 || f.g.index(now) > s.idx)
}

func (f *fixedWindow) left(s *fixedState, now int64) int {
	if s.floor > now {
		return 0
	}
	j := f.g.index(now)
	if j < s.idx {
		return 0
	}
	return int(max(limitOf(s.learned, f.limit, now)-f.count(s, j), 0))
}

// spans is the key's window that holds slot (tight), and that window
// with the one before it (safe): the upstream's window, on whatever
// grid, lies within the two. A count the key no longer holds is taken as
// the limit.
func (f *fixedWindow) spans(s *fixedState, slot int64) (tight, safe windowCount) {
	j := f.g.index(slot)
	tight = windowCount{lo: f.g.start(j), hi: f.g.start(j+1) - 1, booked: f.limit}
	safe = windowCount{lo: f.g.start(j - 1), hi: tight.hi, booked: 2 * f.limit}
	switch {
	case j == s.idx:
		tight.booked, safe.booked = s.cnt, s.prev+s.cnt
	case j == s.idx+1:
		tight.booked, safe.booked = s.spill, s.cnt+s.spill
	case j == s.idx-1:
		tight.booked, safe.booked = s.prev, f.limit+s.prev
	}
	return tight, safe
}

func (f *fixedWindow) learnedOf(s *fixedState) *learnedLimit {
	if s.learned == nil {
		s.learned = &learnedLimit{}
	}
	return s.learned
}

func (f *fixedWindow) configured() int64 { return f.limit }

// Reserve implements [Limiter]: it books n units of key, now or at the
// first later slot with room, if that slot lies within maxWait.
func (w *FixedWindow) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*Reservation, error) {
	return w.e.reserve(ctx, key, n, 0, maxWait)
}

// ReserveAfter implements [Deferrer]: Reserve, with the slot no earlier
// than after from now.
func (w *FixedWindow) ReserveAfter(ctx context.Context, key string, n int, after, maxWait time.Duration) (*Reservation, error) {
	return w.e.reserve(ctx, key, n, after, maxWait)
}

// AllowN implements [Allower]: it takes n units of key only if they are
// available now, and allocates nothing.
func (w *FixedWindow) AllowN(ctx context.Context, key string, n int) (bool, error) {
	return w.e.allow(ctx, key, n)
}

// Pause implements [Pauser]: every slot of key still ahead, and every new
// booking, moves later, so that nothing is due for d from now.
func (w *FixedWindow) Pause(ctx context.Context, key string, d time.Duration) error {
	return w.e.pause(ctx, key, d)
}

// Learn implements [Learner]: a refusal of key's units lowers key's
// limit to what the upstream was seen to admit in the window that holds
// the refused unit's slot, if that is below the window's: the stricter
// of the two wins (see "Learned limits" in the package doc). An admitted
// answer costs nothing; Learn ignores ctx.
func (w *FixedWindow) Learn(ctx context.Context, key string, o Outcome) error {
	learnLimit(w.e, key, o)
	return nil
}

// Inspect implements [Inspector].
func (w *FixedWindow) Inspect(ctx context.Context, key string) (KeyState, error) {
	return w.e.inspect(ctx, key)
}

func (w *FixedWindow) engine() keyLocker { return w.e }
