package throttle

import (
	"math"
	"time"
)

// This file learns where a window truly ends when the upstream states its
// reset as an instant cut to a coarse precision: an epoch second
// (go-chi/httprate, GitHub) or an HTTP-date (sethvargo/go-limiter). The
// stated reset S says the window ends at or after S and before S plus the
// precision, a second early at worst. Released at S, requests meet a
// window that has not yet ended; released at S plus the precision, up to
// a second of every window is lost. The answers narrow it down:
//
//   - an answer stating S was handled before the window ended, and after
//     its request was sent: the end is after that send;
//   - an answer stating S was handled after the window before S ended,
//     which was one window W earlier, and before it arrived: the end is at
//     or before its arrival plus W; and the first answer from a new window
//     says the window stated until then had ended when it arrived.
//
// The window's end less S (its phase) is the same for every window when
// windows are whole multiples of the precision, so the bounds carry from
// one window to the next. Some limiters (ulule/limiter) start a window
// at the first request after the last one ended instead, so its phase
// moves with that request: a request sent after the carried end and
// still counted in the old window tells so, and from then on each
// window's end is taken as its first answer's arrival plus W, at the
// latest. When what is left runs out before the bound's far end, one
// request per window is let through at the middle of the bounds, a
// probe: answered in the new window, it lowers the far end; refused in
// the old, it raises the near one. Each probe halves the doubt, until it
// is below [probeGap].

// minPhased is the coarsest precision for which learning the end pays: a
// finer one costs less than the learning would.
const minPhased = 10 * time.Millisecond

// phased returns the name of the window s states (its ResetAt less its
// Precision: the reset as stated, on the record's clock) and the
// precision, when s is a statement whose end is worth learning: an
// absolute reset stated to minPhased or coarser, within the max hold.
func phased(s Statement, a arrival, maxHold int64) (stamp, p int64, ok bool) {
	if !s.Absolute || s.ResetAt.IsZero() || s.Precision < minPhased || a.wall.IsZero() {
		return 0, 0, false
	}
	d := s.ResetAt.Sub(a.wall)
	if int64(d) > maxHold || d < -time.Minute {
		return 0, 0, false // absurd, or far off: the clamped Reset decides
	}
	p = int64(s.Precision)
	return a.now + int64(d) - p, p, true
}

