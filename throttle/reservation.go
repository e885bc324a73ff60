package throttle

import (
	"context"
	"errors"
	"fmt"
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

// Settler is implemented by a [Booking] that can settle its units to
// what the call really cost (see [Reservation.Settle]). actual holds one
// value per part: one for a Reservation from Reserve, len(costs) for one
// from [PartsReserver.ReserveParts]. Reservation.Settle checks that
// there is at least one value and that none is negative, and calls it at
// most once; the Settler checks the count against its parts. A Settler
// that also has a method SettleParts() int, the count it takes, has the
// count checked before that one call, so that a wrong count changes
// nothing and the caller may settle again.
type Settler interface {
	Settle(ctx context.Context, actual []int) error
}

// ErrNoSettle reports that a reservation's [Booking], from a limiter
// outside this package, does not implement [Settler]: its units stay
// booked at the estimate.
var ErrNoSettle = errors.New("throttle: the limiter cannot settle this reservation")

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

// Hold returns a Reservation that took nothing and holds its caller back
// for d: the limiter cannot place the booking yet, and the same call made
// again after d may (see [Reservation.Held]).
func Hold(d time.Duration, remaining int) *Reservation {
	return &Reservation{Delay: max(d, 0), Remaining: remaining, held: true}
}

// Held reports whether r is a hold: not OK, nothing was taken, and the
// caller should make the same call again after Delay instead of giving
// up. The [Upstream] record holds a booking for a fraction of an answer's
// latency while answers that tell where it goes are on their way, and,
// booked alone, until a bucket that states no rate can have refilled;
// [All]
// passes a part's hold on, booking none of its parts. [Wait] and an
// egress Transport reserve again after the hold; a caller that does not
// know holds sees a refusal with a short Delay.
func (r *Reservation) Held() bool { return r.held }

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
	held    bool         // a hold: nothing taken, reserve again after Delay
	booking Booking      // nil when refused
	state   atomic.Int32 // open, then used, cancelled or settled (used may become settled)
}

// The states of a Reservation: Cancel acts only on an open one, Settle on
// an open or used one.
const (
	open      int32 = iota
	used            // Wait returned the units: nothing to give back
	cancelled       // Cancel gave the units back
	settled         // Settle ran
)

