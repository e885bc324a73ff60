package throttle

import (
	"math"
	"time"
)

// A record that nothing else paces. With egress.WithRetry alone, or
// WithUpstream and no limiter, the record is the key's only limiter: what
// a configured limiter would do for a quota the record cannot pace (a
// bucket that states its size and what remains, but neither its rate
// nor a window, and a reset only "within a second"), the record does
// itself.
//
// Such a reset (throttled/throttled's GCRA rounds the time until its
// bucket is full up to a second; a fixed window of a second or less
// states its end to the second) says only that what remains comes back
// by then. The record books what the latest statement left at once, and
// holds the rest (nothing booked: callers come back, see [Hold]) until
// the quota is full again at the stated reset. A fixed window returns
// nothing before its reset; a bucket refills all along, which one probe
// per statement tells: once what remains is exhausted, one unit goes
// most of the way to the reset, and a bucket answers it with more left than the
// statement said. From then on the units the bucket has refilled at the
// least (what it lacked when it spoke, evenly over the reset's delay,
// which is rounded up) are booked as they come, and single units sent
// so are the readings the refill meter (refill.go) measures the true
// rate with, after which the meter books. A fixed window answers the
// probe with a refusal, whose delay pauses the key as any refusal does,
// and is not probed again; one whose probe landed in the next window
// shows itself later, refilling less than its statements claim
// (noreturn.go).
//
// Holding rather than booking keeps 32 callers from queueing at a pace
// guessed low: each comes back when the quota can have refilled, and
// books what the latest statement says is there (bench scenario 5b,
// "egress (WithRetry only)": with nothing pacing the key, every herd met
// 429s whose Retry-After of a second paused all callers, and a third of
// the requests failed after their retries).
//
// With another limiter beside the record (All, ReserveUnits), that
// limiter paces the key, and the record leaves the bucket to it.
//
// With [WithFirstAnswer], nor is a key that nobody has heard from yet
// booked all at once: its first booking goes, and the others are held
// until its answer (or for at most the option's wait), so that 32
// callers do not meet an upstream whose quota nobody knows yet in one
// herd (bench 5b, WithRetry only: 23 of the first 32 were refused). A
// limiter beside the record paces that herd itself.

// firstAnswerOption carries [WithFirstAnswer].
type firstAnswerOption time.Duration

func (firstAnswerOption) apply(*config) {}

// WithFirstAnswer makes an [Upstream] booked alone (Reserve and
// ReserveAfter, as an egress Transport with WithRetry and no limiter
// books it) hold the bookings of a key that nobody has answered yet, with
// nothing booked ([Hold]), until the answer to the key's first booking
// arrives, for at most d: the first request finds out what the upstream
// states before a herd of callers meets it. 0, the default, holds
// nothing. egress.WithRetry with no limiter builds its record with
// [DefaultFirstAnswer]. Other limiters ignore it.
func WithFirstAnswer(d time.Duration) Option { return firstAnswerOption(d) }

// DefaultFirstAnswer is the wait for a key's first answer that an egress
// Transport with WithRetry and no limiter gives its record
// ([WithFirstAnswer]): a few round trips to a nearby API.
const DefaultFirstAnswer = 50 * time.Millisecond

// firstAnswer returns how long a booking on k must wait, with nothing
// booked, for the answer to k's first booking, waiting at most wait in
// all; 0 when it may book: k has been answered, the wait is over, or this
// booking is the first.
func (k *statedKey) firstAnswer(now, wait int64) time.Duration {
	switch {
	case k.answeredOnce:
		return 0
	case !k.firstBooked:
		k.firstAt, k.firstBooked = now, true
		return 0
	}
	end := k.firstAt + wait
	if now >= end {
		return 0
	}
	return time.Duration(min(end-now, int64(minHoldStep)))
}

// unknownBucket reports whether q is a quota in requests whose resets
// are vague delays (see vague), whose refill is not yet measured: the
// record cannot pace it from what it states.
func (q *statedQuota) unknownBucket() bool {
	return !q.absolute && !q.stated && !q.refills && q.unit == UnitRequests &&
		q.limit >= 2 && q.raw >= 0 && q.vague() && q.meter.rate() == 0
}

// available returns how many units q admits at, by the latest
// statement, with inflight units in flight now: once its reset has
// passed, the limit less what was admitted since and what is in flight;
// before that, what the statement left, and once the quota is seen to
// refill, what it lacked evenly over the reset's delay. (What it left
// counts the requests in flight then, refused ones too; at the reset
// only those still in flight count, so that a herd of refusals never
// holds the key for good.)
func (q *statedQuota) available(at int64, inflight int) int {
	lacked := q.limit - q.raw
	switch {
	case at >= q.fullAt() && q.noRefill:
		// Returned at its reset, if it is the window it seems (see
		// noreturn.go): one unit goes alone, and its answer says what
		// came back. A leaky bucket of 40 leaking 2/s, stating the time
		// until one more fits as its reset, falls short of the refill a
		// reset "to full" claims too; sent the whole limit at that
		// reset, it refused most of it, and their Retry-After paused the
		// key until 227 of 300 requests failed.
		if inflight == 0 {
			return 1
		}
		return 0
	case at >= q.fullAt():
		if inflight == 0 {
			// Nothing on its way can bring a new statement: at least one
			// unit goes, whatever answers at one instant made of spent.
			return max(q.limit-q.spent, 1)
		}
		return q.limit - q.spent - inflight
	case q.sliding && lacked > 0 && at > q.heardAt:
		return q.left + int(float64(at-q.heardAt)*float64(lacked)/float64(q.fullIn))
	}
	return q.left
}

