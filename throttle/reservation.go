package throttle

import (
	"context"
	"sync/atomic"
	"time"
)

// Booking is a limiter's handle on the units behind one OK [Reservation].
// Limiters outside this package implement it and wrap it with
// [NewReservation], so that [Reservation.Wait] and [Reservation.Cancel]
// work the same for every limiter.
type Booking interface {
	// Until returns how long from now until the units are the caller's.
	// It follows any pause the limiter has learned of since the booking,
	// so it may grow. It must not do I/O: Wait calls it each time it wakes.
	Until() time.Duration

	// Cancel gives back as much of the booking as can be given back
	// without letting any interval exceed the limiter's bound. It is
	// called at most once, with a context that is not cancelled.
	Cancel(ctx context.Context) error
}

// NewReservation returns an OK Reservation for units held by b: they are
// the caller's after delay, and remaining units of the budget are left
// once they are taken.
func NewReservation(b Booking, delay time.Duration, remaining int) *Reservation {
	return &Reservation{OK: true, Delay: delay, Remaining: remaining, booking: b}
}

// Refused returns a Reservation that is not OK: nothing was taken, and the
// same request would succeed after retryAfter.
func Refused(retryAfter time.Duration, remaining int) *Reservation {
	return &Reservation{Delay: max(retryAfter, 0), Remaining: remaining}
}

// CancelTimeout bounds the Cancel that Wait issues after its caller's
// context has ended.
const CancelTimeout = time.Second

// Reservation is a caller's claim on units of a budget. It is returned by
// [Limiter.Reserve]; the zero value is a refused reservation.
//
// Most callers call Wait and then act. A Reservation is safe for
// concurrent use, but belongs to one caller.
type Reservation struct {
	// OK reports whether the units were booked.
	OK bool
	// Delay is how long from the time of Reserve until the units are the
	// caller's when OK, or until the same call would succeed when not.
	Delay time.Duration
	// Remaining is how many units of the budget are left once these are
	// taken (when OK) or right now (when not). Limiters that cannot say
	// report 0.
	Remaining int

	key     string      // for errors; empty for limiters outside this package
	booking Booking     // nil when refused
	done    atomic.Bool // set once Cancel has run or Wait has returned the units
}

// Wait sleeps until the units are the caller's, following any pause of
// the key learned while it sleeps. It never sleeps just to fail: if the
// slot lies past ctx's deadline, the reservation is cancelled and a
// *[LimitError] with Timeout true is returned. If ctx ends while it
// sleeps, the reservation is cancelled and ctx's error is returned.
func (r *Reservation) Wait(ctx context.Context) error {
	return r.wait(ctx, r.key)
}

// wait is Wait, naming key in its errors: package Wait knows the key of
// a Reservation from a limiter outside this package.
func (r *Reservation) wait(ctx context.Context, key string) error {
	if ctx == nil {
		return errNilContext
	}
	if !r.OK {
		return &LimitError{Key: key, RetryAfter: r.Delay}
	}
	if r.booking == nil {
		return ctx.Err()
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		d := r.booking.Until()
		if d <= 0 {
			r.done.Store(true) // the slot is the caller's: nothing to give back
			return nil
		}
		if left, ok := timeLeft(ctx); ok && left < d {
			r.cancelDetached(ctx)
			return &LimitError{Key: key, RetryAfter: d - left, Deadline: true}
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			r.cancelDetached(ctx)
			return ctx.Err()
		}
	}
}

// cancelDetached cancels under a context that outlives ctx, since ctx has
// usually just ended when this runs.
func (r *Reservation) cancelDetached(ctx context.Context) {
	ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), CancelTimeout)
	defer stop()
	_ = r.Cancel(ctx)
}

// Cancel gives back the units, as far as that is safe. If this
// reservation is the key's latest booking, everything comes back;
// otherwise only as much as keeps every interval within the limiter's
// bound, which may be nothing. Once the slot has passed, or Wait has
// returned nil, it does nothing. Cancel is idempotent, and a no-op on a
// refused reservation.
func (r *Reservation) Cancel(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	if !r.OK || r.booking == nil || !r.done.CompareAndSwap(false, true) {
		return nil
	}
	return r.booking.Cancel(ctx)
}

// holder is a key's state as seen from a claim on it.
type holder interface {
	until(c *claim) time.Duration
	give(c *claim)
}

// claim is the Booking of the built-in limiters: n units of one key of
// one limiter, booked at slot.
type claim struct {
	key     holder
	slot    int64  // when the units are the caller's, before any later pause
	n       int    // units booked
	undo    int64  // the algorithm's note for give
	seq     uint64 // the key's booking count when this was made
	shifted int64  // the key's pauseState.shifted when this was made
}

// Until implements [Booking].
func (c *claim) Until() time.Duration { return c.key.until(c) }

// Cancel implements [Booking].
func (c *claim) Cancel(context.Context) error {
	c.key.give(c)
	return nil
}

// allBooking is the Booking of [All]: claims on the built-in parts, all at
// one slot, and reservations from the parts outside this package.
type allBooking struct {
	claims  []claim
	foreign []*Reservation
}

// Until implements [Booking]: the longest wait among the parts.
func (b *allBooking) Until() time.Duration {
	var d time.Duration
	for i := range b.claims {
		d = max(d, b.claims[i].Until())
	}
	for _, r := range b.foreign {
		if r.booking != nil {
			d = max(d, r.booking.Until())
		}
	}
	return d
}

// Cancel implements [Booking]: it gives back every part, and returns the
// first error from a part outside this package.
func (b *allBooking) Cancel(ctx context.Context) error {
	for i := range b.claims {
		b.claims[i].key.give(&b.claims[i])
	}
	var first error
	for _, r := range b.foreign {
		if err := r.Cancel(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}
