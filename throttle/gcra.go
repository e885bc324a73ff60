package throttle

import (
	"time"

	"github.com/egress-go/egress/internal/tolerance"
)

// gcra is the Generic Cell Rate Algorithm shared by TokenBucket and
// LeakyBucket: one timestamp per key, the theoretical arrival time (tat)
// of the next unit if the budget were spent at exactly the rate. The
// budget is full whenever tat is not after now. redislimit's scripts do
// the same arithmetic.
type gcra struct {
	interval int64               // nanoseconds per unit, before any headroom
	burst    int64               // units that may go at once, before any headroom
	reserve  int64               // the headroom kept when the burst can spare it (ns)
	hr       *tolerance.Headroom // the headroom when it cannot (see WithTolerance)
}

// params returns the key's interval (the bucket's, or the longer one the
// key learned: learnrate.go) and the span of the burst (burst times
// interval, less the headroom in use: see [tolerance.Span]).
func (g *gcra) params(s *gcraState) (interval, span int64) {
	iv := g.interval
	if s.rate != nil {
		iv = max(iv, s.rate.interval)
	}
	return tolerance.Span(iv, int(g.burst), g.reserve+g.hr.Get()) // one of them is 0
}

// newGCRA returns the GCRA of a bucket of burst units at interval with a
// tolerance of d: taken out of the burst's span when the burst can spare
// it, so that it is paid once, or kept by a headroom that follows the
// path otherwise (see [WithTolerance]).
func newGCRA(interval time.Duration, burst int, d time.Duration) *gcra {
	g := &gcra{interval: int64(interval), burst: int64(burst)}
	switch {
	case d <= 0:
	case tolerance.Spares(interval, burst, d):
		g.reserve = int64(d)
	default:
		g.hr = tolerance.NewHeadroom(d)
	}
	return g
}

type gcraState struct {
	tat   int64
	rate  *learnedRate // what the upstream's refusals showed of its rate; nil until the key hears an answer (a pointer for the memory goal, ≤ 256 B a key)
	floor int64        // set by raise: give never takes tat below it
	adj   int64        // the net change settles made to tat; undo is kept net of it

	// What a settle may give back (see settle). A booking's slack is how
	// far tat lay past its slot when it was made (tat before it minus its
	// slot, at least 0); every give-back since lowers it by as much. A
	// booking of slack 0 (one that waited for its own slot, or came after
	// an idle stretch) starts a new run: the bookings before it (seq
	// below cut) give back nothing. The others of the run are kept in
	// slack, oldest first, as levels (slack plus gone when recorded), so
	// that a give-back is one addition: a booking's slack now is at least
	// its level minus gone (later bookings' give-backs count too, which
	// only gives back less).
	cut   uint64
	gone  int64 // all that settles have given back, in nanoseconds of tat
	slack []slackEntry
}

// slackEntry is a booking's slack as a level (see gcraState).
type slackEntry struct {
	seq   uint64
	level int64
}

// maxSlack bounds the slack entries a key keeps: the bookings made
// between a booking and its settle (those in flight, for a saturated
// key). Past it the oldest entry goes and the bookings before it give
// back nothing, which only gives back less. A key keeps entries only
// while its run has slack, so a fresh or idle key keeps none and
// allocates nothing (Allow goal); a saturated one keeps up to 1 KiB.
const maxSlack = 64

// pushSlack records the slack of booking seq. Entries at as high a level
// or higher say nothing more than it does, for the bookings before them.
func (s *gcraState) pushSlack(seq uint64, slack int64) {
	if slack <= 0 {
		s.cut, s.slack = seq, s.slack[:0]
		return
	}
	level := slack + s.gone
	for len(s.slack) > 0 && s.slack[len(s.slack)-1].level >= level {
		s.slack = s.slack[:len(s.slack)-1]
	}
	if len(s.slack) == maxSlack {
		s.cut = max(s.cut, s.slack[0].seq)
		s.slack = append(s.slack[:0], s.slack[1:]...)
	}
	s.slack = append(s.slack, slackEntry{seq: seq, level: level})
}

// slackAfter returns the least slack of the bookings made after seq, or
// -1 when none is on record.
func (s *gcraState) slackAfter(seq uint64) int64 {
	if seq < s.cut {
		return 0
	}
	least := int64(-1)
	for _, e := range s.slack {
		if e.seq > seq && (least < 0 || e.level < least) {
			least = e.level
		}
	}
	if least < 0 {
		return -1
	}
	return max(least-s.gone, 0)
}

func (g *gcra) earliest(s *gcraState, now, from int64, n int) int64 {
	iv, span := g.params(s)
	return max(now, from, s.tat+int64(n)*iv-span)
}

