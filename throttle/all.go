package throttle

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/egress-go/egress/internal/nilcheck"
)

// builtin is implemented by the limiters of this package, so that All
// can lock several of them and book one common slot atomically.
type builtin interface {
	engine() keyLocker
}

// keyLocker is a built-in limiter's engine, as All sees it.
type keyLocker interface {
	order() uint64 // a fixed lock order, to avoid deadlock
	capacity() int
	lockKey(key string) (lockedKey, error)
}

// lockedKey is one key of one built-in limiter, locked by All.
type lockedKey interface {
	now() int64
	earliest(from int64, n int) (slot int64)
	book(slot int64, n int, c *claim) (remaining int)
	// mark fills c as a claim of nothing at slot.
	mark(slot int64, c *claim)
	left() int
	pushed() []aheadEntry
	raise(units []aheadEntry)
	unlock()
}

var errEmptyAll = errors.New("throttle: All has no limiters")

// all is the Limiter returned by All.
type all struct {
	ls []Limiter
	// pausing keeps a reservation from booking while a pause has moved
	// some parts and not yet the others: booked at the common slot of a
	// part already moved, a part moved after would move its units a
	// second time. A reservation took a whole pause more than it should
	// so (a second against throttled's GCRA: refill_test's 4 callers,
	// once a CI run).
	pausing sync.RWMutex
	// stripes serialize, per key, the reservations whose foreign parts
	// are all records of what the upstream states ([Upstream], held in
	// memory): booked between another caller's record part and its
	// built-in parts, a caller's slot on the record could be refused by
	// a bucket that had since booked later slots, and its record
	// booking, cancelled while not the latest, left a slot unused
	// (TestAllKeepsTheRecordsSlots; a hostile upstream's hold ran a
	// spacing past MaxPause so, once in a few hundred runs of
	// TestAcceptanceHostileUpstream).
	stripes [64]sync.Mutex
	seed    maphash.Seed
}

// maxRounds bounds how often All books its parts outside this package
// again before it gives up on one common slot.
const maxRounds = 32

// All returns a Limiter that grants units only when every one of ls
// grants them, at one common slot: the earliest time at which every part
// can admit them. No part is booked earlier than the rest, so 10/s
// together with 10 000/day never releases a herd when the day turns.
//
// For the limiters of this package, and Route over them, the booking is
// atomic: the parts' state for the key is locked in a fixed order, and a
// part that refuses leaves the others untouched.
//
// A part from outside this package that implements [Deferrer] (the
// limiters of redislimit do) is booked with ReserveAfter at the common
// delay. When a part can only go later, the delay is raised to its slot,
// and the parts booked at the old delay are cancelled and booked again,
// until every part agrees; so each part's own bound (a bucket's spacing)
// holds for the units as they are sent. This is not atomic: another
// caller may book between two rounds, and a re-booking moves the units
// to a later slot but never earlier. The delay is counted from each
// part's own call, so the parts' slots may differ by the time the calls
// took. Parts that still disagree after 32 rounds make Reserve fail.
//
// A part outside this package without ReserveAfter is best effort: it is
// booked once, with Reserve, at the earliest slot it has. If that is
// later than the other parts allow, the delay is raised to it; if it is
// earlier, the units stay booked there while they are sent at the later
// common slot, so that limiter counts them earlier than they go: its
// bound holds for its bookings, not for the sends, and a bucket behind
// it may see them closer together than its spacing.
//
// A part that refuses, or fails, makes All refuse, or fail, and every
// part booked is cancelled; a part that holds ([Reservation.Held]) makes
// All hold, with nothing booked. Reserve on an empty All returns an
// error.
//
// The returned Limiter also implements [PartsReserver], a cost of its own
// for each of ls, [Pauser], pausing every part that can be paused,
// [Allower], [Deferrer] and [Inspector]. All panics if a Limiter is nil,
// or a nil pointer (a nil *TokenBucket).
func All(ls ...Limiter) Limiter {
	for i, l := range ls {
		if nilcheck.Is(l) {
			panic(fmt.Sprintf("throttle: All given a nil Limiter (argument %d, %T)", i, l))
		}
	}
	return &all{ls: slices.Clone(ls), seed: maphash.MakeSeed()}
}

// ownPart is a built-in limiter among All's parts, with the units it
// takes and the parts (All's arguments) it stands for.
type ownPart struct {
	l     keyLocker
	n     int
	parts []int
}

// foreignPart is a limiter from outside this package among All's parts.
type foreignPart struct {
	l    Limiter
	n    int
	part int
}

