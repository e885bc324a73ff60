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
// or below L − 2 therefore measures the refill exactly, up to the
// rounding of remaining (a unit at each end), however slowly the client
// sent, and whatever pause lay within it: a pause fills the bucket, which
// ends the stretch. The rate is the growth of the fill over the measured
// stretches of the last [refillKeep] of measured time, less one unit: a
// lower bound, up to the answers' ordering.
//
// Once measured, the quota is booked as a GCRA at that rate: each answer
// anchors the bucket's level at what it states (the level is at least R),
// less the units booked since the upstream spoke; units are booked at the
// rate from there, keeping [refillReserve] units of the bucket in
// reserve. Since every answer anchors it again, a rate measured low
// costs no more than the units the bucket is short of full; what remains
// steers the pace.

const (
	// refillKeep is how much measured time the rate is pooled over.
	refillKeep = int64(3 * time.Second)
	// refillMinSpan is the measured time below which the rate is not
	// known: the configured limiter paces until then.
	refillMinSpan = int64(100 * time.Millisecond)
	// refillReserve is how many units of the bucket the record keeps in
	// reserve against a rate measured a little high and the jitter on
	// the way.
	refillReserve = 1
)

// refillMeter measures the refill of a quota that states a bucket's size
// and what remains, but not its rate, and books it as a GCRA at the rate
// measured. The zero value measures nothing yet.
type refillMeter struct {
	admitted int64        // units the upstream admitted, as answered
	sent     int64        // when the request of the latest reading was sent
	spans    []refillSpan // the stretches measured, oldest first; the last is open
	tat      int64        // the bucket's theoretical arrival time: full at tat − L/rate, upper bound
}

// refillSpan is a stretch of answers over which the bucket was never
// full: its fill grew from fill0 at from to fill1 at to.
type refillSpan struct {
	from, to     int64
	fill0, fill1 int64
}

// read adds the answer a, which stated remaining of limit, to the
// measure, and reports whether it is the latest reading (not an older
// request's answer that arrived late).
func (m *refillMeter) read(a arrival, remaining, limit int) bool {
	if a.ok {
		m.admitted += int64(a.n)
	}
	if remaining < 0 || limit < 2 || (a.sent != math.MinInt64 && a.sent < m.sent) {
		return false
	}
	m.sent = max(m.sent, a.sent)
	fill := m.admitted + int64(remaining)
	if n := len(m.spans); n > 0 && remaining <= limit-2 {
		s := &m.spans[n-1]
		s.to, s.fill1 = a.now, fill
		return true
	}
	// Full, or at most a unit short (it may have been full since the
	// last answer, and refill gone to waste): a new stretch starts here.
	if n := len(m.spans); n > 0 && m.spans[n-1].to == m.spans[n-1].from {
		m.spans = m.spans[:n-1] // measured nothing
	}
	m.spans = append(m.spans, refillSpan{from: a.now, to: a.now, fill0: fill, fill1: fill})
	var kept int64
	for i := len(m.spans) - 1; i >= 0; i-- {
		if kept >= refillKeep {
			m.spans = slices.Delete(m.spans, 0, i+1)
			break
		}
		kept += m.spans[i].to - m.spans[i].from
	}
	return true
}

// rate returns the refill measured, in units per nanosecond, or 0 while
// it is not known.
func (m *refillMeter) rate() float64 {
	var units, span int64
	for _, s := range m.spans {
		units += s.fill1 - s.fill0
		span += s.to - s.from
	}
	if span < refillMinSpan || units <= 1 {
		return 0
	}
	return float64(units-1) / float64(span)
}

// anchor sets the bucket's level from an answer that arrived at now and
// stated remaining of limit, spoken at spoke: the level is at least
// remaining, less the units booked since spoke (in flights, booked at
// their slots) and unbooked units in flight, which it has not seen.
func (m *refillMeter) anchor(k *statedKey, unit string, now, spoke int64, remaining, limit, unbooked int, rate float64) {
	tat := now + refillCost(limit-remaining+unbooked, rate)
	var slots []statedFlight
	for _, f := range k.flight {
		if s := f.slot + k.shift - f.b.seen; s >= spoke && f.of(unit) > 0 {
			f.slot = s
			slots = append(slots, f)
		}
	}
	slices.SortFunc(slots, func(x, y statedFlight) int { return cmp.Compare(x.slot, y.slot) })
	for _, f := range slots {
		tat = max(tat, f.slot) + refillCost(f.of(unit), rate)
	}
	m.tat = tat
}

// earliest returns the first slot at or after from at which the bucket,
// refilling at rate, admits n units and keeps refillReserve.
func (m *refillMeter) earliest(from int64, n, limit int, rate float64) int64 {
	return max(from, m.tat-refillCost(limit-n-refillReserve, rate))
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