// fullAt returns when q is full again, by its latest statement; for a
// quota known to return only at its reset (a probe was refused), the
// earliest reset stated for the window, each being late by up to its
// precision.
func (q *statedQuota) fullAt() int64 {
	full := q.heardAt + q.fullIn
	if q.noRefill {
		full = min(full, max(q.reset, q.heardAt))
	}
	return full
}

// mayProbe reports whether a unit at from may be q's probe: q is not yet
// seen to refill before its reset, nor known not to, no probe is out,
// and from is most of the way to the reset (probeAfter).
func (q *statedQuota) mayProbe(from int64) bool {
	return !q.sliding && !q.noRefill && q.probeAt == math.MinInt64 &&
		from >= q.probeAfter() && from < min(q.reset, q.fullAt())
}

// probeAfter returns when q's probe may go: most of the way from the
// latest statement to the earliest reset stated for the window. A probe
// answered after that reset says nothing (the next window is full too);
// one before the end of a window whose end is stated to the second, and
// which ends anywhere in that second, is refused. The later the probe,
// the fewer windows it meets; a bucket is found out once per key.
func (q *statedQuota) probeAfter() int64 {
	end := min(q.reset, q.fullAt())
	return q.heardAt + max(end-q.heardAt, 0)*9/10
}

// waitUnpaced returns how long a booking of n units of q at from must
// wait, with nothing booked, before it may book; 0 when it may book now
// (as what is available, or as the probe) or q is not an unknown bucket.
func (q *statedQuota) waitUnpaced(now, from int64, n, inflight int) int64 {
	if n <= 0 || from >= q.expires || !q.unknownBucket() || q.available(from, inflight) >= n || q.mayProbe(from) {
		return 0
	}
	next := q.fullAt()
	switch lacked := q.limit - q.raw; {
	case q.sliding && lacked > 0:
		need := n - q.left // units that must come back
		next = min(next, q.heardAt+int64(math.Ceil(float64(need)*float64(q.fullIn)/float64(lacked))))
	case !q.noRefill && q.probeAt == math.MinInt64:
		next = min(next, q.probeAfter())
	}
	// Units in flight beyond what the quota holds when full wait for
	// their answers: come back after a fraction of an answer's latency.
	return max(next-now, q.holdStep(), from-now)
}

// bookUnpaced takes n units of q at slot, which waitUnpaced allowed,
// with inflight units in flight before it.
func (q *statedQuota) bookUnpaced(slot int64, n, inflight int) {
	if q.available(slot, inflight) < n {
		q.probeAt = slot // allowed as the probe
	}
	q.left -= n
}

// answerProbe notes the answer a: one to a request sent at or after the
// probe ends it, and a refusal while the quota is not seen to refill
// says that it returns at its reset only.
func (q *statedQuota) answerProbe(a arrival) {
	if q.probeAt == math.MinInt64 || (a.sent != math.MinInt64 && a.sent < q.probeAt) {
		return
	}
	if !a.ok && !q.sliding {
		q.noRefill = true
	}
	q.probeAt = math.MinInt64
}

// pace returns the interval between q's units after its reset: spacing,
// or, when nothing else paces the key (paced false) and q's resets are
// delays with no window stated, the limit per the longest reset seen
// (rounded up to its precision): a window's length, or at least the time
// a bucket takes to refill its limit.
func (q *statedQuota) pace(paced bool) int64 {
	if q.brief && paced {
		return 0 // a bucket's refill per window: the limiter pacing the key knows its rate (burstOnly)
	}
	sp := q.spacing()
	if sp > 0 || paced || q.absolute || q.stated || q.limit <= 0 {
		return sp
	}
	return int64(math.Ceil(float64(q.guessWindow()) / float64(q.limit)))
}

// waitUnpaced returns how long f's booking at from must wait on k, with
// nothing booked, when nothing else paces k (see statedQuota.waitUnpaced);
// unbooked requests are in flight beside k's bookings.
func (k *statedKey) waitUnpaced(now, from int64, f *statedFlight, unbooked int) int64 {
	var d int64
	for i := range k.quotas {
		q := &k.quotas[i]
		d = max(d, q.waitUnpaced(now, from, f.of(q.unit), k.inFlightNow(q.unit, unbooked)))
	}
	return d
}

// inFlightNow returns the units of unit in flight now: booked here and
// not yet answered, and, in requests, sent unbooked.
func (k *statedKey) inFlightNow(unit string, unbooked int) int {
	return k.before(unit, math.MaxInt64) + unbookedOf(unit, unbooked)
}
