package throttle

// gcra is the Generic Cell Rate Algorithm shared by TokenBucket and
// LeakyBucket: one timestamp per key, the theoretical arrival time (tat)
// of the next unit if the budget were spent at exactly the rate. The
// budget is full whenever tat is not after now. redislimit's scripts do
// the same arithmetic.
type gcra struct {
	interval int64 // nanoseconds per unit
	burst    int64 // units that may go at once
}

type gcraState struct {
	tat   int64
	floor int64 // set by raise: give never takes tat below it
}

func (g *gcra) earliest(s *gcraState, now, from int64, n int) int64 {
	return max(now, from, s.tat+int64(n)*g.interval-g.burst*g.interval)
}

// book moves tat past the units and returns tat as it was before, which
// give restores.
func (g *gcra) book(s *gcraState, now, slot int64, n int, _ uint64, tally bool) (undo int64, remaining int) {
	before := s.tat
	s.tat = max(s.tat, slot) + int64(n)*g.interval
	if !tally {
		return before, 0
	}
	return before, int(max(g.burst*g.interval-(s.tat-slot), 0) / g.interval)
}

func (g *gcra) due(s *gcraState, c *claim, slot int64) int64 { return slot }

// give returns all of a latest booking: tat goes back to what it was
// before it, moved by the pauses since, which also undoes any idle
// stretch All's common slot put before it.
//
// An earlier booking gives back nothing. The bookings after it were
// granted against a tat that counted it, and one timestamp cannot tell
// how much of it they rely on: x/time/rate's rule (give back what the
// span booked after it does not cover) over-admits once a later slot was
// pushed past tat, or when two earlier bookings are cancelled in turn.
func (g *gcra) give(s *gcraState, now int64, c claim, moved int64, latest bool) {
	if latest {
		s.tat = max(min(s.tat, c.undo+moved), s.floor)
	}
}

func (g *gcra) pushed(s *gcraState, now int64) []aheadEntry { return nil }

// raise books the units again where they are due: tat as if they had
// been booked there, in order. Booking units at slots d1, d2, ... leaves
// tat at the largest of di + the cost of units i and after. A later
// Cancel does not undo it (floor): the bucket then spaces new units from
// a unit that will not be sent, which only delays them.
func (g *gcra) raise(s *gcraState, now int64, units []aheadEntry) {
	cost := int64(0)
	for i := len(units) - 1; i >= 0; i-- {
		cost += units[i].n * g.interval
		s.floor = max(s.floor, units[i].slot+cost)
	}
	s.tat = max(s.tat, s.floor)
}

func (g *gcra) shift(s *gcraState, now, by int64) {
	s.tat = max(s.tat, now) + by
	if s.floor > now {
		s.floor += by
	}
}

func (g *gcra) fresh(s *gcraState, now int64) bool {
	return s.tat <= now
}

func (g *gcra) left(s *gcraState, now int64) int {
	return int(max(g.burst*g.interval-max(s.tat-now, 0), 0) / g.interval)
}

// ahead reports the span booked past now in whole units, rounded up.
func (g *gcra) ahead(s *gcraState, now int64) int {
	return int((max(s.tat-now, 0) + g.interval - 1) / g.interval)
}