// resolve flattens nested Alls and Routes for key into built-in parts
// and foreign ones, each taking n units for part.
func resolve(ls []Limiter, key string, n, part int, own []ownPart, foreign []foreignPart) ([]ownPart, []foreignPart, error) {
	for _, l := range ls {
		switch l := l.(type) {
		case *all:
			var err error
			if own, foreign, err = resolve(l.ls, key, n, part, own, foreign); err != nil {
				return nil, nil, err
			}
		case *router:
			picked, err := l.route(key)
			if err != nil {
				return nil, nil, err
			}
			if own, foreign, err = resolve([]Limiter{picked}, key, n, part, own, foreign); err != nil {
				return nil, nil, err
			}
		case builtin:
			p := ownPart{l: l.engine(), n: n}
			if part >= 0 {
				p.parts = []int{part} // only ReserveParts settles per part
			}
			own = append(own, p)
		default:
			foreign = append(foreign, foreignPart{l: l, n: n, part: part})
		}
	}
	return own, foreign, nil
}

// parts returns the built-in parts for key, sorted by lock order without
// repeats, and the foreign ones. costs holds one cost per argument of
// All, or is nil for n on every part. A built-in limiter found in several
// parts takes the largest of their costs.
func (a *all) parts(key string, n int, costs []int) ([]ownPart, []foreignPart, error) {
	var own []ownPart
	var foreign []foreignPart
	var err error
	if costs == nil {
		own, foreign, err = resolve(a.ls, key, n, -1, nil, nil)
	}
	for i := range costs {
		if own, foreign, err = resolve(a.ls[i:i+1], key, costs[i], i, own, foreign); err != nil {
			break
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if len(own) == 0 && len(foreign) == 0 {
		return nil, nil, errEmptyAll
	}
	slices.SortStableFunc(own, func(x, y ownPart) int { return compare(x.l.order(), y.l.order()) })
	merged := own[:0]
	for _, p := range own {
		if k := len(merged) - 1; k >= 0 && merged[k].l.order() == p.l.order() {
			merged[k].n = max(merged[k].n, p.n)
			merged[k].parts = append(merged[k].parts, p.parts...)
			continue
		}
		merged = append(merged, p)
	}
	return merged, foreign, nil
}

// partError names, when All books a cost per part, the part whose cost
// err is about: the argument whose cost is p's units.
func partError(p ownPart, costs []int, err error) error {
	for _, i := range p.parts {
		if i >= 0 && i < len(costs) && costs[i] == p.n {
			return fmt.Errorf("throttle: All's part %d: %w", i, err)
		}
	}
	return err
}

func compare(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// Reserve implements [Limiter].
func (a *all) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*Reservation, error) {
	return a.ReserveAfter(ctx, key, n, 0, maxWait)
}

// ReserveAfter implements [Deferrer].
func (a *all) ReserveAfter(ctx context.Context, key string, n int, after, maxWait time.Duration) (*Reservation, error) {
	if err := checkRequest(ctx, key, n); err != nil {
		return nil, err
	}
	return a.reserve(ctx, key, n, nil, after, maxWait)
}

// ReserveParts implements [PartsReserver]: costs[i] units of All's i-th
// argument, every part at one common slot.
func (a *all) ReserveParts(ctx context.Context, key string, costs []int, maxWait time.Duration) (*Reservation, error) {
	if err := checkCosts(ctx, key, costs, len(a.ls)); err != nil {
		return nil, err
	}
	return a.reserve(ctx, key, 0, costs, 0, maxWait)
}

// ReservePartsAfter implements [PartsDeferrer]: ReserveParts with the
// common slot no earlier than after from now.
func (a *all) ReservePartsAfter(ctx context.Context, key string, costs []int, after, maxWait time.Duration) (*Reservation, error) {
	if err := checkCosts(ctx, key, costs, len(a.ls)); err != nil {
		return nil, err
	}
	return a.reserve(ctx, key, 0, costs, after, maxWait)
}

// checkCosts validates the arguments of ReserveParts for a limiter of
// parts parts.
func checkCosts(ctx context.Context, key string, costs []int, parts int) error {
	if err := checkRequest(ctx, key, 1); err != nil {
		return err
	}
	if len(costs) != parts {
		return fmt.Errorf("throttle: ReserveParts needs %d costs, one per part, got %d", parts, len(costs))
	}
	total := 0
	for i, c := range costs {
		if c < 0 {
			return fmt.Errorf("throttle: ReserveParts' cost of part %d must not be negative, got %d", i, c)
		}
		total += c
	}
	if total == 0 {
		return fmt.Errorf("throttle: ReserveParts needs a positive cost on some part, got %v", costs)
	}
	return nil
}

// reserve books n units on every part, or costs[i] on the parts of
// argument i when costs is not nil.
func (a *all) reserve(ctx context.Context, key string, n int, costs []int, after, maxWait time.Duration) (*Reservation, error) {
	own, foreign, err := a.parts(key, n, costs)
	if err != nil {
		return nil, err
	}
	for _, p := range own {
		if p.n > p.l.capacity() {
			return nil, partError(p, costs, capacityError(p.n, p.l.capacity()))
		}
	}
	delay := min(max(after, 0), maxSpan)
	booked := make([]*Reservation, len(foreign))
	a.pausing.RLock()
	defer a.pausing.RUnlock()
	if mu := a.stripe(key, own, foreign); mu != nil {
		mu.Lock()
		defer mu.Unlock()
	}
	for range maxRounds {
		var no *Reservation
		delay, no, err = bookForeign(ctx, foreign, booked, key, delay, maxWait, len(own)+len(foreign) > 1)
		if err != nil || no != nil {
			cancelAll(ctx, booked)
			return no, err
		}
		r, agreed, err := bookTogether(own, len(foreign) > 0, key, delay, maxWait)
		if err != nil || !r.OK {
			cancelAll(ctx, booked)
			return r, err
		}
		if !agreed {
			delay = r.Delay // the built-in parts can only go later: book the others again
			continue
		}
		b := r.booking.(*allBooking)
		b.nparts = len(costs)
		for i, fr := range booked {
			if fr == nil {
				continue // a part given cost 0
			}
			b.foreign = append(b.foreign, fr)
			b.foreignPart = append(b.foreignPart, foreign[i].part)
			r.Remaining = minRemaining(r.Remaining, fr.Remaining)
		}
		r.Remaining = max(r.Remaining, 0)
		return r, nil
	}
	cancelAll(ctx, booked)
	return nil, fmt.Errorf("throttle: All found no common slot for key %q in %d rounds", key, maxRounds)
}

// stripe returns the lock that serializes key's reservations when they
// book built-in parts beside foreign parts that are all in-memory
// records, or nil: a foreign part that may do I/O (Redis) is not booked
// under a lock other keys share.
func (a *all) stripe(key string, own []ownPart, foreign []foreignPart) *sync.Mutex {
	if len(own) == 0 || len(foreign) == 0 {
		return nil
	}
	for _, p := range foreign {
		if _, ok := p.l.(*Upstream); !ok {
			return nil
		}
	}
	return &a.stripes[maphash.String(a.seed, key)%uint64(len(a.stripes))]
}

// bookForeign books every foreign part (those in booked[i] already
// booked at delay are kept) at delay or later, raising delay until every
// part agrees. It returns the final delay, or a refusal after which the
// caller cancels what booked holds. A part of cost 0 is not booked.
// paced says that other parts pace the key: an [Upstream] then leaves a
// bucket whose rate it does not know to them (see unpaced.go).
func bookForeign(ctx context.Context, ls []foreignPart, booked []*Reservation, key string, delay, maxWait time.Duration, paced bool) (time.Duration, *Reservation, error) {
	for round, settled := 0, false; !settled; round++ {
		if round == maxRounds {
			return 0, nil, fmt.Errorf("throttle: All's parts found no common slot for key %q in %d rounds", key, maxRounds)
		}
		settled = true
		for i, p := range ls {
			if p.n == 0 {
				continue
			}
			l := p.l
			if r := booked[i]; r != nil {
				if _, fixed := l.(Deferrer); r.Delay >= delay || !fixed {
					continue // booked at the common delay, or as early as it can go
				}
				if err := cancel(ctx, r); err != nil {
					return 0, nil, err
				}
				booked[i] = nil
			}
			var r *Reservation
			var err error
			if u, ok := l.(*Upstream); ok {
				r, err = u.reserve(ctx, key, p.n, nil, delay, maxWait, true, paced)
			} else if d, ok := l.(Deferrer); ok {
				r, err = d.ReserveAfter(ctx, key, p.n, delay, maxWait)
			} else {
				r, err = l.Reserve(ctx, key, p.n, maxWait)
			}
			if err != nil {
				return 0, nil, err
			}
			if !r.OK {
				return 0, &Reservation{Delay: r.Delay, Remaining: r.Remaining, key: key, held: r.held}, nil // a hold holds every part
			}
			booked[i] = r
			if r.Delay > delay {
				delay, settled = min(r.Delay, maxSpan), false
			}
		}
	}
	return delay, nil, nil
}

func cancel(ctx context.Context, r *Reservation) error {
	ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), CancelTimeout)
	defer stop()
	return r.Cancel(ctx)
}

