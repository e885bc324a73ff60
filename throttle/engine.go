package throttle

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The engine: how a request travels (see also doc.go).
//
//	limiter method (TokenBucket.Reserve, ...)
//	  -> engine.reserve: find the key's state and lock it (engine.lock)
//	  -> algorithm.earliest: the first slot with room, no earlier than the pause's end
//	  -> keyState.book: algorithm.book records the units; a claim remembers them
//	  -> Reservation: holds the claim as its Booking; Wait asks claim.Until, Cancel gives it back
//
// A pause enters at engine.pause: pauseState.start, then algorithm.shift
// moves the units ahead. A sleeper learns of it when Wait wakes and asks
// its claim again (keyState.slotOf).

// algorithm is the per-key arithmetic of one limiter. Every time is in
// nanoseconds on the limiter's timeline, and every method is called with
// the key's state locked. Limiters implement it on a pointer: a value
// would be copied into every call on the hot path (Allow goal).
type algorithm[S any] interface {
	// earliest returns the earliest slot, no earlier than now or from, at
	// which n units fit.
	earliest(s *S, now, from int64, n int) (slot int64)
	// book takes n units at slot; seq is the key's booking count with
	// this one. undo is kept with the claim and handed back to give;
	// remaining is what is left of the budget at slot, or 0 unless tally
	// is set (Allow has no use for it: Allow goal).
	book(s *S, now, slot int64, n int, seq uint64, tally bool) (undo int64, remaining int)
	// due returns where claim c is due, given slot, where the key's
	// pauses moved it. Only the fixed window moves units further.
	due(s *S, c *claim, slot int64) int64
	// give returns what can safely be returned of claim c, whose slot is
	// not before now. moved is how far pauses have shifted it, or any
	// unit booked before it, since it was made, at most (c.slot already
	// includes its own shift). latest says no booking made
	// after it still stands: every later one was given back in full.
	give(s *S, now int64, c claim, moved int64, latest bool)
	// shift moves everything booked after now later by by.
	shift(s *S, now, by int64)
	// fresh reports whether s holds nothing worth remembering at now.
	fresh(s *S, now int64) bool
	// left returns the units that could be taken at now.
	left(s *S, now int64) int
	// ahead returns the units booked for slots after now.
	ahead(s *S, now int64) int
	// pushed returns the bookings ahead of now when this limiter may have
	// moved them further than a pause moves the other limiters' (only the
	// fixed window does, and only it returns any), oldest first.
	pushed(s *S, now int64) []aheadEntry
	// settle changes claim c's units by delta (actual - booked) at
	// c.slot, where the key's pauses moved it: a charge when positive, a
	// give-back as far as is safe when negative. latest says no booking
	// made after it still stands. stale says s is not the state c was
	// booked in (that one was dropped as fresh): only a charge applies,
	// and only where it cannot be missed.
	settle(s *S, now int64, c claim, delta int64, latest, stale bool)
	// raise tells s that bookings ahead of now are due where units says,
	// later than it has them, so that it spaces what follows from them
	// (only the buckets can).
	raise(s *S, now int64, units []aheadEntry)
}

// keyState is one key's state.
type keyState[S any, A algorithm[S]] struct {
	eng *engine[S, A]
	key string

	// mu guards everything below. The limiter's clock is read while it
	// is held, so two callers can never apply readings out of order.
	mu      sync.Mutex
	last    int64  // newest clock reading applied; time never runs back
	seq     uint64 // bookings made so far
	dropped bool   // a sweep removed this state from keys
	pause   pauseState
	waiting *waitList // callers asleep in Wait (moveup.go); nil when none
	s       S
}

// engine holds per-key state for one algorithm. Each limiter type wraps
// one and exports its methods under its own name.
type engine[S any, A algorithm[S]] struct {
	id      uint64 // lock order for All
	alg     A
	maxN    int // the most units one call can ever get
	tl      timeline
	maxKeys int
	moveUp  bool // WithMoveUp: sleepers in Wait may move up (moveup.go)

	// mu guards keys. A key's state is locked while mu is still held for
	// reading, so that a sweep, which drops states while holding mu for
	// writing, never drops one someone is about to use.
	mu   sync.RWMutex
	keys map[string]*keyState[S, A]

	sweptAt atomic.Int64 // when the last sweep began, on the timeline
	added   atomic.Int64 // keys added since then
	full    error        // the ErrTooManyKeys a new key gets, built once
}

var limiterIDs atomic.Uint64

func newEngine[S any, A algorithm[S]](alg A, maxN int, c config) *engine[S, A] {
	k := &engine[S, A]{
		id:      limiterIDs.Add(1),
		alg:     alg,
		maxN:    maxN,
		tl:      newTimeline(c.now),
		maxKeys: c.maxKeys,
		moveUp:  c.moveUp,
		keys:    make(map[string]*keyState[S, A]),
		full:    fmt.Errorf("%w: all %d tracked keys hold live state", ErrTooManyKeys, c.maxKeys),
	}
	k.sweptAt.Store(-int64(sweepEvery))
	return k
}

