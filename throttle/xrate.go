package throttle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"
)

// XRate uses only the exported API of this package (NewReservation,
// Refused, Rate.Interval), as a limiter outside it would.

// XRate lets an existing [rate.Limiter] from golang.org/x/time/rate serve
// as a [Limiter], for code that already paces with one and wants the
// Transport's queue, retries and errors on top of it. Build one with
// [NewXRate].
//
// It keeps the wrapped limiter's own behaviour, with three limits that the
// built-in limiters do not have:
//
//   - No keys: every key draws from the one wrapped limiter, as if all
//     requests shared one budget.
//   - No pauses: XRate is not a [Pauser], so a 429 with Retry-After does
//     not hold back other callers; each request still obeys its own
//     retry policy.
//   - Its cancel rule is x/time/rate's [rate.Reservation.CancelAt]: the
//     tokens of a cancelled reservation come back minus those that later
//     reservations have already counted on. When a later reservation was
//     made in between, this gives back more than the built-in limiters
//     would, and a burst of up to the cancelled units may follow.
//
// x/time/rate also reads the clock before it takes its lock, so under
// heavy contention it may admit more than its rate (golang/go#71360); the
// built-in [TokenBucket] does not. Prefer it for new code, and convert a
// [rate.Limit] with [RateFromLimit].
//
// An XRate is safe for concurrent use, as the wrapped limiter is.
type XRate struct {
	l *rate.Limiter
}

var _ Limiter = (*XRate)(nil)

// NewXRate returns a Limiter that takes its units from l. Changes made to
// l afterwards (SetLimit, SetBurst) apply to the units booked after them.
// NewXRate panics if l is nil.
func NewXRate(l *rate.Limiter) *XRate {
	if l == nil {
		panic("throttle: NewXRate given a nil *rate.Limiter")
	}
	return &XRate{l: l}
}

// Reserve implements [Limiter]. It ignores key, books n tokens of the
// wrapped limiter with [rate.Limiter.ReserveN], and gives them straight
// back with CancelAt when their slot lies beyond maxWait (0 means only
// now, a negative maxWait means no bound). A request for more than the
// limiter's burst fails with an error matching [ErrExceedsCapacity].
func (x *XRate) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*Reservation, error) {
	switch {
	case ctx == nil:
		return nil, errors.New("throttle: nil context")
	case n <= 0:
		return nil, fmt.Errorf("throttle: n must be positive, got %d", n)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := time.Now()
	r := x.l.ReserveN(now, n)
	if !r.OK() {
		return nil, fmt.Errorf("%w: n %d is above the rate.Limiter's burst %d", ErrExceedsCapacity, n, x.l.Burst())
	}
	delay := r.DelayFrom(now)
	if maxWait >= 0 && delay > maxWait {
		r.CancelAt(now)
		return Refused(delay-maxWait, x.remaining(now)), nil
	}
	return NewReservation(xrateBooking{r: r}, delay, x.remaining(now)), nil
}

// remaining returns the whole tokens left at now, or 0 when the limiter is
// in debt.
func (x *XRate) remaining(now time.Time) int {
	t := x.l.TokensAt(now)
	if t <= 0 {
		return 0
	}
	if t >= math.MaxInt32 {
		return math.MaxInt32
	}
	return int(t)
}

// xrateBooking is the [Booking] of one x/time/rate reservation.
type xrateBooking struct {
	r *rate.Reservation
}

// Until implements [Booking]. The slot of an x/time/rate reservation never
// moves: there are no pauses to follow.
func (b xrateBooking) Until() time.Duration { return max(b.r.Delay(), 0) }

// Cancel implements [Booking] with [rate.Reservation.CancelAt].
func (b xrateBooking) Cancel(context.Context) error {
	b.r.CancelAt(time.Now())
	return nil
}

// Limit returns r as a [rate.Limit], for a [rate.Limiter] that paces
// exactly as a [TokenBucket] of r does: one unit every r's
// [Rate.Interval], which rounds Per/N up to the nanosecond. An invalid
// Rate gives an error naming the field.
func (r Rate) Limit() (rate.Limit, error) {
	iv, err := r.Interval()
	if err != nil {
		return 0, err
	}
	return rate.Every(iv), nil
}

// RateFromLimit returns the Rate that is l: N per second when l is a whole
// number, and otherwise 1 per [rate.Every]'s interval rounded up to the
// nanosecond, so that the Rate is never faster than l. [rate.Inf], zero,
// negative and NaN limits, limits above one per nanosecond, and limits
// slower than one per the longest [time.Duration] (about 292 years), have
// no Rate and give an error.
func RateFromLimit(l rate.Limit) (Rate, error) {
	f := float64(l)
	switch {
	case l == rate.Inf:
		return Rate{}, fmt.Errorf("throttle: rate.Limit is rate.Inf, which has no Rate")
	case math.IsInf(f, 0) || math.IsNaN(f):
		return Rate{}, fmt.Errorf("throttle: rate.Limit %v has no Rate: it is not finite", f)
	case f <= 0:
		return Rate{}, fmt.Errorf("throttle: rate.Limit must be positive, got %v", f)
	case f > 1e9:
		return Rate{}, fmt.Errorf("throttle: rate.Limit %v is faster than 1 unit per nanosecond", f)
	}
	if f == math.Trunc(f) {
		return PerSecond(int(f)), nil
	}
	iv := math.Ceil(1e9 / f)
	if iv >= math.MaxInt64 { // 2⁶³: converted, it overflowed into a negative Per
		return Rate{}, fmt.Errorf("throttle: rate.Limit %v is slower than 1 unit per %v, the longest time.Duration", f, time.Duration(math.MaxInt64))
	}
	return RateEvery(time.Duration(iv))
}

// RateEvery returns one unit every interval, the Rate counterpart of
// [rate.Every]. A non-positive interval is an error.
func RateEvery(interval time.Duration) (Rate, error) {
	r := Rate{N: 1, Per: interval}
	if _, err := r.Interval(); err != nil {
		return Rate{}, err
	}
	return r, nil
}