func cancelAll(ctx context.Context, rs []*Reservation) {
	for _, r := range rs {
		if r != nil {
			_ = cancel(ctx, r)
		}
	}
}

// bookTogether locks every built-in part and books them all at one
// common slot, at least delay from now, or refuses leaving them all
// untouched. agreed is false, and nothing is booked, when the common slot
// lies later than delay and there are others parts to move to it. A part
// of cost 0 does not constrain the slot and books nothing; its claim
// only marks the slot, for Settle.
func bookTogether(own []ownPart, others bool, key string, delay, maxWait time.Duration) (r *Reservation, agreed bool, err error) {
	held, err := lockParts(own, key)
	defer unlockParts(held)
	if err != nil {
		return nil, false, err
	}
	// Every part is monotone (a slot that fits keeps fitting later), so
	// raising the common delay to each part's earliest converges.
	common := int64(delay)
	for changed := true; changed; {
		changed = false
		for i, l := range held {
			if own[i].n == 0 {
				continue
			}
			if slot := l.earliest(l.now()+common, own[i].n); slot-l.now() > common {
				common, changed = slot-l.now(), true
			}
		}
	}
	if wait := pastMaxWait(common, maxWait); wait > 0 {
		left := -1
		for _, l := range held {
			left = minRemaining(left, l.left())
		}
		return &Reservation{Delay: time.Duration(wait), Remaining: max(left, 0), key: key}, false, nil
	}
	r = &Reservation{OK: true, Delay: time.Duration(common), Remaining: -1, key: key}
	if common > int64(delay) && others {
		return r, false, nil // the other parts must move to common first
	}
	b := &allBooking{claims: make([]claim, len(held)), claimParts: make([][]int, len(held))}
	for i, l := range held {
		b.claimParts[i] = own[i].parts
		if own[i].n == 0 {
			l.mark(l.now()+common, &b.claims[i])
			continue
		}
		r.Remaining = minRemaining(r.Remaining, l.book(l.now()+common, own[i].n, &b.claims[i]))
	}
	r.booking = b
	return r, true, nil
}

