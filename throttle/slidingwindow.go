package throttle

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"time"
)

// SlidingWindow allows at most limit units per key in any interval of
// length window: an exact sliding log. Slots booked in the future count
// too, so a caller who finds the window full is given the first slot at
// which its units fit, and never retries.
//
// Pick it when the upstream enforces "at most N in any window" and must
// never see more: unlike [FixedWindow] it has no boundary burst, and
// unlike [SlidingWindowCounter] it is exact. It costs memory: a key keeps
// the slots of its last limit units, one entry per distinct slot (units
// of one call, or of calls booked at the same instant, share an entry),
// so up to 16 bytes × limit per busy key.
//
// A SlidingWindow is safe for concurrent use.
type SlidingWindow struct {
	e      *engine[logState, *slidingLog]
	limit  int
	window time.Duration
}

// NewSlidingWindow returns a limiter that allows at most limit units per
// key in any interval of length window. With [WithTolerance](d) the
// window is treated as d longer.
func NewSlidingWindow(limit int, window time.Duration, opts ...Option) (*SlidingWindow, error) {
	c := newConfig(opts)
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := checkWindow(limit, window, c.tolerance); err != nil {
		return nil, err
	}
	alg := &slidingLog{limit: int64(limit), w: int64(window + c.tolerance)}
	return &SlidingWindow{e: newEngine(alg, limit, c), limit: limit, window: window}, nil
}

// Limit returns how many units any window allows.
func (w *SlidingWindow) Limit() int { return w.limit }

// Window returns the window's length as configured, before any
// tolerance.
func (w *SlidingWindow) Window() time.Duration { return w.window }

// slidingLog is the arithmetic of SlidingWindow. A slot t admits n units
// when the units in (t-w, t] plus n are at most limit; since no slot is
// booked after t, that is when the (limit-n+1)-th newest unit lies at or
// before t-w. So a key needs the slots of its newest limit units only.
type slidingLog struct {
	limit int64
	w     int64
}

// logRun is the units booked at one slot.
type logRun struct {
	at  int64 // the slot
	cum int64 // units booked up to and including this run
}

// logState is one key's log: runs in increasing slot order. Units are
// numbered in booking order; runs[i] holds those numbered after
// runs[i-1].cum (after base for runs[0]) up to runs[i].cum.
//
// A unit is dropped from the front once limit newer units follow it.
// Those limit+1 units span at least w, so the floor already lies w or
// more after every dropped unit: they can never constrain a slot again,
// even once a Cancel leaves fewer than limit units in the log.
//
// The runs are buf[head:]. Runs dropped from the front leave room that
// push reuses, so a busy key's log settles into one array instead of
// allocating as it slides (for the goal of 0 allocations per Allow).
type logState struct {
	buf   []logRun
	head  int
	base  int64 // units dropped from the front
	floor int64 // the latest slot booked; no slot goes below it
	gone  int64 // the slot of the newest unit dropped from the front

	learned *learnedLimit // nil until the upstream refused the key's units (learnlimit.go)
}

func (s *logState) runs() []logRun { return s.buf[s.head:] }

func (s *logState) total() int64 {
	if s.head == len(s.buf) {
		return s.base
	}
	return s.buf[len(s.buf)-1].cum
}

// push appends r. When the array is full and at least half of it lies
// before head, the runs move down; otherwise the array grows to twice the
// runs. Either way each push copies O(1) runs on average.
func (s *logState) push(r logRun) {
	if len(s.buf) == cap(s.buf) && s.head > 0 {
		if runs := s.runs(); 2*s.head >= len(s.buf) {
			s.buf = append(s.buf[:0], runs...) // copy handles the overlap
		} else {
			s.buf = append(make([]logRun, 0, 2*len(runs)+1), runs...)
		}
		s.head = 0
	}
	s.buf = append(s.buf, r)
}

// dropFront forgets the first i runs.
func (s *logState) dropFront(i int) {
	if i == 0 {
		return
	}
	s.head += i
	s.base, s.gone = s.buf[s.head-1].cum, s.buf[s.head-1].at
	s.trim(i)
}

