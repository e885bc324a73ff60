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
// one window to the next. When what is left runs out before the bound's
// far end, one request per window is let through at the middle of the
// bounds, a probe: answered in the new window, it lowers the far end;
// refused in the old, it raises the near one. Each probe halves the doubt,
// until it is below [probeGap].

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
				q.window = gap
			}
			prev = q.stamp
			if next := gap-q.window < p/2; next && s.Remaining >= 0 && q.raw >= 0 && q.limit > 0 {
				switch {
				case s.Remaining-q.raw >= q.limit/2:
					// It came back at the boundary: a fixed window; but
					// only across a short silence tells: a sliding
					// counter's count decays by the part of a window that
					// passed, and after a 1 s pause (a 429's Retry-After)
					// 5d's came back as much and was told fixed.
					q.fixed = q.fixed || a.now-q.heardAt <= q.window/4 || q.filled(s.Remaining)
				case q.raw <= q.limit/2 && !q.fixed:
					q.sliding = true // a window well used did not come back: a sliding counter
				}
			}
		}
		if q.stamp == math.MinInt64 || q.precision != p {
			q.lo, q.hi = 0, p
		}
		q.others.roll(q.window > 0 && gap-q.window < p/2)
		q.stamp = stamp
	}
	q.bound(a, stamp, prev, p)
	q.precision = p // before observe: it rounds the first window up to it
	reset := stamp + q.hi
	q.others.observe(q, s, a, k.pending(q.unit, a.now, a))
	count := q.count
	if fresh {
		// What the window's first answer says was spent before it is
		// others' at most; with nobody else seen spending, of this
		// client's units in flight (a burst's, answered in any order)
		// as many as it can be, the rest others'.
		others := max(q.limit-s.Remaining-a.n, 0)
		exact := q.fixed && !q.sliding && q.others.perNs() == 0
		if exact {
			others = max(others-k.inFlight(q.unit, reset, a), 0)
		}
		count = windowCount{others: others, at: a.now, exact: exact}
	}
	leftOf := func(raw int) int {
		if raw < 0 {
			return math.MaxInt
		}
		return raw - q.unseen(raw, k.inFlight(q.unit, reset, a), count, a) - q.others.until(reset-a.now)
	}
	left := leftOf(s.Remaining)
	if fresh {
		q.reset, q.left, q.precision, q.sent, q.raw, q.heardAt, q.count = reset, left, p, a.sent, s.Remaining, a.now, count
	} else {
		q.merge(s.Remaining, a, leftOf)
		if q.tat == q.reset {
			q.tat = reset
		}
		q.reset = reset
	}
	if a.ok {
		q.count.ours += a.n
	}
	if q.hold.n > 0 && q.hold.stamp != q.stamp {
		k.unhold(q, a.now) // the first answer from the window after the held units' reset
	}
	if !q.sliding {
		q.tat = max(q.tat, stamp+q.lo) // paced from the earliest the window can end (see unsure)
	}
	if q.sliding || q.untold() {
		k.repace(q, a.now)
	} else {
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
	if prev != math.MinInt64 {
		hi = min(hi, a.now-prev)
	}
	if lo >= hi {
		lo, hi = 0, p
		if a.sent != math.MinInt64 {
			lo = min(max(a.sent-stamp, 0), p-1)
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
// window.
func (q *statedQuota) probe(from int64) (int64, bool) {
	if q.stamp == math.MinInt64 || !q.fixed || q.sliding || q.probed == q.stamp || q.hi-q.lo <= q.probeGap() {
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
func (q *statedQuota) merge(raw int, a arrival, leftOf func(int) int) {
	if a.sent != math.MinInt64 && a.sent >= q.sent && a.sent >= q.heardAt {
		if q.raw >= 0 && raw > q.raw && (!q.fixed || raw-q.raw >= 2 && a.sent-q.sent >= q.window/8) {
			// Told fixed at a boundary, more left is answers to
			// requests sent together, handled out of order (5c: such
			// answers, up to 30 apart under load, paced the rest of
			// the job); a sliding counter's decay shows between
			// requests sent an eighth of a window apart or more.
			q.sliding = true
		}
		if q.fixed && !q.sliding && q.raw >= 0 {
			raw = min(raw, q.raw) // a fixed window's remaining never grows
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

// An untold quota (a phased one not yet told fixed or sliding) is paced
// after its reset, since a sliding counter's window does not come back
// at its boundary. Paced so, the units booked for the window after the
// first boundary are booked at that pace on the configured limiter too
// (All books one common slot), and a configured sliding log repeats the
// pace in every later window, even once the quota is told fixed (5c:
// 1.05-1.08x the minimum, the last partial window paced over 0.5 s).
// So units booked past an untold window's reset are held at the reset
// instead: the first of them to come due goes alone, a probe, and the
// rest wait for the first answer from the new window (polled every
// holdPoll, for at most probeGap). Told fixed, they go at once; else
// they are paced from the probe, as before.

// holdPoll is how often a unit held for a probe's answer looks again.
const holdPoll = time.Millisecond

// heldUnits is what a quota holds past an untold window's reset.
type heldUnits struct {
	stamp      int64 // the window whose reset they wait past
	n          int   // units booked held, the probe's included, some maybe since cancelled
	probe      int64 // when the probe went, or 0
	tat0, tat1 int64 // q.tat before the first held unit, and after the last
}

// holds reports whether units past q's reset are held for its probe: q
// is untold and paced. However many are held, what is left in the new
// window bounds how many go at once (see unhold). (A cap on the units
// held counted units that All booked, cancelled and booked again.)
func (q *statedQuota) holds() bool {
	return q.untold() && q.limit > 0 && q.spacing() > 0 && (q.hold.n == 0 || q.hold.stamp == q.stamp)
}

// holdUnits books n units held at the reset: they take the pace after
// it as well, for when the new window is not told fixed.
func (q *statedQuota) holdUnits(p *statedPart, n int) {
	if q.hold.n == 0 {
		q.hold = heldUnits{stamp: q.stamp, tat0: q.tat}
	}
	p.tatBefore = q.tat
	q.tat = max(q.tat, q.reset) + int64(n)*q.spacing()
	p.tatAfter, q.hold.tat1 = q.tat, q.tat
	q.hold.n += n
	p.held = true
}

// held returns when booking b, due at now, may go: now, unless a part of
// it is held for a probe's answer that has not come yet. The first held
// unit to come due is the probe. Without an answer in probeGap, the held
// units are paced as an untold quota's are.
func (k *statedKey) held(b *statedBooking, now int64) int64 {
	for i := range k.quotas {
		q := &k.quotas[i]
		j := b.part(q.name)
		if j < 0 || !b.parts[j].held {
			continue
		}
		p := &b.parts[j]
		switch {
		case q.hold.n == 0 || q.hold.stamp != q.stamp:
			p.held = false // released
		case q.hold.probe == 0:
			q.hold.probe, p.held = now, false
		case now-q.hold.probe < q.probeGap():
			return now + int64(holdPoll)
		default:
			k.unhold(q, now)
			p.held = false
		}
	}
	return b.slot + k.shift - b.seen
}

// unhold releases what q holds, at now: at once when q was told fixed
// (as many as what is left allows: the rest at the next reset), and
// otherwise paced from the probe.
func (k *statedKey) unhold(q *statedQuota, now int64) {
	h := q.hold
	q.hold = heldUnits{}
	if h.n == 0 {
		return
	}
	sp := q.spacing()
	fixed := q.fixed && !q.sliding
	if fixed && q.tat == h.tat1 {
		q.tat = h.tat0 // what is left counts them
	}
	next := now
	if h.probe != 0 {
		next = max(next, h.probe+sp)
	}
	for i := len(k.flight) - 1; fixed && i >= 0 && q.left < 0; i-- {
		f := &k.flight[i]
		if j := f.b.part(q.name); j >= 0 && f.b.parts[j].held {
			f.b.parts[j].held = false
			to := max(q.burst(q.tat), q.reset)
			f.b.slot += to - k.due(f)
			q.tat = max(q.tat, to) + int64(f.b.n)*sp
			q.left += f.of(q.unit)
		}
	}
	for i := range k.flight {
		f := &k.flight[i]
		j := f.b.part(q.name)
		if j < 0 || !f.b.parts[j].held {
			continue
		}
		f.b.parts[j].held = false
		if fixed {
			continue
		}
		if at := k.due(f); at < next {
			f.b.slot += next - at
		} else {
			next = at
		}
		next += int64(f.b.n) * sp
	}
	if !fixed {
		q.tat = max(q.tat, next)
	}
}

// burst returns the slot of a unit whose pace after q's reset puts it at
// t: for a fixed window that no other client is seen spending, the start
// of the window t lies in (the latest its reset can be, plus whole
// windows), so that each window's units go at once, as the upstream
// allows; otherwise t. Paced within the window, the last partial window
// of a job took up to a window longer than it had to (5c). Beside
// another client, a burst at each boundary spent the window before its
// requests came: they were refused, so its share looked smaller, and
// this client's last unit of a window met a 429 and a pause (5e).
func (q *statedQuota) burst(t int64) int64 {
	if !q.fixed || q.sliding || q.stamp == math.MinInt64 || q.window <= 0 || t <= q.reset || q.others.perNs() > 0 {
		return t
	}
	return q.reset + (t-q.reset)/q.window*q.window
}

// filled reports whether remaining, stated by the first answer from the
// window after q's, says that window came back all but full although
// this client's own units admitted in q's window were over two thirds of
// its limit: a sliding counter would still count them, less the part of
// a window that passed (all but a sixteenth of it). It tells a fixed
// window even after a long silence (5c's first window: 35 sent in its
// first few milliseconds, the next answer a second later).
func (q *statedQuota) filled(remaining int) bool {
	return 2*q.count.ours > q.limit && remaining+max(q.limit/16, 1) >= q.limit
}

// windowCount is what a phased quota's window counted, as far as the
// answers tell.
type windowCount struct {
	ours   int   // this client's units admitted, as their answers said
	others int   // at most what others had spent before the window's first answer
	at     int64 // when that answer arrived
	// exact says limit − remaining is what the window counted: a fixed
	// window that nobody else is seen spending. (In the key's first window the first answer heard may be
	// one handled late: what it says was spent before it was this
	// client's too, and counted as others' it held 5c's first window to
	// 32. A window lost there costs 5c nothing: its last window had room.)
	exact bool
}

// unseen returns how many of the inFlight units of this client (booked
// before the reset, or sent before the record heard anything) the
// statement raw, for q's window, may not have counted yet. The window
// counted limit − raw: the answer's own units, those this client heard
// back, what others spent (at most what they had before the window's
// first answer, and their pace since), and the rest were units in flight
// here, handled but not yet heard back. Answers arriving together are
// heard back in any order: taking every unit in flight off the lowest
// statement counted most of them twice (5c: 31 of the first window's 48
// at once, and each unit that was booked meanwhile went to the next
// window, where the configured sliding log then held every later booking).
func (q *statedQuota) unseen(raw, inFlight int, c windowCount, a arrival) int {
	if q.unit != UnitRequests || q.limit <= 0 || inFlight <= 0 || !c.exact || q.sliding {
		return max(inFlight, 0)
	}
	handled := q.limit - raw - a.n - c.ours - c.others - q.others.until(a.now-c.at)
	return max(inFlight-max(handled, 0), 0)
}