func minRemaining(a, b int) int {
	if a < 0 {
		return b
	}
	return min(a, b)
}

// AllowN implements [Allower].
func (a *all) AllowN(ctx context.Context, key string, n int) (bool, error) {
	r, err := a.Reserve(ctx, key, n, 0)
	if err != nil {
		return false, err
	}
	return r.OK, nil
}

// Pause implements [Pauser]: it pauses every part that can be paused.
// Reservations through All wait while it does, so that none books
// between two parts' pauses.
// A fixed window may then move units further than the other parts (into
// its next window): the buckets among the parts of this package learn
// where they are due, and space what follows from them.
func (a *all) Pause(ctx context.Context, key string, d time.Duration) error {
	a.pausing.Lock()
	defer a.pausing.Unlock()
	var errs []error
	a.each(key, func(l Limiter) {
		if p, ok := l.(Pauser); ok {
			errs = append(errs, p.Pause(ctx, key, d))
		}
	}, &errs)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	own, _, err := a.parts(key, 1, nil)
	if err != nil || len(own) < 2 {
		return err
	}
	held, err := lockParts(own, key)
	defer unlockParts(held)
	if err != nil {
		return err
	}
	for _, from := range held {
		if units := from.pushed(); len(units) > 0 {
			for _, to := range held {
				to.raise(units)
			}
		}
	}
	return nil
}

// Inspect implements [Inspector]: the tightest of the parts that can be
// inspected. Parts that cannot are left out.
func (a *all) Inspect(ctx context.Context, key string) (KeyState, error) {
	st := KeyState{Key: key, Remaining: -1}
	var errs []error
	a.each(key, func(l Limiter) {
		in, ok := l.(Inspector)
		if !ok {
			return
		}
		s, err := in.Inspect(ctx, key)
		if err != nil {
			errs = append(errs, err)
			return
		}
		st.Remaining = minRemaining(st.Remaining, s.Remaining)
		st.Next, st.Ahead, st.Paused = max(st.Next, s.Next), max(st.Ahead, s.Ahead), max(st.Paused, s.Paused)
	}, &errs)
	st.Remaining = max(st.Remaining, 0)
	return st, errors.Join(errs...)
}

// each calls f on every leaf limiter of a for key, Routes resolved.
func (a *all) each(key string, f func(Limiter), errs *[]error) {
	for _, l := range a.ls {
		switch l := l.(type) {
		case *all:
			l.each(key, f, errs)
		case *router:
			picked, err := l.route(key)
			if err != nil {
				*errs = append(*errs, err)
				continue
			}
			(&all{ls: []Limiter{picked}}).each(key, f, errs)
		default:
			f(l)
		}
	}
}

// lockParts locks key on every part, in order. On an error it returns
// the keys it did lock, for unlockParts.
func lockParts(own []ownPart, key string) ([]lockedKey, error) {
	held := make([]lockedKey, 0, len(own))
	for _, p := range own {
		l, err := p.l.lockKey(key)
		if err != nil {
			return held, err
		}
		held = append(held, l)
	}
	return held, nil
}

// unlockParts unlocks what lockParts locked.
func unlockParts(held []lockedKey) {
	for _, l := range held {
		l.unlock()
	}
}