// trim empties buf once every run is gone, the last dropped runs at
// once. The array stays for the key's next booking unless it is far
// larger than they needed: a key whose whole window went by between two
// bookings, as a pause of the process can make happen, must not grow its
// log from nothing each time (0 allocations per Allow, and the memory
// goal for idle keys).
func (s *logState) trim(dropped int) {
	if s.head < len(s.buf) {
		return
	}
	s.head = 0
	if cap(s.buf) <= 4*dropped+keptRuns {
		s.buf = s.buf[:0]
	} else {
		s.buf = nil
	}
}

// keptRuns is the room an emptied log keeps beyond what trim's rule
// allows.
const keptRuns = 4

// inWindow returns how many units in the log lie after t-w.
func (l *slidingLog) inWindow(s *logState, t int64) int64 {
	runs := s.runs()
	i := firstAfter(runs, t-l.w)
	before := s.base
	if i > 0 {
		before = runs[i-1].cum
	}
	return s.total() - before
}

// firstAfter returns the index of the first run whose slot is after t.
func firstAfter(runs []logRun, t int64) int {
	return sort.Search(len(runs), func(i int) bool { return runs[i].at > t })
}

// firstReaching returns the index of the first run holding unit number u
// or a later one.
func firstReaching(runs []logRun, u int64) int {
	return sort.Search(len(runs), func(i int) bool { return runs[i].cum >= u })
}

func (l *slidingLog) earliest(s *logState, now, from int64, n int) int64 {
	slot := max(now, from, s.floor)
	// Unit number u must lie at or before slot-w.
	if u := s.total() - (fitting(s.learned, l.limit, now, n) - int64(n)); u > s.base {
		runs := s.runs()
		slot = max(slot, runs[firstReaching(runs, u)].at+l.w)
	}
	return slot
}

func (l *slidingLog) book(s *logState, now, slot int64, n int, _ uint64, tally bool) (undo int64, remaining int) {
	runs := s.runs()
	i := 0
	for i < len(runs) && runs[i].at+l.w <= now {
		i++ // out of the window for good
	}
	s.dropFront(i)
	if k := len(s.buf) - 1; k >= s.head && s.buf[k].at == slot {
		s.buf[k].cum += int64(n)
	} else {
		s.push(logRun{at: slot, cum: s.total() + int64(n)})
	}
	total := s.total()
	runs = s.runs()
	i = 0
	for i < len(runs) && total-runs[i].cum >= l.limit {
		i++ // limit newer units follow
	}
	s.dropFront(i)
	s.floor = slot
	if !tally {
		return 0, 0
	}
	return 0, int(max(limitOf(s.learned, l.limit, now)-l.inWindow(s, slot), 0))
}

// give takes booking b's units out of the log. Removing units never
// raises the count of any interval, so it gives back in full whether or
// not later bookings exist; the floor keeps later slots from moving
// back, and so keeps the units dropped from the log harmless.
func (l *slidingLog) give(s *logState, now int64, b claim, moved int64, latest bool) {
	runs := s.runs()
	i, found := slices.BinarySearchFunc(runs, b.slot, func(r logRun, at int64) int { return cmp.Compare(r.at, at) })
	if !found {
		return
	}
	before := s.base
	if i > 0 {
		before = runs[i-1].cum
	}
	take := min(int64(b.n), runs[i].cum-before)
	for j := i; j < len(runs); j++ {
		runs[j].cum -= take
	}
	if runs[i].cum == before {
		s.buf = slices.Delete(s.buf, s.head+i, s.head+i+1)
		s.trim(1)
	}
}

// settle removes units from the log at the booking's slot, or adds the
// excess there: the log then holds what was really used. Removing units
// never raises the count of any interval, whether or not later bookings
// exist (see give).
func (l *slidingLog) settle(s *logState, now int64, b claim, delta int64, latest, stale bool) {
	delta = min(delta, farUnits) // bad input: the window is full either way, and its count does not wrap around
	switch {
	case delta < 0 && !stale:
		b.n = int(-delta)
		l.give(s, now, b, 0, latest)
	case delta > 0:
		l.add(s, b.slot, delta)
	}
}

// add counts n more units at slot, in slot order: in its run, or in a
// new run of their own.
func (l *slidingLog) add(s *logState, slot, n int64) {
	runs := s.runs()
	i := firstAfter(runs, slot)
	if i > 0 && runs[i-1].at == slot {
		for j := i - 1; j < len(runs); j++ {
			runs[j].cum += n
		}
		return
	}
	before := s.base
	if i > 0 {
		before = runs[i-1].cum
	}
	s.push(logRun{}) // room for one more run; buf may move
	k := s.head + i
	copy(s.buf[k+1:], s.buf[k:])
	s.buf[k] = logRun{at: slot, cum: before}
	for j := k; j < len(s.buf); j++ {
		s.buf[j].cum += n
	}
}

