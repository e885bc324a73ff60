package throttle

import (
	"context"
	"fmt"
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
// When the current window is full, a caller is given a slot at the start
// of the next window with room, never a retry: every window between now
// and the one being booked is full.
//
// [Pauser.Pause] moves the units booked ahead later by the pause while
// the windows stay put, so units may cross a reset. The limiter counts
// them in the window they land in, and keeps units booked in different
// windows at least a window apart so that no window can receive the
// units of two: when the window before is still being filled, a window's
// first booking goes no earlier after its reset than that window's
// latest unit went after its own. Every aligned window holds at most
// limit units, pauses included.
//
// A FixedWindow is safe for concurrent use.
type FixedWindow struct {
	*keyed[fixedState, *fixedWindow]
	limit  int
	window time.Duration
}

// NewFixedWindow returns a limiter that allows limit units per key in
// each window, windows being aligned to the Unix epoch moved by
// [WithWindowOffset].
//
// With [WithTolerance](d), a unit booked in the last d of a window also
// counts against the next one: a request sent just before the reset may
// reach the upstream just after it, so the upstream's window holds at
// most limit whichever side the request lands on. d must be shorter than
// window. Without a tolerance each window is literal.
func NewFixedWindow(limit int, window time.Duration, opts ...Option) (*FixedWindow, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := checkWindow(limit, window, 0); err != nil {
		return nil, err
	}
	if c.tolerance >= window {
		return nil, fmt.Errorf("throttle: WithTolerance must be shorter than the window (%v), got %v", window, c.tolerance)
	}
	alg := &fixedWindow{limit: int64(limit), tol: int64(c.tolerance), g: grid{w: int64(window)}}
	k := newKeyed(alg, limit, c)
	k.alg.g.phase = floorMod(k.tl.unixNano(0)-int64(c.offset), int64(window))
	return &FixedWindow{keyed: k, limit: limit, window: window}, nil
}

// Limit returns how many units each window allows.
func (w *FixedWindow) Limit() int { return w.limit }

// Window returns the length of a window.
func (w *FixedWindow) Window() time.Duration { return w.window }

// Reserve implements [Limiter]. A caller that keeps the Reservation to
// itself allocates nothing.
func (w *FixedWindow) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*Reservation, error) {
	return w.reserve(ctx, key, n, maxWait, new(Reservation))
}

// checkWindow validates the arguments shared by the windowed limiters,
// whose window is lengthened by tol.
func checkWindow(limit int, window, tol time.Duration) error {
	switch {
	case limit < 1:
		return fmt.Errorf("throttle: limit must be at least 1, got %d", limit)
	case window <= 0:
		return fmt.Errorf("throttle: window must be positive, got %v", window)
	}
	if _, err := span("limit", limit, window); err != nil {
		return err
	}
	if tol > maxSpan-window {
		return fmt.Errorf("throttle: window %v plus tolerance %v is too long", window, tol)
	}
	_, err := span("limit", limit, window+tol)
	return err
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

// near returns index(t) for a t that usually lies in window i or the
// one after it, as a key's next booking does next to its cursor, and then
// spares the division.
func (g grid) near(t, i int64) int64 {
	if d := t - g.start(i); d >= 0 {
		if d < g.w {
			return i
		}
		if d-g.w < g.w {
			return i + 1
		}
	}
	return g.index(t)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// fixedWindow is the arithmetic of FixedWindow. A key's bookings never
// move back, so it keeps only the window of its latest booking (the
// cursor): every window after the current one and before the cursor is
// full, and windows before the current one no longer matter.
//
// Pauses move booked units by any amount, not by whole windows, so the
// units of two windows could come to share one. To rule that out, units
// still ahead in different windows are kept at least a window apart: a
// booking in the window after the latest one goes no earlier in its
// window than the latest one, if that is still ahead, went in its own.
// Usually units ahead sit at a window's start and this changes nothing;
// when another limit (under All) or a pause spreads them out, the next
// window's units start that much after its reset, and each window still
// gets its limit.
type fixedWindow struct {
	limit int64
	tol   int64 // a unit in the last tol of a window counts in the next one too
	g     grid
}

type fixedState struct {
	idx   int64 // the cursor: the window of the latest booking
	cnt   int64 // units counted in window idx
	spill int64 // units of cnt booked in idx's last tol, which count in idx+1 too
	floor int64 // the latest slot booked; no slot goes below it
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

func (f *fixedWindow) earliest(s *fixedState, now, from int64, n int) (slot, notBefore int64) {
	t := max(now, from, s.floor)
	for j := max(f.g.near(t, s.idx), s.idx); ; j++ {
		if f.count(s, j)+int64(n) <= f.limit {
			return t, 0
		}
		// Go to the next window, a window after the latest unit ahead.
		t = f.g.start(j + 1)
		if s.floor > now && f.g.index(s.floor) == j {
			t += s.floor - f.g.start(j)
		}
	}
}

func (f *fixedWindow) book(s *fixedState, now, slot int64, n int, _ bool) (aux int64, remaining int) {
	switch j := f.g.near(slot, s.idx); {
	case j == s.idx:
		s.cnt += int64(n)
	case j == s.idx+1:
		s.idx, s.cnt, s.spill = j, s.spill+int64(n), 0
	default:
		s.idx, s.cnt, s.spill = j, int64(n), 0
	}
	if f.inTail(slot) {
		s.spill += int64(n)
	}
	s.floor = slot
	return 0, int(max(f.limit-s.cnt, 0))
}

// give takes the units back only when they are in the cursor's window.
// Units in an earlier window stay spent: that window is full, and giving
// them back would let a later caller book a slot before ones already
// handed out.
func (f *fixedWindow) give(s *fixedState, now int64, b mark, moved int64, latest bool) {
	if f.g.near(b.slot, s.idx) != s.idx {
		return
	}
	n := int64(b.n)
	s.cnt -= min(n, s.cnt)
	if f.inTail(b.slot) {
		s.spill -= min(n, s.spill)
	}
}

// shift moves the units booked at or after now later by d, while windows
// stay where they are. Units ahead in different windows are a window
// apart, so each window still receives the units of at most one: the
// cursor moves to the window the latest unit lands in and keeps its
// count, and the windows it skips count as full. Units booked before now
// stay where they were.
func (f *fixedWindow) shift(s *fixedState, now, d int64) {
	if s.floor < now {
		return // nothing booked lies ahead
	}
	s.floor += d
	if to := f.g.index(s.floor); to != s.idx {
		s.idx, s.spill = to, 0
	}
	if f.inTail(s.floor) {
		s.spill = s.cnt
	}
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
	return int(max(f.limit-f.count(s, j), 0))
}
