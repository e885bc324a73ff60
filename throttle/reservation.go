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

	key     string       // for errors; empty for limiters outside this package
	booking Booking      // set by limiters outside this package
	local   localBooking // the booking of the built-in limiters
	done    atomic.Bool  // set once Cancel has run or Wait has returned the units
}

// The methods below reach the booking without r ever holding a pointer
// to itself, which would force every Reservation onto the heap: the
// built-in limiters' Reserve is small enough to inline, so a caller that
// keeps its Reservation local allocates nothing.

// held reports whether r holds units that Wait and Cancel must deal with.
func (r *Reservation) held() bool {
	return r.booking != nil || r.local.one.h != nil || r.local.more != nil
}

func (r *Reservation) until() time.Duration {
	if r.booking != nil {
		return r.booking.Until()
	}
	return r.local.Until()
}

func (r *Reservation) release(ctx context.Context) error {
	if r.booking != nil {
		return r.booking.Cancel(ctx)
	}
	return r.local.Cancel(ctx)
}

// Wait sleeps until the units are the caller's, following any pause of
// the key learned while it sleeps. It never sleeps just to fail: if the
// slot lies past ctx's deadline, the reservation is cancelled and a
// *[LimitError] with Timeout true is returned. If ctx ends while it
// sleeps, the reservation is cancelled and ctx's error is returned.
func (r *Reservation) Wait(ctx context.Context) error {
	return r.wait(ctx, r.key)
}

func (r *Reservation) wait(ctx context.Context, key string) error {
	if ctx == nil {
		return errNilContext
	}
	if !r.OK {
		return &LimitError{Key: key, RetryAfter: r.Delay}
	}
	if !r.held() {
		return ctx.Err()
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		d := r.until()
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
	if !r.OK || !r.held() || !r.done.CompareAndSwap(false, true) {
		return nil
	}
	return r.release(ctx)
}
