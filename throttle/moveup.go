package throttle

import (
	"slices"
	"sync"
)

// Moving up (issue 14). A bucket books each caller at the earliest slot
// its tat allows, and tat counts every booking before at its estimate.
// When one of those gives units back (Settle with a smaller actual, or
// Cancel), a caller asleep in Wait would keep the slot worked out from
// the estimate, and only bookings made later would gain. Instead, the
// callers asleep in Wait on the key move up: the give-back's goroutine
// takes the key's latest bookings that are asleep (a suffix of its
// bookings, newest first), gives each back as the latest booking (in
// full, as Cancel does), and books them again in their order at the
// earliest slot they now fit, never later than the slot they held. This
// is exactly what the bucket would have handed out had the earlier
// bookings cost their actuals from the start, so every bound the bucket
// keeps holds: spacing, burst, the Cancel rule, and All's one common slot
// (a caller booked on several keys moves on all of them together, or not
// at all). A booking that is not asleep in Wait (its caller may be
// timing the slot itself), or one made before such a booking, keeps its
// slot. Only the buckets (TokenBucket, LeakyBucket) move bookings; a
// booking with a part on another limiter keeps its slot. It is opt-in:
// WithMoveUp on every bucket involved.

// waiter is one caller asleep in [Reservation.Wait] on a booking whose
// claims may move up.
type waiter struct {
	r      *Reservation
	claims []*claim  // the booking's claims, in the order of keys
	keys   []holder  // the claims' keys, in lock order, without repeats
	moved  chan bool // receives when the slot moved earlier; buffered 1

	once sync.Once
}

// watch registers r's caller as asleep in Wait, so that its slot may
// move up, and returns it, or nil when its booking cannot move.
func watch(r *Reservation) *waiter {
	var cs []*claim
	switch b := r.booking.(type) {
	case *claim:
		cs = []*claim{b}
	case *allBooking:
		if len(b.foreign) > 0 {
			return nil
		}
		cs = make([]*claim, len(b.claims))
		for i := range b.claims {
			cs[i] = &b.claims[i]
		}
	default:
		return nil
	}
	for _, c := range cs {
		if !c.key.movable() {
			return nil
		}
	}
	slices.SortFunc(cs, func(x, y *claim) int { return compare(x.key.lockOrder(), y.key.lockOrder()) })
	w := &waiter{r: r, claims: cs, keys: make([]holder, len(cs)), moved: make(chan bool, 1)}
	for i, c := range cs {
		w.keys[i] = c.key
	}
	for i, c := range cs {
		if i > 0 && w.keys[i-1] == c.key {
			return nil // one key twice: All merges them, so this does not happen
		}
	}
	for _, c := range cs {
		c.key.watch(c, w)
	}
	return w
}

// unwatch takes w off its keys. It is idempotent, and must run before the
// reservation is cancelled, so that a moving up never books units given
// back.
func (w *waiter) unwatch() {
	w.once.Do(func() {
		for _, c := range w.claims {
			c.key.unwatch(c)
		}
	})
}

// waitEntry is a claim asleep in Wait on a key, and its waiter.
type waitEntry struct {
	c *claim
	w *waiter
}

// waitList is a key's waiters, guarded by the key's mu. A key holds one
// only while someone has waited on it (a pointer keeps idle keys small).
type waitList struct {
	entries []waitEntry
}

