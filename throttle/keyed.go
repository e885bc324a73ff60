package throttle

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// algorithm is the per-key arithmetic of one limiter. Every time is in
// nanoseconds on the limiter's timeline, and every method is called with
// the key's state locked. Limiters implement it on a pointer: a value
// would be copied into every call on the hot path.
type algorithm[S any] interface {
	// earliest returns the earliest slot, no earlier than now or from,
	// at which n units fit, and the earliest decision time (notBefore) at
	// which booking them would be accepted at all. While the key is
	// paused, decisions are taken as of the pause's end (see decided).
	earliest(s *S, now, from int64, n int) (slot, notBefore int64)
	// book takes n units at slot. aux is kept with the booking and handed
	// back to give; remaining is what is left of the budget at slot, or 0
	// unless tally is set: Allow has no use for it.
	// seq is the key's booking count with this one.
	book(s *S, now, slot int64, n int, seq uint64, tally bool) (aux int64, remaining int)
	// due returns where booking b is due, given slot, where the key's
	// pauses have moved it. Only the fixed window moves units further.
	due(s *S, b *mark, slot int64) int64
	// give returns what can safely be returned of booking b, whose slot
	// is not before now. moved is how far pauses have shifted it since it
	// was made (b.slot already includes it). latest says no booking made
	// after it still stands: every later one was given back in full.
	give(s *S, now int64, b mark, moved int64, latest bool)
	// shift moves everything booked after now later by d.
	shift(s *S, now, d int64)
	// fresh reports whether s holds nothing worth remembering at now.
	fresh(s *S, now int64) bool
	// left returns the units that could be taken at now.
	left(s *S, now int64) int
}

// mark records one booking on one key.
type mark struct {
	slot    int64  // when the units are the caller's, before any later pause
	n       int    // units booked
	aux     int64  // algorithm's own note
	seq     uint64 // the key's booking count when this was made
	shiftAt int64  // the key's total pause shift when this was made
}

// entry is one key's state.
type entry[S any, A algorithm[S]] struct {
	lim *keyed[S, A]

	// mu guards everything below. The limiter's clock is read while it
	// is held, so two callers can never apply readings out of order.
	mu    sync.Mutex
	last  int64       // newest clock reading applied; time never runs back
	seq   uint64      // bookings made so far
	until int64       // the key is paused until then
	shift *pauseShift // nil until a pause moves something
	s     S
}

// pauseShift is how far pauses have moved one key's schedule. It lives
// apart from the entry, which it would make 16 bytes larger: most keys
// are never paused.
type pauseShift struct {
	moved  int64 // total shift applied by pauses
	paused int64 // when the latest pause that shifted anything began
	before int64 // moved, as it was before that pause
}

// moved returns how far pauses have moved the key's schedule. e.mu is
// held.
func (e *entry[S, A]) moved() int64 {
	if e.shift == nil {
		return 0
	}
	return e.shift.moved
}

// dead is the until of an entry dropped from the map: callers must look
// the key up again. It is kept in until, not in a field of its own, so
// that an entry stays within its allocation size class.
const dead = math.MaxInt64

func (e *entry[S, A]) isDead() bool { return e.until == dead }

// keyed holds per-key state for one algorithm and implements Limiter,
// Pauser and Allower on top of it.
type keyed[S any, A algorithm[S]] struct {
	id      uint64 // lock order for All
	alg     A
	maxN    int // the most units one call can ever get
	tl      timeline
	maxKeys int64

	keys    keymap[entry[S, A]]
	count   atomic.Int64
	sweepMu sync.Mutex
}

var limiterIDs atomic.Uint64

func newKeyed[S any, A algorithm[S]](alg A, maxN int, c config) *keyed[S, A] {
	return &keyed[S, A]{
		id:      limiterIDs.Add(1),
		alg:     alg,
		maxN:    maxN,
		tl:      newTimeline(c.now),
		maxKeys: int64(c.maxKeys),
	}
}

