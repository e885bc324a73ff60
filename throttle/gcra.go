package throttle

// gcra is the Generic Cell Rate Algorithm shared by TokenBucket and
// LeakyBucket: one timestamp per key, the theoretical arrival time (tat)
// of the next unit if the budget were spent at exactly the rate. The
// budget is full whenever tat is not after now. redislimit's scripts do
// the same arithmetic.
type gcra struct {
	interval int64 // nanoseconds per unit
	burst    int64 // TokenBucket: units that may go at once
	queue    int64 // LeakyBucket: units whose slot may lie in the future, plus one; 0 for a TokenBucket
}

type gcraState struct {
	tat int64
}

func (g *gcra) earliest(s *gcraState, now, from int64, n int) (slot, notBefore int64) {
	cost := int64(n) * g.interval
	if g.queue == 0 {
		return max(now, from, s.tat+cost-g.burst*g.interval), 0
	}
	// A leaky bucket has no burst: the next free slot is tat. It holds at
	// most queue units ahead of now, so the line must drain enough before
	// this booking can join it.
	slot = max(now, from, s.tat)
	return slot, slot + cost - g.queue*g.interval
}

// book moves tat past the units and returns tat as it was before, which
// give restores.
func (g *gcra) book(s *gcraState, now, slot int64, n int, _ uint64, tally bool) (aux int64, remaining int) {
	before := s.tat
	s.tat = max(s.tat, slot) + int64(n)*g.interval
	if !tally {
		return before, 0
	}
	ahead := g.burst
	from := slot
	if g.queue > 0 {
		ahead, from = g.queue, now
	}
	return before, int(max(ahead*g.interval-(s.tat-from), 0) / g.interval)
}

// give returns all of a latest booking: tat goes back to what it was
// before it, moved by the pauses since, which also undoes any idle
// stretch All's common slot put before it.
//
// An earlier booking gives back nothing. The bookings after it were
// granted against a tat that counted it, and one timestamp cannot tell
// how much of it they rely on: x/time/rate's rule (give back what the
// span booked after it does not cover) over-admits once a later slot was
// pushed past tat, or when two earlier bookings are cancelled in turn.
func (g *gcra) give(s *gcraState, now int64, b mark, moved int64, latest bool) {
	if latest {
		s.tat = min(s.tat, b.aux+moved)
	}
}

func (g *gcra) due(s *gcraState, b *mark, slot int64) int64 { return slot }

func (g *gcra) shift(s *gcraState, now, d int64) {
	s.tat = max(s.tat, now) + d
}

func (g *gcra) fresh(s *gcraState, now int64) bool {
	return s.tat <= now
}

func (g *gcra) left(s *gcraState, now int64) int {
	ahead := g.burst
	if g.queue > 0 {
		ahead = g.queue
	}
	return int(max(ahead*g.interval-max(s.tat-now, 0), 0) / g.interval)
}
