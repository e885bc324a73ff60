package throttle

import (
	"math"
	"slices"
	"time"
)

// Provisional bookings (bench goal 5a: a quota's first window used in
// full). A statement's left is cut by every request still in flight
// (booked or sent unbooked), whether or not the upstream had already
// counted it: the answers to a burst arrive out of order, and one whose
// statement had counted the whole burst can arrive first, with most of
// the burst still unanswered. What is left then dips below zero for as
// long as the answers take, and units booked in the dip go past the
// reset and stay: on 5a, 33 requests in a first window that had room
// for 47. The cut is kept (another client's count carried over into the
// window looks the same until the answers are in: bench 5d), but a
// booking put past the reset of a window-end quota only because of it
// (without the requests in flight its statement was cut by, the quota
// had room) is provisional: when woken, about an answer's latency later,
// it is checked again, and moved back before the reset if what is left,
// with the answers in, has room for it. Under All every other part must
// admit it at the earlier slot too (allBooking.advance); otherwise it
// stays where it was.

// maxRechecks bounds how often one provisional booking is checked again.
const maxRechecks = 4

// minRecheck is the shortest wait between two checks of a provisional
// booking.
const minRecheck = int64(time.Millisecond)

// quota returns k's quota named name, or nil.
func (k *statedKey) quota(name string) *statedQuota {
	if i := slices.IndexFunc(k.quotas, func(q statedQuota) bool { return q.name == name }); i >= 0 {
		return &k.quotas[i]
	}
	return nil
}

// cutOnly reports whether part p of a booking due at due was put past
// q's reset only because of the requests in flight q's latest statement
// was cut by: q is a window-end quota in requests whose reset is still
// ahead of now, p did not fit before it, and would have without them.
func (q *statedQuota) cutOnly(p statedPart, due, now int64) bool {
	return q.unit == UnitRequests && q.stamp != math.MinInt64 && !q.sliding && !p.before && p.probe == 0 &&
		p.n > 0 && due >= q.reset && now < q.reset && q.pend > 0 && q.left < p.n && q.left+q.pend >= p.n
}

// provisional returns when to check b, just booked at now, again, or 0
// when it is not provisional. k's record is locked.
func (k *statedKey) provisional(b *statedBooking, now int64) int64 {
	if k.latency <= 0 {
		return 0
	}
	due := b.slot + k.shift - b.seen
	for _, p := range b.parts {
		if q := k.quota(p.name); q != nil && q.cutOnly(p, due, now) {
			return now + max(k.latency, minRecheck)
		}
	}
	return 0
}

// fits returns the slot, from now, that b could move back to before the
// resets it was put past: the record, as it stands, has room for it
// there on every quota. b's record is locked.
func (b *statedBooking) fits(now, due int64) (int64, bool) {
	k := b.k
	from := max(now, k.paused)
	if from >= due {
		return 0, false
	}
	i := slices.IndexFunc(k.flight, func(f statedFlight) bool { return f.b == b })
	if i < 0 {
		return 0, false // answered or cancelled
	}
	for _, p := range b.parts {
		q := k.quota(p.name)
		if q == nil || p.before || q.unit != UnitRequests || q.stamp == math.MinInt64 {
			continue
		}
		if from >= q.reset || q.left < p.n || q.unsure(from) {
			return 0, false
		}
	}
	if s := k.earliest(from, &k.flight[i]); s != from {
		return 0, false
	}
	return from, true
}

// move books b again at slot, which fits allowed: each part is given
// back (units after a reset that others were booked after stay taken)
// and booked at slot. b's record is locked.
func (b *statedBooking) move(slot int64) {
	k := b.k
	for j, p := range b.parts {
		if q := k.quota(p.name); q != nil {
			q.give(p)
			b.parts[j] = q.book(slot, p.n)
		}
	}
	b.slot = slot - k.shift + b.seen
	b.early = 0
}

// again returns when to check b again after a check at now found no
// room, or 0 to stop: after maxRechecks, or once no reset it was put
// past is still ahead.
func (b *statedBooking) again(now int64) int64 {
	b.checks++
	if b.checks >= maxRechecks {
		return 0
	}
	due := b.slot + b.k.shift - b.seen
	for _, p := range b.parts {
		if q := b.k.quota(p.name); q != nil && q.stamp != math.MinInt64 && !p.before && now < q.reset && due >= q.reset {
			return now + max(b.k.latency, minRecheck)
		}
	}
	return 0
}

// recheck is Until for a provisional booking due at due, alone (not
// under All): it moves back once the record has room, and otherwise
// wakes its caller at the next check. b's record is locked.
func (b *statedBooking) recheck(now, due int64) time.Duration {
	if now >= b.early {
		if s, ok := b.fits(now, due); ok {
			b.move(s)
			return time.Duration(s - now)
		}
		b.early = b.again(now)
		if b.early == 0 {
			return time.Duration(due - now)
		}
	}
	return time.Duration(min(due, b.early) - now)
}

// setJoint marks b as a part of an All booking: its other parts must
// move with it, so only allBooking.advance moves it.
func (b *statedBooking) setJoint() {
	b.u.mu.Lock()
	defer b.u.mu.Unlock()
	b.joint = true
}

// markJoint marks the record's part of b, if it has one, as joint.
func (b *allBooking) markJoint() {
	for _, r := range b.foreign {
		if sb, ok := r.booking.(*statedBooking); ok {
			sb.setJoint()
		}
	}
}