// Wait sleeps until the units are the caller's, following any pause of
// the key learned while it sleeps. On a bucket built [WithMoveUp], it
// also moves up when earlier bookings give units back. It never sleeps just to fail: if the
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
	if r.Delay <= 0 {
		// Due when booked: a pause moves only slots still ahead, so the
		// units are the caller's. No clock read, no timer (goal: ≤ 1µs
		// overhead per request with metrics attached, bench/micro).
		r.state.CompareAndSwap(open, used)
		return nil
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var w *waiter // set once the caller sleeps: its slot may move up (moveup.go)
	defer func() {
		if w != nil {
			w.unwatch()
		}
	}()
	var moved <-chan bool // nil (never receives) unless the booking can move
	for watched := false; ; {
		d := r.booking.Until()
		if d <= 0 {
			r.state.CompareAndSwap(open, used) // the slot is the caller's: nothing to give back
			return nil
		}
		if left, ok := timeLeft(ctx); ok && left < d {
			if w != nil {
				w.unwatch() // before Cancel: a moving up never books what is given back
			}
			r.cancelDetached(ctx)
			return &LimitError{Key: key, RetryAfter: d - left, Deadline: true}
		}
		if !watched {
			watched = true
			if w = watch(r); w != nil {
				moved = w.moved
				continue // the slot may have moved before it was watched
			}
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-moved: // earlier bookings gave units back: the slot moved up
		case <-ctx.Done():
			if w != nil {
				w.unwatch()
			}
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
	if !r.OK || r.booking == nil || !r.state.CompareAndSwap(open, cancelled) {
		return nil
	}
	return r.booking.Cancel(ctx)
}

// Settle tells the limiter what the call really cost, once it is known
// (usually after the response, long after the slot): one value for a
// Reservation from Reserve, which applies to every part of an [All], or
// one per part, in order, for one from [PartsReserver.ReserveParts].
//
// A part whose actual is smaller gives the difference back, as far as
// that keeps every interval within the limiter's bound given what was
// really used (the guarantee Cancel keeps); a larger one is charged the
// excess. Either way the units count at the booking's own slot and
// window, never at the time of the settle: a TokenBucket or LeakyBucket
// gives back in full while no booking after this one relies on the units
// (see [TokenBucket]); a FixedWindow or SlidingWindowCounter adjusts the
// booking's window while it is still counted, the current one (or the
// one before, for the counter), and a SlidingWindow adjusts its log at
// the slot.
//
// The first Settle wins: later calls do nothing and return nil, and so
// does Settle on a refused or cancelled reservation. After Settle, Cancel
// does nothing. A reservation never settled keeps its estimate.
//
// It returns an error, and changes nothing, when the number of values is
// wrong or one is negative. An actual larger than a part could ever
// admit at once is still charged, since the call has happened, and the
// error returned wraps [ErrExceedsCapacity]; a charge so large that the
// arithmetic would wrap around moves a bucket about 36 years on, or
// counts 2^40 units in a window. A Booking from outside this
// package that is not a [Settler] gives [ErrNoSettle].
func (r *Reservation) Settle(ctx context.Context, actual ...int) error {
	if ctx == nil {
		return errNilContext
	}
	if !r.OK || r.booking == nil {
		return nil
	}
	if p, ok := r.booking.(interface{ SettleParts() int }); ok && len(actual) != p.SettleParts() {
		// Checked here, not by the Settler once called: the call is
		// made once, and a wrong count must leave it to the next Settle.
		return fmt.Errorf("throttle: Settle needs %d actual costs, one per part, got %d", p.SettleParts(), len(actual))
	}
	if len(actual) == 0 {
		return errors.New("throttle: Settle needs an actual cost")
	}
	for i, a := range actual {
		if a < 0 {
			return fmt.Errorf("throttle: Settle's actual cost of part %d must not be negative, got %d", i, a)
		}
	}
	st, ok := r.booking.(Settler)
	if !ok {
		return ErrNoSettle
	}
	if !r.state.CompareAndSwap(open, settled) && !r.state.CompareAndSwap(used, settled) {
		return nil // settled before, or cancelled
	}
	return st.Settle(ctx, actual)
}

// holder is a key's state as seen from a claim on it.
type holder interface {
	until(c *claim) time.Duration
	give(c *claim)
	// settle charges or gives back the difference between actual and
	// c.n, at c's slot; it reports an actual above the limiter's capacity.
	settle(c *claim, actual int) error

	// For moving up (moveup.go); the locked ones need the key's mu.
	movable() bool
	lockOrder() uint64
	lockMove() bool
	unlockMove()
	watch(c *claim, w *waiter)
	unwatch(c *claim)
	giveLocked(c *claim)                     // locked
	settleLocked(c *claim, actual int) error // locked
	latestWaiter() *waiter                   // locked
	asleep(keys []holder) []*waiter          // locked
	delayOf(c *claim) int64                  // locked
	unbook(c *claim)                         // locked
	earliestDelay(n int) int64               // locked
	rebook(c *claim, delay int64)            // locked
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
	moveUp(c.key, []holder{c.key}, func(locked bool) {
		if locked {
			c.key.giveLocked(c)
		} else {
			c.key.give(c)
		}
	})
	return nil
}

// SettleParts returns how many actual costs Settle takes (see [Settler]).
func (c *claim) SettleParts() int { return 1 }

// Settle implements [Settler].
func (c *claim) Settle(_ context.Context, actual []int) error {
	if actual[0] >= c.n {
		return c.key.settle(c, actual[0]) // nothing given back
	}
	var err error
	moveUp(c.key, []holder{c.key}, func(locked bool) {
		if locked {
			err = c.key.settleLocked(c, actual[0])
		} else {
			err = c.key.settle(c, actual[0])
		}
	})
	return err
}

// allBooking is the Booking of [All]: claims on the built-in parts, all at
// one slot, and reservations from the parts outside this package.
// claimParts[i] and foreignPart[i] say which of All's arguments a claim
// or a foreign reservation stands for, for Settle; nparts is how many
// arguments took a cost of their own (0 when Reserve gave one n to all).
type allBooking struct {
	claims      []claim
	claimParts  [][]int
	foreign     []*Reservation
	foreignPart []int
	nparts      int
}

// SettleParts returns how many actual costs Settle takes (see [Settler]).
func (b *allBooking) SettleParts() int { return max(b.nparts, 1) }

// Settle implements [Settler]. A built-in limiter in several parts is
// settled to the largest of their actual costs, as it was booked at the
// largest of their costs.
func (b *allBooking) Settle(ctx context.Context, actual []int) error {
	pick := func(parts ...int) int {
		if b.nparts == 0 {
			return actual[0]
		}
		a := 0
		for _, p := range parts {
			a = max(a, actual[p])
		}
		return a
	}
	var errs []error
	gave := -1 // a claim that gives units back: the callers waiting behind it move up
	for i := range b.claims {
		if pick(b.claimParts[i]...) < b.claims[i].n && gave < 0 {
			gave = i
		}
	}
	settle := func(locked bool) {
		for i := range b.claims {
			c, a := &b.claims[i], pick(b.claimParts[i]...)
			var err error
			if locked {
				err = c.key.settleLocked(c, a)
			} else {
				err = c.key.settle(c, a)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	if gave >= 0 {
		moveUp(b.claims[gave].key, b.keys(), settle)
	} else {
		settle(false)
	}
	for i, r := range b.foreign {
		if err := r.Settle(ctx, pick(b.foreignPart[i])); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// keys returns the keys of the built-in parts.
func (b *allBooking) keys() []holder {
	ks := make([]holder, len(b.claims))
	for i := range b.claims {
		ks[i] = b.claims[i].key
	}
	return ks
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
	give := func(locked bool) {
		for i := range b.claims {
			if locked {
				b.claims[i].key.giveLocked(&b.claims[i])
			} else {
				b.claims[i].key.give(&b.claims[i])
			}
		}
	}
	for i := range b.claims {
		if b.claims[i].n > 0 || i == len(b.claims)-1 {
			moveUp(b.claims[i].key, b.keys(), give) // from a key it booked units on
			break
		}
	}
	var first error
	for _, r := range b.foreign {
		if err := r.Cancel(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}
