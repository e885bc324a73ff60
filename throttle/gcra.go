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

func (g gcra) earliest(s *gcraState, now, from int64, n int) (slot, notBefore int64) {
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

func (g gcra) book(s *gcraState, now, slot int64, n int) (aux int64, remaining int) {
	s.tat = max(s.tat, slot) + int64(n)*g.interval
	ahead := g.burst
	from := slot
	if g.queue > 0 {
		ahead, from = g.queue, now
	}
	return s.tat, int(max(ahead*g.interval-(s.tat-from), 0) / g.interval)
}

// give returns all of a latest booking. An earlier one gives back only
// the part of its span that later bookings do not already cover, as
// x/time/rate does: the units booked after it were granted on the
// assumption that it was spent, and they keep their slots.
func (g gcra) give(s *gcraState, now int64, b *mark, moved int64, latest bool) {
	cost := int64(b.n) * g.interval
	if !latest {
		cost = max(cost-(s.tat-(b.aux+moved)), 0)
	}
	s.tat -= cost
}

func (g gcra) shift(s *gcraState, now, d int64) {
	s.tat = max(s.tat, now) + d
}

func (g gcra) fresh(s *gcraState, now int64) bool {
	return s.tat <= now
}

func (g gcra) left(s *gcraState, now int64) int {
	ahead := g.burst
	if g.queue > 0 {
		ahead = g.queue
	}
	return int(max(ahead*g.interval-max(s.tat-now, 0), 0) / g.interval)
}