// earlier is implemented by the built-in keys whose limiter can take a
// booking back and book it at an earlier slot, when it admits it there:
// the sliding window log.
type earlier interface {
	lockMove() bool
	unlockMove()
	// moveEarlier moves c to delay from now when that is earlier than
	// its slot and the limiter admits it there, and returns where it was.
	// The key is locked.
	moveEarlier(c *claim, delay int64) (old int64, ok bool)
	// moveBack undoes moveEarlier. The key is locked.
	moveBack(c *claim, old int64)
}

// advance moves b back before the reset of its record part, when that
// part is provisional and due for a check, and every built-in part
// admits it at the same slot; it returns how long until the next check,
// or 0 when none is due. A booking with another foreign part, or a
// built-in part that cannot move earlier, stays where it is.
func (b *allBooking) advance() time.Duration {
	if len(b.foreign) != 1 || b.foreign[0].booking == nil {
		return 0
	}
	sb, ok := b.foreign[0].booking.(*statedBooking)
	if !ok {
		return 0
	}
	u := sb.u
	u.mu.Lock()
	now := u.clock()
	early := sb.early
	u.mu.Unlock()
	if early == 0 {
		return 0
	}
	if early > now {
		return time.Duration(early - now)
	}
	keys := make([]earlier, 0, len(b.claims))
	for i := range b.claims {
		e, ok := b.claims[i].key.(earlier)
		if !ok {
			sb.stop()
			return 0
		}
		keys = append(keys, e)
	}
	// The claims are in lock order (bookTogether); the record's lock
	// comes last, as nothing holds it while locking a key.
	var locked []earlier
	defer func() {
		for _, e := range locked {
			e.unlockMove()
		}
	}()
	for _, e := range keys {
		if !e.lockMove() {
			sb.stop()
			return 0
		}
		locked = append(locked, e)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	now = u.clock()
	if sb.early == 0 {
		return 0
	}
	due := sb.slot + sb.k.shift - sb.seen
	if due <= now {
		sb.early = 0
		return 0
	}
	s, ok := sb.fits(now, due)
	if ok {
		olds := make([]int64, 0, len(keys))
		for i, e := range keys {
			old, ok := int64(0), b.claims[i].n == 0
			if !ok {
				old, ok = e.moveEarlier(&b.claims[i], s-now)
			}
			if !ok {
				break
			}
			olds = append(olds, old)
		}
		if len(olds) == len(keys) {
			sb.move(s)
			return 0
		}
		// A part did not admit it: the claims moved so far go back.
		for i, old := range olds {
			if b.claims[i].n > 0 {
				keys[i].moveBack(&b.claims[i], old)
			}
		}
	}
	sb.early = sb.again(now)
	if sb.early == 0 {
		return 0
	}
	return time.Duration(sb.early - now)
}

// stop ends b's checks.
func (b *statedBooking) stop() {
	b.u.mu.Lock()
	defer b.u.mu.Unlock()
	b.early = 0
}

// moveEarlier implements earlier, on a sliding window log alone.
func (e *keyState[S, A]) moveEarlier(c *claim, delay int64) (int64, bool) {
	l, ok := any(e.eng.alg).(*slidingLog)
	s, ok2 := any(&e.s).(*logState)
	if !ok || !ok2 || c.n <= 0 || c.shifted != e.pause.shifted {
		return 0, false
	}
	now := e.tick()
	slot, old := now+delay, e.slotOf(c)
	if slot >= old || slot < e.pause.until || slot < now {
		return 0, false
	}
	b := *c
	b.slot = old
	l.give(s, now, b, 0, false)
	if !l.fits(s, slot, c.n) {
		l.add(s, old, int64(c.n))
		return 0, false
	}
	l.add(s, slot, int64(c.n))
	c.slot = slot
	return old, true
}

// moveBack implements earlier.
func (e *keyState[S, A]) moveBack(c *claim, old int64) {
	l, ok := any(e.eng.alg).(*slidingLog)
	s, ok2 := any(&e.s).(*logState)
	if !ok || !ok2 {
		return
	}
	b := *c
	l.give(s, e.last, b, 0, false)
	l.add(s, old, int64(c.n))
	c.slot = old
}

// fits reports whether the log admits n more units at t, a slot that
// may lie before others: every window holding t keeps at most limit
// units. Units dropped from the log's front lie at or before its first
// run; a window reaching before that run counts all of them.
func (l *slidingLog) fits(s *logState, t int64, n int) bool {
	runs := s.runs()
	first := int64(math.MaxInt64)
	if len(runs) > 0 {
		first = runs[0].at
	}
	upTo := func(y int64) int64 { // units at or before y that the log holds, plus those dropped
		if i := firstAfter(runs, y); i > 0 {
			return runs[i-1].cum
		}
		return s.base
	}
	count := func(x int64) int64 { // units in (x-w, x]
		c := upTo(x) - upTo(x-l.w)
		if x-l.w < first {
			c += s.base
		}
		return c
	}
	if count(t)+int64(n) > l.limit {
		return false
	}
	for i := firstAfter(runs, t); i < len(runs) && runs[i].at < t+l.w; i++ {
		if count(runs[i].at)+int64(n) > l.limit {
			return false
		}
	}
	return true
}