// lock returns key's entry, locked, and the current time on it.
func (k *keyed[S, A]) lock(key string) (*entry[S, A], int64, error) {
	for fresh := false; ; fresh = true {
		e, err := k.load(key, fresh)
		if err != nil {
			return nil, 0, err
		}
		e.mu.Lock()
		if e.isDead() {
			e.mu.Unlock()
			continue // a sweep dropped it: look again past the lock-free map
		}
		return e, e.tick(), nil
	}
}

// tick reads the clock, never letting it run backwards. e.mu is held.
func (e *entry[S, A]) tick() int64 {
	if now := e.lim.tl.read(); now > e.last {
		e.last = now
	}
	return e.last
}

func (k *keyed[S, A]) load(key string, fresh bool) (*entry[S, A], error) {
	if e, ok := k.keys.load(key, fresh); ok {
		return e, nil
	}
	// Take a place under the cap before storing, so that callers adding
	// keys at once cannot overshoot it.
	for k.count.Add(1) > k.maxKeys {
		k.count.Add(-1)
		if !k.sweep() {
			return nil, fmt.Errorf("%w: all %d tracked keys hold live state", ErrTooManyKeys, k.maxKeys)
		}
	}
	e, loaded := k.keys.loadOrStore(key, &entry[S, A]{lim: k})
	if loaded {
		k.count.Add(-1)
	}
	return e, nil
}

// sweep drops every fresh key and reports whether there is room now.
// Dropping a fresh key loses nothing: a new entry starts out the same.
func (k *keyed[S, A]) sweep() bool {
	k.sweepMu.Lock()
	defer k.sweepMu.Unlock()
	if k.count.Load() < k.maxKeys {
		return true // another sweep made room meanwhile
	}
	for key, e := range k.keys.snapshot().all() {
		e.mu.Lock()
		if e.until <= e.tick() && k.alg.fresh(&e.s, e.last) {
			// Marked and dropped under e.mu: a caller that finds the
			// entry dead looks again and no longer finds it.
			e.until = dead
			k.keys.drop(key)
			k.count.Add(-1)
		}
		e.mu.Unlock()
	}
	k.keys.settle()
	return k.count.Load() < k.maxKeys
}

func (k *keyed[S, A]) check(ctx context.Context, key string, n int) error {
	if err := checkRequest(ctx, key, n); err != nil {
		return err
	}
	if n > k.maxN {
		return capacityError(n, k.maxN)
	}
	return nil
}

// reserve fills in r, a zero Reservation, and returns it, for the
// Reserve method of each limiter. Those are small enough to inline, so
// that a caller that keeps its Reservation to itself allocates nothing.
func (k *keyed[S, A]) reserve(ctx context.Context, key string, n int, maxWait time.Duration, r *Reservation) (*Reservation, error) {
	if err := k.check(ctx, key, n); err != nil {
		return nil, err
	}
	e, now, err := k.lock(key)
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	r.key = key
	slot, notBefore := k.alg.earliest(&e.s, now, e.until, n)
	if wait := refusal(now, slot, decided(notBefore, e.until), maxWait); wait > 0 {
		r.Delay, r.Remaining = time.Duration(wait), k.alg.left(&e.s, now)
		return r, nil
	}
	r.OK, r.Delay = true, time.Duration(slot-now)
	r.Remaining = e.book(now, slot, n, &r.local.one)
	return r, nil
}

// refusal returns 0 when a booking at slot may be made at now, and
// otherwise how long until the same request would be accepted.
func refusal(now, slot, notBefore int64, maxWait time.Duration) int64 {
	wait := notBefore - now
	if maxWait >= 0 {
		wait = max(wait, slot-now-int64(maxWait))
	}
	return max(wait, 0)
}

// decided returns notBefore, or 0 when a key paused until until may book
// now. A pause shifted the key's schedule to its end, so a booking made
// during it is judged as of then: a leaky bucket's line, say, must not
// count the pause itself as units waiting.
func decided(notBefore, until int64) int64 {
	if notBefore <= until {
		return 0
	}
	return notBefore
}

