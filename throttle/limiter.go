package throttle

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Limiter hands out units of a per-key budget as reservations.
//
// Reserve takes n units of key's budget, now or at a later slot. It never
// blocks. maxWait bounds how far in the future the slot may lie: 0 means
// "only now", and a negative value means no bound.
//
// When the returned Reservation is OK, the units are the caller's after
// its Delay. When it is not OK, nothing was taken, and Delay is how long
// until the same call (same n and maxWait) would succeed if nobody else
// booked in between.
type Limiter interface {
	Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*Reservation, error)
}

// Pauser is implemented by limiters whose keys can be paused, as the
// upstream asks when it answers 429 with a Retry-After.
//
// Pause moves every slot of key that still lies in the future, and every
// new booking, later, so that nothing is sent for d from now. d is
// relative: a pause never depends on the caller's wall clock. A pause that
// ends no later than the current one changes nothing.
type Pauser interface {
	Pause(ctx context.Context, key string, d time.Duration) error
}

// Allower is the optional fast path behind [Allow]: a limiter that can
// answer "n units now, or not at all" without building a Reservation.
type Allower interface {
	AllowN(ctx context.Context, key string, n int) (bool, error)
}

// Wait takes n units of key's budget from l, sleeping until they are the
// caller's. It never sleeps just to fail: when the units cannot be had
// before ctx's deadline, it takes nothing and returns a *[LimitError]
// whose Timeout is true. If ctx ends during the sleep, the reservation is
// cancelled and ctx's error is returned.
//
// A hold ([Reservation.Held]) is waited out, and the units reserved
// again. Holds count against ctx's deadline: one that ends past it is
// not slept through. Without a deadline, Wait waits out holds for at
// most [DefaultMaxHold] in all, as long as a statement may hold a key
// back; then it returns a *LimitError whose Timeout is false. A limiter
// that never stops holding cannot keep Wait forever.
func Wait(ctx context.Context, l Limiter, key string, n int) error {
	if ctx == nil {
		return errNilContext
	}
	maxWait, bounded := waitBound(ctx)
	r, err := l.Reserve(ctx, key, n, maxWait)
	var held time.Duration
	for err == nil && r != nil && r.Held() {
		if bounded && r.Delay > maxWait || !bounded && held+r.Delay > DefaultMaxHold {
			return &LimitError{Key: key, RetryAfter: r.Delay, Deadline: bounded}
		}
		held += r.Delay
		if err = sleep(ctx, r.Delay); err == nil {
			maxWait, bounded = waitBound(ctx)
			r, err = l.Reserve(ctx, key, n, maxWait)
		}
	}
	if err != nil {
		return err
	}
	if r == nil {
		return fmt.Errorf("throttle: Wait for key %q: the limiter returned a nil Reservation and no error", key)
	}
	if !r.OK {
		return &LimitError{Key: key, RetryAfter: r.Delay, Deadline: bounded}
	}
	return r.wait(ctx, key)
}

// waitBound returns the maxWait for a Reserve made under ctx: the time
// left before its deadline, or -1 (no bound) without one.
func waitBound(ctx context.Context) (time.Duration, bool) {
	left, ok := timeLeft(ctx)
	if !ok {
		return -1, false
	}
	return left, true
}

// Allow reports whether n units of key's budget can be had from l now,
// and takes them if so. It uses l's [Allower] fast path when l has one.
func Allow(ctx context.Context, l Limiter, key string, n int) (bool, error) {
	if a, ok := l.(Allower); ok {
		return a.AllowN(ctx, key, n)
	}
	r, err := l.Reserve(ctx, key, n, 0)
	if err != nil {
		return false, err
	}
	return r.OK, nil
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// timeLeft returns how long remains before ctx's deadline, if it has one.
func timeLeft(ctx context.Context) (time.Duration, bool) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return max(time.Until(deadline), 0), true
}

// MaxKeyLen is the longest key a built-in limiter accepts.
const MaxKeyLen = 1024

var errNilContext = errors.New("throttle: nil context")

// checkRequest validates the arguments every Reserve shares.
func checkRequest(ctx context.Context, key string, n int) error {
	switch {
	case ctx == nil:
		return errNilContext
	case len(key) > MaxKeyLen:
		return fmt.Errorf("throttle: key of %d bytes is longer than MaxKeyLen (%d)", len(key), MaxKeyLen)
	case n <= 0:
		return fmt.Errorf("throttle: n must be positive, got %d", n)
	}
	return ctx.Err()
}
