package egress

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/egress-go/egress/throttle"
)

// throttlePkg is the import path of package throttle, whose limiters keep
// the Limiter contract and go into throttle.All as they are, so that its
// built-in parts book atomically.
var throttlePkg = reflect.TypeFor[throttle.Upstream]().PkgPath()

// guarded returns l ready for throttle.All: a limiter from package
// throttle as it is, any other wrapped so that a nil reservation with a
// nil error (a broken contract) fails the request instead of panicking
// inside All.
func guarded(l throttle.Limiter) throttle.Limiter {
	t := reflect.TypeOf(l)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.PkgPath() == throttlePkg {
		return l
	}
	return guard{l}
}

// guard is a limiter from outside package throttle, checked. Its
// optional methods do what l's do, or what All does for a limiter that
// lacks them.
type guard struct{ l throttle.Limiter }

func (g guard) check(r *throttle.Reservation, err error) (*throttle.Reservation, error) {
	if r == nil && err == nil {
		return nil, errNilReservation
	}
	return r, err
}

// Reserve implements [throttle.Limiter].
func (g guard) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*throttle.Reservation, error) {
	return g.check(g.l.Reserve(ctx, key, n, maxWait))
}

// ReserveAfter implements [throttle.Deferrer]; without it, l books as
// early as it can.
func (g guard) ReserveAfter(ctx context.Context, key string, n int, after, maxWait time.Duration) (*throttle.Reservation, error) {
	if d, ok := g.l.(throttle.Deferrer); ok {
		return g.check(d.ReserveAfter(ctx, key, n, after, maxWait))
	}
	return g.Reserve(ctx, key, n, maxWait)
}

// Pause implements [throttle.Pauser]; a limiter that cannot pause ignores it.
func (g guard) Pause(ctx context.Context, key string, d time.Duration) error {
	if p, ok := g.l.(throttle.Pauser); ok {
		return p.Pause(ctx, key, d)
	}
	return nil
}

// Inspect implements [throttle.Inspector].
func (g guard) Inspect(ctx context.Context, key string) (throttle.KeyState, error) {
	if i, ok := g.l.(throttle.Inspector); ok {
		return i.Inspect(ctx, key)
	}
	return throttle.KeyState{Key: key}, fmt.Errorf("%w: %T", ErrNoInspector, g.l)
}