// moveUp runs apply, a give-back (or a settle) on the keys own, and
// moves the callers asleep in Wait on from's key up as far as the key's
// budget then allows, together with their bookings on other keys. It is
// called with no lock held.
//
// When the callers to move were booked on every key of own, they are
// given back first and booked again after apply, which then runs with
// those keys locked (apply(true) must use the locked methods): the give-
// back is then not held back by their slack, since they are no longer
// booked after it. Otherwise apply(false) runs first, on its own.
func moveUp(from holder, own []holder, apply func(locked bool)) {
	var w *waiter
	if from.movable() && from.lockMove() {
		w = from.latestWaiter()
		from.unlockMove()
	}
	if w == nil || !subset(own, w.keys) {
		apply(false)
		if w == nil {
			return
		}
		apply = nil
	}
	keys := w.keys
	locked := 0
	defer func() {
		for _, k := range keys[:locked] {
			k.unlockMove()
		}
	}()
	for _, k := range keys {
		if !k.lockMove() {
			break // dropped as fresh: nothing there waits
		}
		locked++
	}
	if locked < len(keys) {
		for _, k := range keys[:locked] {
			k.unlockMove()
		}
		locked = 0
		if apply != nil {
			apply(false)
		}
		return
	}

	// On each key, the latest bookings asleep in Wait, newest first,
	// booked on exactly these keys; then only those found on every key
	// they booked units on, and on each key only the run of them up to
	// the first that is not.
	runs := make([][]*waiter, len(keys))
	for i, k := range keys {
		runs[i] = k.asleep(keys)
	}
	moving := map[*waiter]bool{}
	for _, run := range runs {
		for _, x := range run {
			moving[x] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for i, run := range runs {
			for j, x := range run {
				if !moving[x] {
					runs[i], changed = run[:j], true
					break
				}
			}
		}
		for x := range moving {
			for i := range keys {
				if x.claims[i].n > 0 && !slices.Contains(runs[i], x) {
					delete(moving, x)
					changed = true
					break
				}
			}
		}
	}
	if len(moving) == 0 {
		if apply != nil {
			apply(true)
		}
		return
	}

	// In booking order: the seq of the first key where both booked units
	// (All books every key of a booking under their locks at once, so the
	// keys agree).
	order := make([]*waiter, 0, len(moving))
	for x := range moving {
		order = append(order, x)
	}
	slices.SortFunc(order, func(x, y *waiter) int {
		for i := range keys {
			if x.claims[i].n > 0 && y.claims[i].n > 0 {
				return compare(x.claims[i].seq, y.claims[i].seq)
			}
		}
		return 0
	})
	old := make([]int64, len(order)) // each one's delay, the least over its keys
	for j, x := range order {
		old[j] = -1
		for i, k := range keys {
			if d := k.delayOf(x.claims[i]); old[j] < 0 || d < old[j] {
				old[j] = d
			}
		}
	}
	// Give back, newest first on each key, then book again, oldest first.
	for i, k := range keys {
		for _, x := range runs[i] {
			k.unbook(x.claims[i])
		}
	}
	if apply != nil {
		apply(true)
	}
	for j, x := range order {
		d := int64(0)
		for i, k := range keys {
			if n := x.claims[i].n; n > 0 {
				d = max(d, k.earliestDelay(n))
			}
		}
		if d >= old[j] {
			for i, k := range keys {
				k.rebook(x.claims[i], -1) // where it was
			}
			continue
		}
		for i, k := range keys {
			k.rebook(x.claims[i], d)
		}
		select {
		case x.moved <- true:
		default: // already told
		}
	}
}

// subset reports whether every key of own is among keys.
func subset(own, keys []holder) bool {
	for _, k := range own {
		if !slices.Contains(keys, k) {
			return false
		}
	}
	return true
}

// The methods below implement the holder methods moveUp uses, on a key's
// state.

// movable reports whether the key's limiter moves bookings up: a bucket
// built WithMoveUp.
func (e *keyState[S, A]) movable() bool {
	_, ok := any(e.eng.alg).(*gcra)
	return ok && e.eng.moveUp
}

func (e *keyState[S, A]) lockOrder() uint64 { return e.eng.id }

// lockMove locks the key, unless a sweep dropped it (then it returns
// false, unlocked).
func (e *keyState[S, A]) lockMove() bool {
	e.mu.Lock()
	if e.dropped {
		e.mu.Unlock()
		return false
	}
	return true
}

func (e *keyState[S, A]) unlockMove() { e.mu.Unlock() }

func (e *keyState[S, A]) watch(c *claim, w *waiter) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.waiting == nil {
		e.waiting = &waitList{}
	}
	e.waiting.entries = append(e.waiting.entries, waitEntry{c: c, w: w})
}

func (e *keyState[S, A]) unwatch(c *claim) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.waiting == nil {
		return
	}
	e.waiting.entries = slices.DeleteFunc(e.waiting.entries, func(x waitEntry) bool { return x.c == c })
	if len(e.waiting.entries) == 0 {
		e.waiting = nil // an idle key keeps nothing
	}
}

// hasWaiters reports whether anyone waits on the key. e.mu is held.
func (e *keyState[S, A]) hasWaiters() bool { return e.waiting != nil }

// waiterAt returns the open reservation asleep in Wait whose claim on
// the key is booking seq, with units still ahead, or nil. e.mu is held.
func (e *keyState[S, A]) waiterAt(seq uint64, now int64) *waiter {
	if e.waiting == nil {
		return nil
	}
	for _, x := range e.waiting.entries {
		if x.c.seq == seq && x.c.n > 0 && x.w.r.state.Load() == open && e.slotOf(x.c) > now {
			return x.w
		}
	}
	return nil
}

// latestWaiter returns the waiter whose claim is the key's latest
// booking, or nil. e.mu is held.
func (e *keyState[S, A]) latestWaiter() *waiter {
	return e.waiterAt(e.seq, e.tick())
}

// asleep returns the key's latest bookings asleep in Wait, newest first,
// as long as they were booked on exactly keys. e.mu is held.
func (e *keyState[S, A]) asleep(keys []holder) []*waiter {
	now := e.tick()
	var run []*waiter
	for seq := e.seq; seq > 0; seq-- {
		w := e.waiterAt(seq, now)
		if w == nil || !slices.Equal(w.keys, keys) {
			break
		}
		run = append(run, w)
	}
	return run
}

// delayOf returns how long until claim c is due. e.mu is held.
func (e *keyState[S, A]) delayOf(c *claim) int64 {
	return e.slotOf(c) - e.last
}

// unbook gives back claim c, the key's latest booking, in full, and
// leaves in c where it was due, for rebook. e.mu is held.
func (e *keyState[S, A]) unbook(c *claim) {
	slot := e.slotOf(c)
	if c.n > 0 {
		b := *c
		b.slot = slot
		e.eng.alg.give(&e.s, e.last, b, max(slot-c.slot, e.pause.shifted-c.shifted), true)
		e.seq--
	}
	c.slot, c.shifted = slot, e.pause.shifted
}

// earliestDelay returns how long until n units fit on the key. e.mu is
// held.
func (e *keyState[S, A]) earliestDelay(n int) int64 {
	now := e.last
	return e.eng.alg.earliest(&e.s, now, max(e.pause.until, now), n) - now
}

// rebook books claim c again, delay from now, or where unbook left it
// when delay is negative. e.mu is held.
func (e *keyState[S, A]) rebook(c *claim, delay int64) {
	slot := c.slot
	if delay >= 0 {
		slot = e.last + delay
	}
	// Field by field: Until reads c.key without the lock.
	c.slot, c.shifted = slot, e.pause.shifted
	if c.n == 0 {
		c.seq = e.seq
		return
	}
	e.seq++
	c.undo, _ = e.eng.alg.book(&e.s, e.last, slot, c.n, e.seq, false)
	c.seq = e.seq
}
