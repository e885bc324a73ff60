package throttle

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// A bucket whose rate is not stated. throttled/throttled's GCRA states
// its burst as the limit, what remains, and, as the reset, the time until
// the bucket is full rounded up to a second: nothing to pace at once what
// remains runs out (bench scenario 5b, configured 25% too high: every 429
// it meets carries Retry-After 1, and pauses the key for a second).
//
// The record measures the refill instead. Units admitted plus what
// remains (the fill) grow at the refill rate while the bucket is not
// full. A bucket of limit L that admitted a unit and says R ≤ L − 2 was
// not full just before: had it filled since the last answer, it would
// say L − 1 (every request of the key is answered here, so nothing else
// drained it in between). A stretch of answers whose remaining stays at
// or below L − 2 therefore measures the refill, up to the rounding of
// remaining, however slowly the client sent: a pause fills the bucket,
// which ends the stretch, so a pause never lowers the rate. Only answers
// in order are read (nothing sent before them unanswered, sent after
// every answer read before): the answers to a burst arrive in any order,
// and the units admitted would not match what remains. The rate is the
// growth of the fill over the stretches of the last [refillKeep] of
// measured time, less a unit for each stretch that does not start at a
// bucket just full (whose level is L − 1 exactly): a lower bound.
//
// Once measured, the quota is booked as a GCRA at that rate: each answer
// read anchors the bucket's level at what it states (the level is at
// least R) as its request was sent, less the units in flight (see
// statedKey.unseen); units are
// booked at the rate from there, keeping [refillReserve] of the
// bucket's span in reserve, and each booking is checked again when its slot
// comes ([statedBooking.Until]), for the units booked before the rate was
// known or sent without a booking here. A rate measured low costs wall
// time in proportion while the callers keep bookings queued ahead.
//
// Until the rate is known, the configured limiter paces; a reset stated
// as "within a second" to the second (throttled's, every time) does not
// hold bookings until its end (see [statedQuota.vague]).

const (
	// refillKeep is how much measured time the rate is pooled over.
	refillKeep = int64(3 * time.Second)
	// refillMinSpan is the measured time below which the rate is not
	// known: the configured limiter paces until then.
	refillMinSpan = int64(50 * time.Millisecond)
	// refillMinUnits is the refill measured below which the rate is not
	// known: the rounding of remaining is worth up to a unit.
	refillMinUnits = 4
	// refillPrecision is how many times the doubt of a unit for each
	// stretch the refill measured must be, for the rate to be known: a
	// first measure over a few units came out well below the rate, and
	// the bookings already queued at the configured pace, replayed at
	// it, held the next ones back (TestUpstreamMeasuredBucketFirstEstimate).
	refillPrecision = 10
	// refillReserve is how much of the bucket's span the record keeps in
	// reserve against the jitter on the way (the measured rate is a
	// lower bound): DefaultTolerance, or one unit's refill when that is
	// shorter.
	refillReserve = int64(DefaultTolerance)
)

// refillMeter measures the refill of a quota that states a bucket's size
// and what remains, but not its rate, and books it as a GCRA at the rate
// measured. The zero value measures nothing yet.
type refillMeter struct {
	admitted int64        // units the upstream admitted, as answered
	sent     int64        // the latest a request answered was sent
	begun    bool         // an answer was read: sent is set
	broken   bool         // an answer that was no reading said the bucket was full
	spans    []refillSpan // the stretches measured, oldest first; the last is open
	tat      int64        // the bucket's theoretical arrival time: full at tat − L/rate, upper bound

	// The latest anchor: the tat the answer stated, before the units in
	// flight it had not seen. anchored is set once there is one.
	stated   int64
	anchored bool
}

// refillSpan is a stretch of answers over which the bucket was never
// full: its fill grew from fill0 at from to fill1 at to.
type refillSpan struct {
	from, to     int64
	fill0, fill1 int64
	exact        bool // it starts at a bucket just full: its level was L − 1 exactly
}

// read adds the answer a, which stated remaining of limit, to the
// measure, and reports whether it is a reading: alone says that no
// request sent before a's is still unanswered, and a's request must have
// been sent after every request answered before it. Otherwise the units
// admitted so far may count a decision its remaining does not reflect,
// or miss one it does (the answers to a burst arrive in any order).
func (m *refillMeter) read(a arrival, remaining, limit int, alone bool) bool {
	if a.ok {
		m.admitted += int64(a.n)
	}
	sent := a.sent
	if sent == math.MinInt64 {
		sent = a.now
	}
	later := !m.begun || sent > m.sent
	m.sent, m.begun = max(m.sent, sent), true
	if remaining < 0 || limit < 2 {
		return false
	}
	if !alone || !later {
		// Not a reading; but a bucket that was full, whenever, ends the
		// stretch.
		m.broken = m.broken || remaining >= limit-1
		return false
	}
	fill := m.admitted + int64(remaining)
	if n := len(m.spans); n > 0 && remaining <= limit-2 && !m.broken {
		s := &m.spans[n-1]
		s.to, s.fill1 = a.now, fill
		m.prune()
		return true
	}
	// Full, or at most a unit short (it may have been full since the
	// last answer, and refill gone to waste): a new stretch starts here.
	if n := len(m.spans); n > 0 && m.spans[n-1].to == m.spans[n-1].from {
		m.spans = m.spans[:n-1] // measured nothing
	}
	m.spans = append(m.spans, refillSpan{from: a.now, to: a.now, fill0: fill, fill1: fill, exact: a.ok && remaining == limit-1})
	m.broken = false
	m.prune()
	return true
}