func (l *slidingLog) due(s *logState, c *claim, slot int64) int64 { return slot }

// shift moves every run after now later by d. A unit due exactly now is
// spent and stays.
func (l *slidingLog) shift(s *logState, now, d int64) {
	runs := s.runs()
	for j := firstAfter(runs, now); j < len(runs); j++ {
		runs[j].at += d
	}
	if s.floor > now {
		s.floor += d
	}
}

func (l *slidingLog) pushed(s *logState, now int64) []aheadEntry { return nil }

// raise does nothing: the log cannot tell which of its runs the units
// were booked in (see FixedWindow on All).
func (l *slidingLog) raise(s *logState, now int64, units []aheadEntry) {}

func (l *slidingLog) ahead(s *logState, now int64) int {
	runs := s.runs()
	i := firstAfter(runs, now)
	before := s.base
	if i > 0 {
		before = runs[i-1].cum
	}
	return int(s.total() - before)
}

func (l *slidingLog) fresh(s *logState, now int64) bool {
	runs := s.runs()
	k := len(runs) - 1
	return s.floor <= now && (k < 0 || runs[k].at+l.w <= now)
}

func (l *slidingLog) left(s *logState, now int64) int {
	if s.floor > now {
		return 0
	}
	return int(max(limitOf(s.learned, l.limit, now)-l.inWindow(s, now), 0))
}

// spans is the window that ends at slot, and the units booked in it:
// the log's count, or the limit where units dropped from its front lie
// in it. It is both tight and safe.
func (l *slidingLog) spans(s *logState, slot int64) (tight, safe windowCount) {
	runs := s.runs()
	from, to := firstAfter(runs, slot-l.w), firstAfter(runs, slot)
	sp := windowCount{lo: slot - l.w + 1, hi: slot, booked: l.limit}
	if s.base == 0 || s.gone <= sp.lo-1 {
		upTo := func(i int) int64 {
			if i == 0 {
				return s.base
			}
			return runs[i-1].cum
		}
		sp.booked = upTo(to) - upTo(from)
	}
	return sp, sp
}

func (l *slidingLog) learnedOf(s *logState) *learnedLimit {
	if s.learned == nil {
		s.learned = &learnedLimit{}
	}
	return s.learned
}

func (l *slidingLog) configured() int64 { return l.limit }

// Reserve implements [Limiter]: it books n units of key, now or at the
// first later slot with room, if that slot lies within maxWait.
func (w *SlidingWindow) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*Reservation, error) {
	return w.e.reserve(ctx, key, n, 0, maxWait)
}

// ReserveAfter implements [Deferrer]: Reserve, with the slot no earlier
// than after from now.
func (w *SlidingWindow) ReserveAfter(ctx context.Context, key string, n int, after, maxWait time.Duration) (*Reservation, error) {
	return w.e.reserve(ctx, key, n, after, maxWait)
}

// AllowN implements [Allower]: it takes n units of key only if they are
// available now, and allocates nothing.
func (w *SlidingWindow) AllowN(ctx context.Context, key string, n int) (bool, error) {
	return w.e.allow(ctx, key, n)
}

// Pause implements [Pauser]: every slot of key still ahead, and every new
// booking, moves later, so that nothing is due for d from now.
func (w *SlidingWindow) Pause(ctx context.Context, key string, d time.Duration) error {
	return w.e.pause(ctx, key, d)
}

// Learn implements [Learner]: a refusal of key's units lowers key's
// limit to what the upstream was seen to admit in the window that ends
// at the refused unit's slot, if that is below the window's: the
// stricter of the two wins (see "Learned limits" in the package doc).
// An admitted answer costs nothing; Learn ignores ctx.
func (w *SlidingWindow) Learn(ctx context.Context, key string, o Outcome) error {
	learnLimit(w.e, key, o)
	return nil
}

// Inspect implements [Inspector].
func (w *SlidingWindow) Inspect(ctx context.Context, key string) (KeyState, error) {
	return w.e.inspect(ctx, key)
}

func (w *SlidingWindow) engine() keyLocker { return w.e }