// A full limiter sweeps for fresh keys to drop at most once per
// sweepEvery, unless maxKeys/sweepGrowth keys were added since the last
// sweep. Between sweeps a new key looks at a few tracked keys for a fresh
// one to drop (dropSome), and is refused if it finds none: a flood of new
// keys costs O(1) each, and keys already tracked are not held up (issue
// 11, key flood: ≤ 10 µs per refusal at 100 000 keys).
const (
	sweepEvery  = time.Second
	sweepGrowth = 8
)

// lock returns key's state, locked, and the current time on it.
func (k *engine[S, A]) lock(key string) (*keyState[S, A], int64, error) {
	k.mu.RLock()
	if e := k.keys[key]; e != nil {
		e.mu.Lock()
		k.mu.RUnlock()
		return e, e.tick(), nil
	}
	full := len(k.keys) >= k.maxKeys
	k.mu.RUnlock()
	if full {
		if k.startSweep() {
			k.sweep()
		} else if !k.dropSome() {
			return nil, 0, k.full
		}
	}

	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.keys[key]
	if e == nil {
		if len(k.keys) >= k.maxKeys {
			return nil, 0, k.full
		}
		e = &keyState[S, A]{eng: k, key: key}
		k.keys[key] = e
		k.added.Add(1)
	}
	e.mu.Lock()
	return e, e.tick(), nil
}

// startSweep reports whether it is time to sweep, and if so claims the
// sweep for the caller: callers racing for it see it as just done.
func (k *engine[S, A]) startSweep() bool {
	now, last := k.tl.read(), k.sweptAt.Load()
	if now-last < int64(sweepEvery) && k.added.Load() < int64(max(k.maxKeys/sweepGrowth, 1)) {
		return false
	}
	if !k.sweptAt.CompareAndSwap(last, now) {
		return false
	}
	k.added.Store(0)
	return true
}

// sweep drops every fresh key. Dropping a fresh key loses nothing: a new
// state starts out the same. It looks for them under the read lock, so
// that tracked keys are served meanwhile, and takes the write lock only
// to drop those it found, checking each again.
func (k *engine[S, A]) sweep() {
	var stale []string
	k.mu.RLock()
	for key, e := range k.keys {
		e.mu.Lock()
		if e.isFresh() {
			stale = append(stale, key)
		}
		e.mu.Unlock()
	}
	k.mu.RUnlock()
	if len(stale) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, key := range stale {
		if e := k.keys[key]; e != nil {
			e.mu.Lock()
			if e.isFresh() {
				delete(k.keys, key)
				e.dropped = true
			}
			e.mu.Unlock()
		}
	}
}

// dropSample is how many tracked keys a full limiter looks at, between
// sweeps, for a fresh one to drop for a new key: a few key locks, so that
// a flood of new keys still costs O(1) each.
const dropSample = 8

// dropSome looks at up to dropSample tracked keys, from the random place
// where ranging over a map starts, and drops those that are fresh. It
// reports whether it dropped any. Between sweeps it lets a new key in when
// keys have turned fresh since the last sweep, as [WithMaxKeys] promises,
// without the cost of a sweep; a fresh key it misses is dropped by the
// next sweep.
func (k *engine[S, A]) dropSome() bool {
	var stale [dropSample]string
	n, seen := 0, 0
	k.mu.RLock()
	for key, e := range k.keys {
		if seen++; seen > dropSample {
			break
		}
		e.mu.Lock()
		if e.isFresh() {
			stale[n] = key
			n++
		}
		e.mu.Unlock()
	}
	k.mu.RUnlock()
	if n == 0 {
		return false
	}
	dropped := false
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, key := range stale[:n] {
		if e := k.keys[key]; e != nil {
			e.mu.Lock()
			if e.isFresh() {
				delete(k.keys, key)
				e.dropped = true
				dropped = true
			}
			e.mu.Unlock()
		}
	}
	return dropped
}

// isFresh reports whether the key holds nothing worth remembering. e.mu
// is held.
func (e *keyState[S, A]) isFresh() bool {
	return e.pause.until <= e.tick() && e.eng.alg.fresh(&e.s, e.last)
}

// tick reads the clock, never letting it run backwards. e.mu is held.
func (e *keyState[S, A]) tick() int64 {
	if now := e.eng.tl.read(); now > e.last {
		e.last = now
	}
	return e.last
}

func (k *engine[S, A]) check(ctx context.Context, key string, n int) error {
	if err := checkRequest(ctx, key, n); err != nil {
		return err
	}
	if n > k.maxN {
		return capacityError(n, k.maxN)
	}
	return nil
}

