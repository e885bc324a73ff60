package throttle

import (
	"cmp"
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
	*keyed[logState, slidingLog]
	limit  int
	window time.Duration
}

// NewSlidingWindow returns a limiter that allows at most limit units per
// key in any interval of length window. With [WithTolerance](d) the
// window is treated as d longer.
func NewSlidingWindow(limit int, window time.Duration, opts ...Option) (*SlidingWindow, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := checkWindow(limit, window, c.tolerance); err != nil {
		return nil, err
	}
	alg := slidingLog{limit: int64(limit), w: int64(window + c.tolerance)}
	return &SlidingWindow{keyed: newKeyed(alg, limit, c), limit: limit, window: window}, nil
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
type logState struct {
	runs []logRun
	// base is how many units were dropped from the front, the newest of
	// them at horizon. They are assumed to all sit at horizon, which can
	// only overcount: it matters once a Cancel leaves fewer than limit
	// units in the log.
	base     int64
	horizon  int64
	floor    int64 // the latest slot booked; no slot goes below it
	pausedAt int64 // when the key was last paused
}

func (s *logState) total() int64 {
	if len(s.runs) == 0 {
		return s.base
	}
	return s.runs[len(s.runs)-1].cum
}

// unitAt returns the slot of unit number u, which is at least 1.
func (s *logState) unitAt(u int64) int64 {
	if u <= s.base {
		return s.horizon
	}
	i := sort.Search(len(s.runs), func(i int) bool { return s.runs[i].cum >= u })
	return s.runs[i].at
}

// inWindow returns how many units lie after t-w, counting dropped units
// as sitting at horizon.
func (l slidingLog) inWindow(s *logState, t int64) int64 {
	i := sort.Search(len(s.runs), func(i int) bool { return s.runs[i].at > t-l.w })
	if i == 0 && s.base > 0 && s.horizon > t-l.w {
		return s.total()
	}
	before := s.base
	if i > 0 {
		before = s.runs[i-1].cum
	}
	return s.total() - before
}

func (l slidingLog) earliest(s *logState, now, from int64, n int) (slot, notBefore int64) {
	slot = max(now, from, s.floor)
	if u := s.total() - (l.limit - int64(n)); u > 0 {
		slot = max(slot, s.unitAt(u)+l.w)
	}
	return slot, 0
}

func (l slidingLog) book(s *logState, now, slot int64, n int) (aux int64, remaining int) {
	l.drop(s, func(r logRun) bool { return r.at+l.w <= now })
	if k := len(s.runs) - 1; k >= 0 && s.runs[k].at == slot {
		s.runs[k].cum += int64(n)
	} else {
		s.runs = append(s.runs, logRun{at: slot, cum: s.total() + int64(n)})
	}
	total := s.total()
	l.drop(s, func(r logRun) bool { return total-r.cum >= l.limit })
	s.floor = slot
	return 0, int(max(l.limit-l.inWindow(s, slot), 0))
}

// drop forgets runs from the front while old says they are not needed.
func (l slidingLog) drop(s *logState, old func(logRun) bool) {
	i := 0
	for i < len(s.runs) && old(s.runs[i]) {
		i++
	}
	if i == 0 {
		return
	}
	s.base, s.horizon = s.runs[i-1].cum, s.runs[i-1].at
	s.runs = s.runs[i:]
	if len(s.runs) == 0 {
		s.runs = nil // let the memory go
	}
}

// give takes booking b's units out of the log. Removing units never
// raises the count of any interval, so it gives back in full whether or
// not later bookings exist; the floor keeps later slots from moving
// back. Units dropped from the front to make room are still assumed at
// horizon, so the log never forgets more than it was told to.
func (l slidingLog) give(s *logState, now int64, b *mark, moved int64, latest bool) {
	if usedBeforePause(b, moved, s.pausedAt) {
		return
	}
	i, found := slices.BinarySearchFunc(s.runs, b.slot, func(r logRun, at int64) int { return cmp.Compare(r.at, at) })
	if !found {
		return
	}
	before := s.base
	if i > 0 {
		before = s.runs[i-1].cum
	}
	take := min(int64(b.n), s.runs[i].cum-before)
	for j := i; j < len(s.runs); j++ {
		s.runs[j].cum -= take
	}
	if s.runs[i].cum == before {
		s.runs = slices.Delete(s.runs, i, i+1)
	}
}

// shift moves every run at or after now later by d. A unit due exactly
// now moves too: its caller may not have woken yet, and will follow the
// pause.
func (l slidingLog) shift(s *logState, now, d int64) {
	s.pausedAt = now
	i := sort.Search(len(s.runs), func(i int) bool { return s.runs[i].at >= now })
	for j := i; j < len(s.runs); j++ {
		s.runs[j].at += d
	}
	if s.base > 0 && s.horizon >= now {
		s.horizon += d
	}
	if s.floor >= now {
		s.floor += d
	}
}

func (l slidingLog) fresh(s *logState, now int64) bool {
	last := s.horizon
	if k := len(s.runs) - 1; k >= 0 {
		last = s.runs[k].at
	}
	return s.floor <= now && (s.total() == 0 || last+l.w <= now)
}

func (l slidingLog) left(s *logState, now int64) int {
	if s.floor > now {
		return 0
	}
	return int(max(l.limit-l.inWindow(s, now), 0))
}