// prune forgets the stretches older than the newest refillKeep of
// measured time.
func (m *refillMeter) prune() {
	var kept int64
	for i := len(m.spans) - 1; i >= 0; i-- {
		if kept >= refillKeep {
			m.spans = slices.Delete(m.spans, 0, i+1)
			return
		}
		kept += m.spans[i].to - m.spans[i].from
	}
}

// rate returns the refill measured, in units per nanosecond, or 0 while
// it is not known: a lower bound. Each reading's level lies in [R, R+1),
// so a stretch's refill is at least what its fill grew less a unit, or
// less nothing when it starts at a bucket just full, admitting a unit,
// whose level is L − 1 exactly. It is known once that doubt is at most a
// [refillPrecision]th of it.
func (m *refillMeter) rate() float64 {
	var units, span, doubt float64
	for _, s := range m.spans {
		if s.to > s.from {
			units += float64(s.fill1 - s.fill0)
			if !s.exact {
				units--
				doubt++
			}
			span += float64(s.to - s.from)
		}
	}
	if span < float64(refillMinSpan) || units < refillMinUnits || units < refillPrecision*doubt {
		return 0
	}
	return units / span
}

// anchor sets the bucket's level from an answer that stated remaining of
// limit to a request sent at sent: the level is at least remaining as the
// request was sent, in the send-time frame (see statedKey.unseen), less
// the units in flight, which it has not seen: the unbooked ones, and
// those booked here, at their slots.
func (m *refillMeter) anchor(k *statedKey, unit string, sent int64, remaining, limit, unbooked int, rate float64) {
	tat := sent + refillCost(limit-remaining+unbooked, rate)
	m.stated, m.anchored = tat, true
	m.tat = k.replay(unit, tat, rate, func(*statedFlight, int64) bool { return true })
}

// spend takes off the level the latest anchor stated the n units of an
// answer that was no reading, admitted to a request sent at sent: they
// were in flight, or not yet booked, when it was stated, and now that they
// are answered the flight no longer counts them (admits replays only the
// units still in flight). Forgotten, each such unit let a check at a
// slot admit one more than the bucket held: against throttled's GCRA, a
// 429 whose Retry-After paused every caller for a second (bench
// scenario 5b, configured 25% too high: 2 429s, 1.15× the published
// run, in about one pass of three). The next reading states them itself.
func (m *refillMeter) spend(sent int64, n int, rate float64) {
	if m.anchored {
		m.stated = max(m.stated, sent) + refillCost(n, rate)
	}
}

// replay returns the bucket's tat from tat after the units of unit of
// k's bookings in flight that keep says to count, in the order they are
// due, each at its slot. keep is asked of every booking in flight, in
// the order they were made, with when it is due.
func (k *statedKey) replay(unit string, tat int64, rate float64, keep func(f *statedFlight, at int64) bool) int64 {
	type due struct {
		at int64
		n  int
	}
	var dues []due
	for i := range k.flight {
		f := &k.flight[i]
		if at := k.due(f); keep(f, at) && f.of(unit) > 0 {
			dues = append(dues, due{at, f.of(unit)})
		}
	}
	slices.SortStableFunc(dues, func(x, y due) int { return cmp.Compare(x.at, y.at) })
	for _, d := range dues {
		tat = max(tat, d.at) + refillCost(d.n, rate)
	}
	return tat
}

// admits returns the first time at or after due at which the bucket, as
// last anchored, admits the units of booking b in unit, after the units
// booked for slots before b's (or at b's slot, booked before it): a
// booking checked at its slot (see [statedBooking.Until]). It keeps no
// reserve: the reserve is for bookings, this check only for refusals.
func (m *refillMeter) admits(k *statedKey, b *statedBooking, unit string, due int64, limit int, rate float64) int64 {
	n, found := 0, false
	tat := k.replay(unit, m.stated, rate, func(f *statedFlight, at int64) bool {
		if f.b == b {
			n, found = f.of(unit), true
			return false
		}
		// At b's slot, the bookings made before it go first.
		return at < due || at == due && !found
	})
	return max(due, tat-refillCost(limit-n, rate))
}

// earliest returns the first slot at or after from at which the bucket,
// refilling at rate, admits n units and keeps refillReserve.
func (m *refillMeter) earliest(from int64, n, limit int, rate float64) int64 {
	reserve := min(refillReserve, refillCost(1, rate))
	return max(from, m.tat-refillCost(limit-n, rate)+reserve)
}

// book takes n units at slot.
func (m *refillMeter) book(slot int64, n int, rate float64) {
	m.tat = max(m.tat, slot) + refillCost(n, rate)
}

// refillCost returns the time a bucket refilling at rate (units per
// nanosecond) takes to refill n units; negative for negative n.
func refillCost(n int, rate float64) int64 {
	return int64(math.Ceil(float64(n) / rate))
}

// bucketRate returns the refill measured for q, when q is a bucket whose
// rate is not stated (resets stated as delays, no window, not a quota
// that states its refill), counted in requests; 0 otherwise or while it
// is not known.
func (q *statedQuota) bucketRate() float64 {
	if q.absolute || q.stated || q.refills || q.unit != UnitRequests || q.limit < 2 {
		return 0
	}
	return q.meter.rate()
}

// vague reports whether every reset q stated was a delay no longer than
// its precision: "within a second", as throttled's GCRA states the time
// until its bucket is full. Such a reset says nothing about when within
// that second the quota returns; holding every booking until its end, a
// second at a time, while the refill is not yet measured, booked the
// configured limiter a second ahead and released a herd there (bench
// scenario 5b, configured 25% too high). The configured limiter paces
// instead, until the refill is measured.
func (q *statedQuota) vague() bool {
	return !q.absolute && !q.stated && q.precision > 0 && q.longest <= q.precision
}