// recordPhased merges s, which states the window stamp of precision p,
// into q. The reset it books to is stamp + q.hi: the latest the window can
// end, as far as the answers tell.
func (k *statedKey) recordPhased(q *statedQuota, s Statement, a arrival, stamp, p, maxHold int64) bool {
	fresh := q.stamp == math.MinInt64 || stamp >= q.stamp+p/2
	if !fresh && stamp <= q.stamp-p/2 {
		return true // stale: a window that has already ended
	}
	prev := int64(math.MinInt64)
	if fresh {
		gap := int64(0)
		if q.stamp != math.MinInt64 {
			// Stamps are cut to p on the server's clock: their gaps are
			// whole multiples of it, less the jitter of the clocks.
			gap = max((stamp-q.stamp+p/2)/p*p, p)
			if !q.stated && (q.window == 0 || gap < q.window) {
				q.window = min(gap, maxHold) // no more than a stated one (Clamp)
			}
			prev = q.stamp
			if next := gap-q.window < p/2; next && s.Remaining >= 0 && q.raw >= 0 && q.limit > 0 {
				switch {
				case s.Remaining-q.raw >= q.limit/2:
					// It came back at the boundary: a fixed window; but
					// only across a short silence tells: a sliding
					// counter's count decays by the part of a window that
					// passed, and after a 1 s pause (a 429's Retry-After)
					// 5d's came back as much and was told fixed. Across a
					// short silence a counter or a log never comes back
					// so (what it counts moves on with the clock), so a
					// window told sliding by an answer that seemed to
					// grow (merge: one learned late, on a busy machine)
					// is told fixed again: left sliding, a fixed window
					// was paced over every window to the end. Paced so,
					// its answers leave no silence at the boundary, so
					// the next one tells it. Not a bucket (bucketlike.go):
					// its remaining grows, and comes back at the instants
					// it states too.
					if a.now-q.heardAt <= q.window/4 {
						q.fixed = true
						q.sliding = q.sliding && q.bucketLike()
					}
				case q.raw+q.limit/2 < q.limit && !q.fixed:
					// A window well used did not come back: a sliding
					// counter. Only where a fixed window's would have
					// come back by the half above, past what this answer
					// took: at 24 left of 48, a fixed window's new 47 is
					// 23 up, and 5e's was told sliding (87 429s).
					q.sliding = true
				}
			}
		}
		if q.stamp == math.MinInt64 || q.precision != p {
			q.lo, q.hi = 0, p
		}
		q.others.roll(q.window > 0 && gap-q.window < p/2)
		q.stamp, q.opened = stamp, a.now
		q.whole = false
		q.windows++
	}
	q.bound(a, stamp, prev, p)
	// Any answer of the window tells it came back: they come in any order.
	q.whole = q.whole || (q.limit > 0 && s.Remaining >= q.limit/2)
	q.precision = p // before observe: it rounds the first window up to it
	reset := stamp + q.hi
	q.others.observe(q, s, a, k.pending(q.unit, a.now, a))
	q.shared = q.shared || q.others.rate > 0 || q.others.guess > 0
	leftOf := func(raw int) int {
		if raw < 0 {
			return math.MaxInt
		}
		if q.limit > 0 {
			raw = min(raw, q.limit) // stated with no limit, or above it: the stricter (found by FuzzUpstream)
		}
		return raw - k.inFlight(q.unit, reset, a) - q.others.until(reset-a.now)
	}
	left := leftOf(s.Remaining)
	if fresh {
		q.reset, q.left, q.precision, q.sent, q.raw, q.heardAt = reset, left, p, a.sent, s.Remaining, a.now
		q.holding = math.MinInt64
	} else {
		q.merge(s.Remaining, a, leftOf)
		if q.tat == q.reset {
			q.tat = reset
		}
		q.reset = reset
	}
	k.noteStated(q, a)
	if !q.sliding {
		q.tat = max(q.tat, stamp+q.lo) // paced from the earliest the window can end (see unsure)
	}
	if q.sliding || q.untold() {
		k.repace(q, a.now)
	}
	if !q.sliding && (q.fixed || q.window == 0) {
		k.shed(q, a.now)
	}
	q.expires = a.now + maxHold
	return true
}

// unsure reports whether a unit sent at slot, before q's reset, may be
// counted in the window after it: slot is past the earliest the window
// can end. Such a unit takes from what is left and from the pace after
// the reset, so that it fits whichever window it lands in. Taken from
// what was left alone, a first window's units that the configured
// limiter held past its true end met a sliding counter's next window in a
// herd (5a: 6 429s and a 1 s pause).
func (q *statedQuota) unsure(slot int64) bool {
	return q.stamp != math.MinInt64 && slot >= q.stamp+q.lo && q.spacing() > 0
}

// bound narrows q's bounds on where the window stamp ends with the answer
// a, stated for it; prev is the window stated before, when a is the first
// answer from a new one, or MinInt64. Bounds that contradict each other
// (a server that rounds instead of truncating, a window that is no
// multiple of the precision) start over from what the answer alone says.
func (q *statedQuota) bound(a arrival, stamp, prev, p int64) {
	lo, hi := q.lo, q.hi
	if a.sent != math.MinInt64 {
		lo = max(lo, a.sent-stamp)
	}
	switch {
	case q.window > 0:
		hi = min(hi, a.now-stamp+q.window)
	case stamp > a.now && q.longest <= 2*p:
		// No window learned yet, and none stated longer than about the
		// precision: take it to be the time the answer states is left,
		// rounded up to the precision (a 1 s window stated to the
		// second: a second). A longer window answered late in its life
		// would make this early; the answers that contradict it start
		// the bounds over. A window stated longer (GitHub's hour) keeps
		// the latest end, which costs it at most a precision once.
		// Holding a 1 s window to its latest end cost 5c up to a second
		// in its first window.
		hi = min(hi, a.now-stamp+(stamp-a.now+p-1)/p*p)
	}
	// A window that starts at a request (ulule/limiter's) started at the
	// latest when its first answer arrived, and ends W after that.
	opened := q.opened - stamp + q.window
	if prev != math.MinInt64 {
		hi = min(hi, a.now-prev)
		if q.onDemand {
			hi = min(max(hi, opened), p) // whatever the phase carried says
		}
	}
	if lo >= hi {
		// A request sent after the end the phase carried from the
		// windows before says, and counted in this window: the phase
		// moved. Windows that start at the first request after the last
		// ended move so; from now on each one's end is taken from its
		// first answer (above).
		q.onDemand = q.onDemand || (prev == math.MinInt64 && a.sent != math.MinInt64 && a.sent-stamp >= q.hi && q.window > 0)
		lo, hi = 0, p
		if a.sent != math.MinInt64 {
			lo = min(max(a.sent-stamp, 0), p-1)
		}
		if q.onDemand && opened > lo && opened < hi {
			hi = opened
		}
	}
	q.lo, q.hi = lo, hi
}

