package throttle

import (
	"context"
	"errors"
	"slices"
	"time"
)

// lockable is implemented by the built-in limiters, so that All can lock
// several of them and book one common slot atomically.
type lockable interface {
	order() uint64 // a fixed lock order, to avoid deadlock
	capacity() int
	lockKey(key string) (locked, error)
}

// locked is one key of one built-in limiter, locked by All.
type locked interface {
	now() int64
	earliest(from int64, n int) (slot, notBefore int64)
	book(slot int64, n int, p *part) (remaining int)
	left() int
	unlock()
}

var errEmptyAll = errors.New("throttle: All has no limiters")

// all is the Limiter returned by All.
type all struct {
	ls []Limiter
}

// All returns a Limiter that grants units only when every one of ls
// grants them, at one common slot: the earliest time at which every part
// can admit them. No part is booked earlier than the rest, so 10/s
// together with 10 000/day never releases a herd when the day turns.
//
// For the limiters of this package, and Route over them, the booking is
// atomic: the parts' state for the key is locked in a fixed order, and a
// part that refuses leaves the others untouched. Other limiters are
// reserved one by one first, and cancelled if a later part refuses; they
// may be booked earlier than the common slot, which is harmless for
// buckets and sliding windows but may let a fixed-window part see the
// units in a later window than it booked. Reserve on an empty All returns
// an error.
//
// The returned Limiter also implements [Pauser], pausing every part that
// can be paused, and [Allower].
func All(ls ...Limiter) Limiter {
	for _, l := range ls {
		if l == nil {
			panic("throttle: All given a nil Limiter")
		}
	}
	return &all{ls: slices.Clone(ls)}
}

// resolve flattens nested Alls and Routes for key into built-in parts
// (sorted by lock order, without repeats) and foreign ones.
func resolve(ls []Limiter, key string, own []lockable, foreign []Limiter) ([]lockable, []Limiter, error) {
	for _, l := range ls {
		switch l := l.(type) {
		case *all:
			var err error
			if own, foreign, err = resolve(l.ls, key, own, foreign); err != nil {
				return nil, nil, err
			}
		case *router:
			picked, err := l.route(key)
			if err != nil {
				return nil, nil, err
			}
			if own, foreign, err = resolve([]Limiter{picked}, key, own, foreign); err != nil {
				return nil, nil, err
			}
		case lockable:
			own = append(own, l)
		default:
			foreign = append(foreign, l)
		}
	}
	return own, foreign, nil
}

func (a *all) parts(key string) ([]lockable, []Limiter, error) {
	own, foreign, err := resolve(a.ls, key, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	if len(own) == 0 && len(foreign) == 0 {
		return nil, nil, errEmptyAll
	}
	slices.SortFunc(own, func(x, y lockable) int { return compare(x.order(), y.order()) })
	own = slices.CompactFunc(own, func(x, y lockable) bool { return x.order() == y.order() })
	return own, foreign, nil
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
	if err := checkRequest(ctx, key, n); err != nil {
		return nil, err
	}
	own, foreign, err := a.parts(key)
	if err != nil {
		return nil, err
	}
	for _, p := range own {
		if n > p.capacity() {
			return nil, capacityError(n, p.capacity())
		}
	}
	r := &Reservation{OK: true, Remaining: -1, key: key}
	ext, err := reserveForeign(ctx, foreign, key, n, maxWait, r)
	if err != nil || !r.OK {
		return r, err
	}
	if len(own) == 0 {
		r.local.more = &more{ext: ext}
		return r, nil
	}
	if err := bookTogether(ctx, own, key, n, maxWait, r); err != nil || !r.OK {
		cancelAll(ctx, ext)
		return r, err
	}
	if len(ext) > 0 {
		if r.local.more == nil {
			r.local.more = &more{}
		}
		r.local.ext = ext
	}
	return r, nil
}

// reserveForeign books limiters outside this package one by one, the
// best that can be done for them. It leaves r refused, having cancelled
// what it took, when one of them refuses.
func reserveForeign(ctx context.Context, ls []Limiter, key string, n int, maxWait time.Duration, r *Reservation) ([]*Reservation, error) {
	var got []*Reservation
	for _, l := range ls {
		fr, err := l.Reserve(ctx, key, n, maxWait)
		if err == nil && !fr.OK {
			*r = Reservation{Delay: fr.Delay, Remaining: fr.Remaining, key: key}
		}
		if err != nil || !fr.OK {
			cancelAll(ctx, got)
			return nil, err
		}
		got = append(got, fr)
		r.Delay = max(r.Delay, fr.Delay)
		r.Remaining = minRemaining(r.Remaining, fr.Remaining)
	}
	return got, nil
}

// bookTogether locks every built-in part and books them all at one
// common slot, at least r.Delay from now, or refuses r leaving them all
// untouched.
func bookTogether(ctx context.Context, own []lockable, key string, n int, maxWait time.Duration, r *Reservation) error {
	held := make([]locked, 0, len(own))
	defer func() {
		for _, l := range held {
			l.unlock()
		}
	}()
	for _, p := range own {
		l, err := p.lockKey(key)
		if err != nil {
			return err
		}
		held = append(held, l)
	}
	// Every part is monotone (a slot that fits keeps fitting later), so
	// raising the common delay to each part's earliest converges at once;
	// the loop only settles the parts a later raise affected.
	delay, notBefore := int64(r.Delay), int64(0)
	for changed := true; changed; {
		changed = false
		for _, l := range held {
			now := l.now()
			slot, nb := l.earliest(now+delay, n)
			notBefore = max(notBefore, nb-now)
			if slot-now > delay {
				delay, changed = slot-now, true
			}
		}
	}
	if wait := refusal(0, delay, notBefore, maxWait); wait > 0 {
		left := r.Remaining
		for _, l := range held {
			left = minRemaining(left, l.left())
		}
		*r = Reservation{Delay: time.Duration(wait), Remaining: max(left, 0), key: key}
		return nil
	}
	r.Delay = time.Duration(delay)
	if len(held) > 1 {
		if r.local.more == nil {
			r.local.more = &more{}
		}
		r.local.parts = make([]part, len(held)-1)
	}
	for i, l := range held {
		p := &r.local.one
		if i > 0 {
			p = &r.local.parts[i-1]
		}
		r.Remaining = minRemaining(r.Remaining, l.book(l.now()+delay, n, p))
	}
	return nil
}

func minRemaining(a, b int) int {
	if a < 0 {
		return b
	}
	return min(a, b)
}

func cancelAll(ctx context.Context, rs []*Reservation) {
	ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), CancelTimeout)
	defer stop()
	for _, r := range rs {
		_ = r.Cancel(ctx)
	}
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
func (a *all) Pause(ctx context.Context, key string, d time.Duration) error {
	own, foreign, err := a.parts(key)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range own {
		if p, ok := p.(Pauser); ok {
			errs = append(errs, p.Pause(ctx, key, d))
		}
	}
	for _, p := range foreign {
		if p, ok := p.(Pauser); ok {
			errs = append(errs, p.Pause(ctx, key, d))
		}
	}
	return errors.Join(errs...)
}