// reserve books n units of key no earlier than after from now.
func (k *engine[S, A]) reserve(ctx context.Context, key string, n int, after, maxWait time.Duration) (*Reservation, error) {
	if err := k.check(ctx, key, n); err != nil {
		return nil, err
	}
	e, now, err := k.lock(key)
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	slot := k.alg.earliest(&e.s, now, max(e.pause.until, now+min(max(int64(after), 0), maxSpan)), n)
	if wait := pastMaxWait(slot-now, maxWait); wait > 0 {
		return refused(key, time.Duration(wait), k.alg.left(&e.s, now)), nil
	}
	if slot-now > maxAhead {
		return nil, tooFarAhead(key)
	}
	// One allocation holds the Reservation and its claim.
	rc := new(struct {
		r Reservation
		c claim
	})
	rc.r = Reservation{OK: true, Delay: time.Duration(slot - now), key: key, booking: &rc.c}
	rc.r.Remaining = e.book(now, slot, n, &rc.c)
	return &rc.r, nil
}

// pastMaxWait returns 0 when a slot delay from now lies within maxWait, and
// otherwise how long until the same request would be accepted.
func pastMaxWait(delay int64, maxWait time.Duration) int64 {
	if maxWait < 0 {
		return 0
	}
	return max(delay-int64(maxWait), 0)
}

func refused(key string, retryAfter time.Duration, remaining int) *Reservation {
	return &Reservation{Delay: retryAfter, Remaining: remaining, key: key}
}

// book records n units at slot in c. It returns what is left of the
// budget. e.mu is held.
func (e *keyState[S, A]) book(now, slot int64, n int, c *claim) (remaining int) {
	e.seq++
	undo, left := e.eng.alg.book(&e.s, now, slot, n, e.seq, true)
	*c = claim{key: e, slot: slot, n: n, undo: undo, seq: e.seq, shifted: e.pause.shifted}
	return left
}

// allow takes n units of key only if they are available now, and
// allocates nothing.
func (k *engine[S, A]) allow(ctx context.Context, key string, n int) (bool, error) {
	if err := k.check(ctx, key, n); err != nil {
		return false, err
	}
	e, now, err := k.lock(key)
	if err != nil {
		return false, err
	}
	defer e.mu.Unlock()
	if e.pause.until > now {
		return false, nil
	}
	slot := k.alg.earliest(&e.s, now, now, n)
	if slot > now {
		return false, nil
	}
	e.seq++
	k.alg.book(&e.s, now, slot, n, e.seq, false)
	return true, nil
}

// pause moves every slot of key still ahead, and every new booking,
// later, so that nothing is due for d from now.
func (k *engine[S, A]) pause(ctx context.Context, key string, d time.Duration) error {
	if err := checkRequest(ctx, key, 1); err != nil {
		return err
	}
	if d < 0 {
		return fmt.Errorf("throttle: pause must not be negative, got %v", d)
	}
	e, now, err := k.lock(key)
	if err != nil {
		return err
	}
	defer e.mu.Unlock()
	if by := e.pause.start(now, now+min(int64(d), maxSpan)); by > 0 {
		k.alg.shift(&e.s, now, by)
	}
	return nil
}

// inspect reports key's state without booking anything or adding the
// key.
func (k *engine[S, A]) inspect(ctx context.Context, key string) (KeyState, error) {
	if err := checkRequest(ctx, key, 1); err != nil {
		return KeyState{}, err
	}
	k.mu.RLock()
	e := k.keys[key]
	if e == nil {
		k.mu.RUnlock()
		var s S
		now := max(k.tl.read(), 0)
		return KeyState{Key: key, Remaining: k.alg.left(&s, now), Next: time.Duration(k.alg.earliest(&s, now, now, 1) - now)}, nil
	}
	e.mu.Lock()
	k.mu.RUnlock()
	defer e.mu.Unlock()
	now := e.tick()
	left := k.alg.left(&e.s, now)
	if e.pause.until > now {
		left = 0 // nothing can be taken while the key is paused
	}
	return KeyState{
		Key:       key,
		Remaining: left,
		Next:      time.Duration(k.alg.earliest(&e.s, now, max(e.pause.until, now), 1) - now),
		Ahead:     k.alg.ahead(&e.s, now),
		Paused:    time.Duration(max(e.pause.until-now, 0)),
	}, nil
}

// slotOf returns where claim c is due now, pauses included. e.mu is held.
func (e *keyState[S, A]) slotOf(c *claim) int64 {
	slot := e.pause.moved(c.slot, c.shifted)
	if c.n == 0 {
		return slot // a claim of nothing shares its seq with the booking before it
	}
	return e.eng.alg.due(&e.s, c, slot)
}