// probeGap returns the doubt about q's window end below which no probe is
// sent: a twentieth of the window (of the precision until the window is
// known), and at least 5 ms. A probe that meets the old window costs one
// refusal; doubt costs up to its length of every window.
func (q *statedQuota) probeGap() int64 {
	w := q.window
	if w <= 0 {
		w = q.precision
	}
	return max(w/20, int64(5*time.Millisecond))
}

// A phased quota is told fixed or sliding at its boundaries: what is left
// comes back at a fixed window's boundary, and does not at a sliding
// counter's, whose count of the window before carries over. A remaining
// that grows within a window, for a request sent after the answer that
// set it arrived, also marks it sliding (see merge).

// probe returns the slot at or after from for this window's probe, when
// q holds nothing more before its reset and one is due: q is a fixed
// window (what is left came back at a boundary: a probe into a sliding
// counter's next window would meet the previous window's count), its end
// is known to within more than probeGap, and no probe was booked in this
// window. Windows that start at a request (onDemand) are not probed: each
// one's end is its opener's, and a probe before it meets a refusal.
func (q *statedQuota) probe(from int64) (int64, bool) {
	if q.stamp == math.MinInt64 || !q.fixed || q.sliding || q.onDemand || q.probed == q.stamp || q.hi-q.lo <= q.probeGap() {
		return 0, false
	}
	slot := max(from, q.stamp+q.lo+(q.hi-q.lo)/2)
	return slot, slot < q.reset
}

// merge takes raw, the remaining of a statement of the window q holds,
// arrived as a says; leftOf turns a remaining into what may still be
// booked, less what is in flight now. An answer to a request sent after
// the answer that set q's figures arrived saw everything that one saw,
// so it wins, and a remaining that grew marks a sliding window (a fixed
// window's never grows). Answers to requests in flight together may have
// been handled in either order: the lower remaining wins, less what is
// in flight now. (The lowest of what each left at its arrival would
// count twice a request handled before the lowest statement but
// answered after it: with 31 requests in flight unbooked at the start,
// 5a lost a third of its first window so.)
//
// A window told fixed never grows, so there a higher remaining always
// answers an earlier request, and the lower wins: the record dates an
// answer when Learn runs, which a busy machine may delay past a later
// answer's, so that its request seems sent after that one arrived. On
// 5e (go-limiter with another client) such an answer, 2 ms late, marked
// a fixed window sliding in 2 of 12 passes: paced into the last 100 ms
// of every window from then on, 45-50 requests met 429s.
func (q *statedQuota) merge(raw int, a arrival, leftOf func(int) int) {
	grew := raw > q.raw && q.raw >= 0
	if a.sent != math.MinInt64 && a.sent >= q.sent && a.sent >= q.heardAt && !(grew && q.fixed) {
		if grew {
			q.sliding = true
		}
		q.left, q.sent, q.raw, q.heardAt = leftOf(raw), a.sent, raw, a.now
		return
	}
	if raw >= 0 && (q.raw < 0 || raw < q.raw) {
		q.raw = raw
	}
	q.left = leftOf(q.raw)
	if a.sent != math.MinInt64 {
		q.sent = max(q.sent, a.sent)
	}
	q.heardAt = max(q.heardAt, a.now)
}
