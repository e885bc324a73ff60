package throttle

import (
	"context"
	"fmt"
	"time"

	"github.com/egress-go/egress/internal/nilcheck"
)

// router is the Limiter returned by Route.
type router struct {
	pick func(key string) Limiter
}

// Route returns a Limiter that sends each key to the Limiter pick chooses
// for it: a different limit per key, as plan tiers need (free 100/day,
// pro 600/min, enterprise 50/s). pick must be safe for concurrent use and
// should return the same Limiter for a key each time; when it returns nil
// (or a nil pointer), Reserve fails. Route panics if pick is nil.
//
// The returned Limiter also implements [Pauser], [Allower], [Deferrer],
// [PartsReserver] and [Inspector], passing them to the picked Limiter when it has them. Inside [All], a Route over
// this package's limiters is booked atomically with the other parts.
func Route(pick func(key string) Limiter) Limiter {
	if pick == nil {
		panic("throttle: Route given a nil pick func")
	}
	return &router{pick: pick}
}

func (r *router) route(key string) (Limiter, error) {
	l := r.pick(key)
	if nilcheck.Is(l) {
		return nil, fmt.Errorf("throttle: Route picked no Limiter for key %q", key)
	}
	return l, nil
}

// Reserve implements [Limiter].
func (r *router) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*Reservation, error) {
	l, err := r.route(key)
	if err != nil {
		return nil, err
	}
	return l.Reserve(ctx, key, n, maxWait)
}

// AllowN implements [Allower].
func (r *router) AllowN(ctx context.Context, key string, n int) (bool, error) {
	l, err := r.route(key)
	if err != nil {
		return false, err
	}
	return Allow(ctx, l, key, n)
}

// Pause implements [Pauser]. Pausing a key whose Limiter cannot be paused
// does nothing.
func (r *router) Pause(ctx context.Context, key string, d time.Duration) error {
	l, err := r.route(key)
	if err != nil {
		return err
	}
	if p, ok := l.(Pauser); ok {
		return p.Pause(ctx, key, d)
	}
	return nil
}

// ReserveAfter implements [Deferrer]. When the picked Limiter has no
// ReserveAfter, it is booked with Reserve, with the slot no later than
// it gives: best effort, as in [All].
func (r *router) ReserveAfter(ctx context.Context, key string, n int, after, maxWait time.Duration) (*Reservation, error) {
	l, err := r.route(key)
	if err != nil {
		return nil, err
	}
	if d, ok := l.(Deferrer); ok {
		return d.ReserveAfter(ctx, key, n, after, maxWait)
	}
	return l.Reserve(ctx, key, n, maxWait)
}

// ReserveParts implements [PartsReserver] when the picked Limiter does.
// A picked Limiter without it takes a single cost through Reserve, and
// refuses more than one with an error.
func (r *router) ReserveParts(ctx context.Context, key string, costs []int, maxWait time.Duration) (*Reservation, error) {
	l, err := r.route(key)
	if err != nil {
		return nil, err
	}
	if p, ok := l.(PartsReserver); ok {
		return p.ReserveParts(ctx, key, costs, maxWait)
	}
	if len(costs) != 1 {
		return nil, fmt.Errorf("throttle: the Limiter Route picked for key %q has one part, got %d costs", key, len(costs))
	}
	return l.Reserve(ctx, key, costs[0], maxWait)
}

// ReservePartsAfter implements [PartsDeferrer] when the picked Limiter
// does. A picked Limiter that is only a PartsReserver books its parts
// with ReserveParts, with the slot no later than it gives: best effort,
// as ReserveAfter is; one without parts takes a single cost through
// ReserveAfter.
func (r *router) ReservePartsAfter(ctx context.Context, key string, costs []int, after, maxWait time.Duration) (*Reservation, error) {
	l, err := r.route(key)
	if err != nil {
		return nil, err
	}
	switch p := l.(type) {
	case PartsDeferrer:
		return p.ReservePartsAfter(ctx, key, costs, after, maxWait)
	case PartsReserver:
		return p.ReserveParts(ctx, key, costs, maxWait)
	}
	if len(costs) != 1 {
		return nil, fmt.Errorf("throttle: the Limiter Route picked for key %q has one part, got %d costs", key, len(costs))
	}
	return r.ReserveAfter(ctx, key, costs[0], after, maxWait)
}

// Inspect implements [Inspector]. A key whose Limiter cannot be inspected
// reports an error.
func (r *router) Inspect(ctx context.Context, key string) (KeyState, error) {
	l, err := r.route(key)
	if err != nil {
		return KeyState{}, err
	}
	if in, ok := l.(Inspector); ok {
		return in.Inspect(ctx, key)
	}
	return KeyState{}, fmt.Errorf("throttle: the Limiter Route picked for key %q cannot be inspected", key)
}