// book moves tat past the units and returns tat as it was before, which
// give restores.
func (g *gcra) book(s *gcraState, now, slot int64, n int, seq uint64, tally bool) (undo int64, remaining int) {
	iv, span := g.params(s)
	before := s.tat
	s.tat = max(s.tat, slot) + int64(n)*iv
	s.pushSlack(seq, max(before-slot, 0))
	if !tally {
		return before - s.adj, 0
	}
	return before - s.adj, int(max(span-(s.tat-slot), 0) / iv)
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
		s.tat = max(min(s.tat, c.undo+s.adj+moved), s.floor)
	}
}

// settle charges an excess by moving tat later by its cost, which is
// never less than what the excess adds to the tat of the actual usage
// (for a claim of nothing, booked by ReserveParts at cost 0, tat is
// first taken to its slot, as a booking would).
//
// A give-back of r units moves tat earlier by r intervals, which is
// exact for the units: tat is the latest, over the bookings j, of
// slot_j plus the cost of the units of j and after, and the give-back
// lowers every term up to this booking by r intervals. The terms of the
// bookings after it stay, so tat may only go as far back as the least
// slack among them (how far tat lay past their slot when they were
// made, less the give-backs since): a booking that waited for its slot,
// or began a new run after an idle stretch (slack 0), keeps what lies
// before it. The latest booking gives back in full. The floor set by
// raise still holds.
func (g *gcra) settle(s *gcraState, now int64, c claim, delta int64, latest, stale bool) {
	iv, _ := g.params(s)
	before := s.tat
	// An actual far beyond any capacity (bad input, but the call has
	// happened) is charged as far as tat can go: delta*iv, or tat past
	// it, would wrap around and let the key admit at once.
	delta = min(delta, farCharge/iv)
	switch {
	case delta > 0 && stale:
		s.tat = max(s.tat, now) + delta*iv // the dropped tat lay no later than now
	case delta > 0 && c.n == 0:
		// A claim of nothing (a part of ReserveParts of cost 0) is booked
		// only now, as the key's latest booking (c.seq is new): tat goes
		// to its slot first, as a booking's would, and the bookings
		// before it can give back no more than its slack.
		s.tat = max(s.tat, c.slot) + delta*iv
		s.pushSlack(c.seq, max(before-c.slot, 0))
	case delta > 0:
		s.tat += delta * iv // tat already lies past the booking's slot
	case stale:
		return
	default:
		back := -delta * iv
		if least := s.slackAfter(c.seq); least >= 0 && !latest {
			back = min(back, least)
		}
		s.tat = max(s.tat-back, s.floor)
		s.gone += before - s.tat
	}
	if delta > 0 {
		s.tat = max(before, min(s.tat, max(now, c.slot)+farCharge))
	}
	s.adj += s.tat - before
}

// farCharge (ns, about 36 years) bounds how far past now, or the
// booking's slot, a settle's excess moves a key's tat, and farUnits the
// units a settle's excess adds to a window's count: far more than any
// limiter admits, and far from where int64 wraps around.
const (
	farCharge = 1 << 60
	farUnits  = 1 << 40
)

func (g *gcra) pushed(s *gcraState, now int64) []aheadEntry { return nil }

// raise books the units again where they are due: tat as if they had
// been booked there, in order. Booking units at slots d1, d2, ... leaves
// tat at the largest of di + the cost of units i and after. A later
// Cancel does not undo it (floor): the bucket then spaces new units from
// a unit that will not be sent, which only delays them.
func (g *gcra) raise(s *gcraState, now int64, units []aheadEntry) {
	iv, _ := g.params(s)
	cost := int64(0)
	for i := len(units) - 1; i >= 0; i-- {
		cost += units[i].n * iv
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
	iv, span := g.params(s)
	return int(max(span-max(s.tat-now, 0), 0) / iv)
}

// ahead reports the span booked past now in whole units, rounded up.
func (g *gcra) ahead(s *gcraState, now int64) int {
	iv, _ := g.params(s)
	return int((max(s.tat-now, 0) + iv - 1) / iv)
}

// learn feeds one attempt's outcome to the headroom of a bucket's
// engine, and to key's learned rate (learnrate.go). A throttled answer
// counts as a refusal the budget did not expect only for an attempt it
// booked; an attempt that got no answer says nothing.
func learn(e *engine[gcraState, *gcra], key string, o Outcome) {
	if o.Failed {
		return
	}
	if e.alg.hr != nil {
		e.alg.hr.Learn(e.tl.read(), o.Late, o.Latency, o.Throttled && o.N > 0)
	}
	if o.N <= 0 {
		return
	}
	ks, now, err := e.lock(key)
	if err != nil {
		return // a full limiter: the answer teaches nothing
	}
	e.alg.learnRate(&ks.s, now, ks.pause.until, o)
	ks.mu.Unlock()
}