// until implements holder.
func (e *keyState[S, A]) until(c *claim) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return time.Duration(e.slotOf(c) - e.tick())
}

// give implements holder. A state dropped by a sweep was fresh: nothing
// of c is left in it, and giving back to it changes nothing.
func (e *keyState[S, A]) give(c *claim) {
	if c.n == 0 {
		return // a part of ReserveParts that took nothing
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.giveLocked(c)
}

// giveLocked is give with e.mu held.
func (e *keyState[S, A]) giveLocked(c *claim) {
	if c.n == 0 {
		return
	}
	b := *c
	b.slot = e.slotOf(c)
	now := e.tick()
	if b.slot < now {
		return // the units have been used
	}
	latest := c.seq == e.seq
	// A settle's give-back can let a booking's slot lie before an earlier
	// booking's, which a pause may then move while this one stays: any
	// unit may have moved as far as the whole shift since.
	e.eng.alg.give(&e.s, now, b, max(b.slot-c.slot, e.pause.shifted-c.shifted), latest)
	if latest {
		e.seq-- // gone in full, so the booking before it is the latest now
	}
}

// settle implements holder. A claim with nothing booked (a part of
// ReserveParts given cost 0) is settled at its slot all the same. When
// c's state was dropped as fresh, the charge goes to the key's live
// state, and nothing is given back.
func (e *keyState[S, A]) settle(c *claim, actual int) error {
	delta := int64(actual) - int64(c.n)
	if delta != 0 {
		e.mu.Lock()
		dropped := e.dropped
		b := *c
		b.slot = e.slotOf(c)
		if !dropped {
			e.settleAt(c, delta)
		}
		e.mu.Unlock()
		if dropped && delta > 0 {
			live, now, err := e.eng.lock(e.key)
			if err != nil {
				return fmt.Errorf("throttle: settling key %q: %w", e.key, err)
			}
			live.eng.alg.settle(&live.s, now, b, delta, false, true)
			live.mu.Unlock()
		}
	}
	return e.overCapacity(actual)
}

// settleLocked is settle with e.mu held, on a state not dropped.
func (e *keyState[S, A]) settleLocked(c *claim, actual int) error {
	if delta := int64(actual) - int64(c.n); delta != 0 {
		e.settleAt(c, delta)
	}
	return e.overCapacity(actual)
}

// settleAt changes c's units by delta at its slot. e.mu is held.
func (e *keyState[S, A]) settleAt(c *claim, delta int64) {
	b := *c
	b.slot = e.slotOf(c)
	latest := c.seq == e.seq && c.n > 0
	if c.n == 0 {
		e.seq++ // a claim of nothing is booked only now: the latest
		b.seq = e.seq
	}
	e.eng.alg.settle(&e.s, e.tick(), b, delta, latest, false)
}

// overCapacity reports an actual cost larger than the key could ever
// admit at once.
func (e *keyState[S, A]) overCapacity(actual int) error {
	if actual > e.eng.maxN {
		return fmt.Errorf("throttle: key %q settled at %d units, charged: %w", e.key, actual, capacityError(actual, e.eng.maxN))
	}
	return nil
}

func capacityError(n, most int) error {
	return fmt.Errorf("%w: n is %d, at most %d fit", ErrExceedsCapacity, n, most)
}

// The methods below let All book this limiter together with others.

func (k *engine[S, A]) order() uint64 { return k.id }

func (k *engine[S, A]) capacity() int { return k.maxN }

func (k *engine[S, A]) lockKey(key string) (lockedKey, error) {
	e, now, err := k.lock(key)
	if err != nil {
		return nil, err
	}
	return &lockedState[S, A]{e: e, at: now}, nil
}

type lockedState[S any, A algorithm[S]] struct {
	e  *keyState[S, A]
	at int64
}

func (l *lockedState[S, A]) now() int64 { return l.at }

func (l *lockedState[S, A]) earliest(from int64, n int) int64 {
	return l.e.eng.alg.earliest(&l.e.s, l.at, max(from, l.e.pause.until), n)
}

func (l *lockedState[S, A]) book(slot int64, n int, c *claim) int {
	return l.e.book(l.at, slot, n, c)
}

func (l *lockedState[S, A]) mark(slot int64, c *claim) {
	e := l.e
	*c = claim{key: e, slot: slot, seq: e.seq, shifted: e.pause.shifted}
}

func (l *lockedState[S, A]) left() int { return l.e.eng.alg.left(&l.e.s, l.at) }

func (l *lockedState[S, A]) pushed() []aheadEntry { return l.e.eng.alg.pushed(&l.e.s, l.at) }

func (l *lockedState[S, A]) raise(units []aheadEntry) { l.e.eng.alg.raise(&l.e.s, l.at, units) }

func (l *lockedState[S, A]) unlock() { l.e.mu.Unlock() }