// book records n units at slot in p, in place: p usually lies in a
// Reservation. It returns what is left of the budget. e.mu is held.
func (e *entry[S, A]) book(now, slot int64, n int, p *part) (remaining int) {
	e.seq++
	aux, left := e.lim.alg.book(&e.s, now, slot, n, e.seq, true)
	// Field by field: a composite literal is built on the stack and then
	// copied, and that copy stalls on reading back the stores just made.
	p.h = e
	p.m.slot, p.m.n, p.m.aux, p.m.seq, p.m.shiftAt = slot, n, aux, e.seq, e.moved()
	return left
}

// AllowN implements [Allower]: it takes n units only if they are
// available now, and allocates nothing.
func (k *keyed[S, A]) AllowN(ctx context.Context, key string, n int) (bool, error) {
	if err := k.check(ctx, key, n); err != nil {
		return false, err
	}
	e, now, err := k.lock(key)
	if err != nil {
		return false, err
	}
	defer e.mu.Unlock()
	slot, notBefore := k.alg.earliest(&e.s, now, e.until, n)
	if slot > now || notBefore > now {
		return false, nil
	}
	e.seq++
	k.alg.book(&e.s, now, slot, n, e.seq, false)
	return true, nil
}

// Pause implements [Pauser]: every slot of key still in the future, and
// every new booking, moves later, so that nothing is due for d from now.
func (k *keyed[S, A]) Pause(ctx context.Context, key string, d time.Duration) error {
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
	end := now + min(int64(d), maxSpan)
	if end <= e.until {
		return nil // pauses do not compound
	}
	by := end - max(e.until, now)
	e.until = end
	if by > 0 {
		if e.shift == nil {
			e.shift = new(pauseShift)
		}
		p := e.shift
		p.before, p.paused = p.moved, now
		p.moved += by
	}
	k.alg.shift(&e.s, now, by)
	return nil
}

// wait implements handle.
func (e *entry[S, A]) wait(m mark) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return time.Duration(e.slotOf(&m) - e.tick())
}

// slotOf returns m's slot as pauses have moved it. A mark that was
// already due when the latest pause began keeps the slot it had then:
// its caller may simply not have woken yet, and the algorithms counted
// its units where they were. e.mu is held.
func (e *entry[S, A]) slotOf(m *mark) int64 {
	p := e.shift
	if p == nil {
		return m.slot // never paused, so never moved
	}
	if m.shiftAt <= p.before {
		if slot := m.slot + p.before - m.shiftAt; slot <= p.paused {
			return slot
		}
	}
	return e.lim.alg.due(&e.s, m, m.slot+p.moved-m.shiftAt)
}

// give implements handle.
func (e *entry[S, A]) give(m mark) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isDead() {
		return
	}
	b := m
	b.slot = e.slotOf(&m)
	delta := b.slot - m.slot
	now := e.tick()
	if b.slot < now {
		return // the units have been used
	}
	latest := m.seq == e.seq
	e.lim.alg.give(&e.s, now, b, delta, latest)
	if latest {
		e.seq-- // gone in full, so the booking before it is the latest now
	}
}

func capacityError(n, most int) error {
	return fmt.Errorf("%w: n is %d, at most %d fit", ErrExceedsCapacity, n, most)
}

// The methods below let All book this limiter together with others.

func (k *keyed[S, A]) order() uint64 { return k.id }

func (k *keyed[S, A]) capacity() int { return k.maxN }

func (k *keyed[S, A]) lockKey(key string) (locked, error) {
	e, now, err := k.lock(key)
	if err != nil {
		return nil, err
	}
	return &lockedEntry[S, A]{e: e, at: now}, nil
}

type lockedEntry[S any, A algorithm[S]] struct {
	e  *entry[S, A]
	at int64
}

func (l *lockedEntry[S, A]) now() int64 { return l.at }

func (l *lockedEntry[S, A]) earliest(from int64, n int) (int64, int64) {
	slot, notBefore := l.e.lim.alg.earliest(&l.e.s, l.at, max(from, l.e.until), n)
	return slot, decided(notBefore, l.e.until)
}

func (l *lockedEntry[S, A]) book(slot int64, n int, p *part) int {
	return l.e.book(l.at, slot, n, p)
}

func (l *lockedEntry[S, A]) left() int { return l.e.lim.alg.left(&l.e.s, l.at) }

func (l *lockedEntry[S, A]) unlock() { l.e.mu.Unlock() }
