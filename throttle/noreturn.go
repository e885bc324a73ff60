package throttle

import "math"

// A quota whose resets are vague delays ("within a second", see vague)
// may be a bucket that refills all along or a window that returns only
// at its reset: its statements alone cannot tell. A window of a second
// whose end is stated rounded up (IETF RateLimit "default";r=R;t=1 with
// no RateLimit-Policy) states t=1 on every answer, so its resets tell one
// window from the next no better than a bucket's; and the first answer
// from a new window, within a second of the old reset, says more is left
// than the answer before: the record took it for a bucket refilling
// (sliding), paced the units it seemed to refill into the rest of the old
// window, and met a 429 a window, whose Retry-After paused every caller
// for a second (TestRetryOnlyIETFWithoutPolicy, "fixed 48/s, t rounded
// up": 8-22 429s of 600).
//
// A bucket's statement bounds its refill from below: "R left of L, full
// within t" needs at least L − R − 1 units (what remains is rounded down
// by up to a unit) within t plus the reset's precision (a reset cut down
// is early by up to it). Its refill is one constant rate, so the highest
// such bound stated over a stretch of the refill meter's readings (in
// which the bucket was never full, refill.go) bounds the growth of the
// fill over the whole stretch. A quota whose fill falls short of it by
// [refillMinUnits] or more (the rounding of remaining is worth a unit
// each end) does not refill: it is a window, and returns only at its
// reset (noRefill, as a refused probe says): nothing is paced as refill
// before it, and a higher remaining within a window answers a request
// handled earlier (record). At the reset one unit goes alone, and its
// answer says what came back (statedQuota.available): a quota that falls
// short for another reason, a leaky bucket stating the time until one
// more fits as its reset, is not sent its whole limit there.
//
// A bucket refills at least as fast as its statements say, and never
// trips this check; and once the meter has measured its refill the check
// no longer runs: so a measured bucket's path (throttled's GCRA, 5b) is
// not changed by it.
//
// A reading's fill is off by the answers read out of the upstream's
// order: the meter reads an answer once every request sent before it is
// answered, but the upstream may have handled a later-sent request
// first, or an earlier-sent one last. throttled's GCRA, burst 9 at 48/s
// (bench 5b, WithRetry alone), sent the 8 its first answer left at once;
// when the second sent was handled last, its "0 left", read with 3
// answered, was a fill of 3 where the first answer's was 9 a millisecond
// before, a shortfall of 6: marked as returning only at its reset, it
// was sent 9 a second for 46 s, one pass in three
// (TestUpstreamAloneBurstAnsweredOutOfOrderIsNoWindow).
// So a fill that fell counts as no growth: the shortfall must come from
// the stretch's time, the claimed refill over it reaching refillMinUnits
// units. For throttled's burst of 9, claiming at most 8 units within the
// reset (a second at least) plus its precision (a second), that takes a
// stretch of a second or more, over which the bucket refills 48 units:
// far more than the units in flight can put out of order (about its
// burst on this path), so it is never marked.

// refillFloor is the least refill a quota's statements claimed over
// the refill meter's current stretch.
type refillFloor struct {
	from int64   // the stretch it belongs to (refillSpan.from)
	rate float64 // units per nanosecond, the highest claimed in it
}

// checkRefill reads the statement "remaining left, full within reset"
// of q, stated at precision, after the refill meter took it as a
// reading (read): when the fill measured over the meter's current
// stretch fell [refillMinUnits] short of the refill claimed in it, q is
// marked as returning only at its reset. It applies only to a quota the
// record cannot pace otherwise (unknownBucket).
func (q *statedQuota) checkRefill(read bool, remaining int, reset, precision int64) {
	n := len(q.meter.spans)
	if !read || n == 0 || q.noRefill || !q.unknownBucket() {
		return
	}
	s := q.meter.spans[n-1]
	f := &q.floor
	if f.from != s.from {
		*f = refillFloor{from: s.from}
	}
	if need := q.limit - remaining - 1; need > 0 {
		f.rate = math.Max(f.rate, float64(need)/float64(reset+precision))
	}
	// A fill that fell within the stretch says nothing of time: the
	// answers to a burst, handled in one order and read in another, do
	// (see below). Only the refill the stated rate claims over the
	// stretch's time can fall short.
	if f.rate*float64(s.to-s.from)-float64(max(s.fill1-s.fill0, 0)) >= refillMinUnits {
		q.noRefill, q.sliding = true, false
	}
}
