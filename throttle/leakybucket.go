package throttle

import (
	"context"
	"fmt"
	"time"

	"github.com/egress-go/egress/internal/tolerance"
)

// LeakyBucket lets units out at its rate, with a burst of capacity units
// ahead of even spacing: nginx's `limit_req rate=R burst=B`, with B as
// capacity. A new key admits 1+capacity units at once, then one per
// interval; a caller that finds no room is given the next free slot,
// never refused while that slot lies within its maxWait. How many may
// wait is the job of the queue and of maxWait, not of the bucket.
//
// It is GCRA with a tolerance of capacity intervals, so it admits exactly
// what [NewTokenBucket](r, capacity+1) does. Capacity 0 spaces every unit
// evenly. A bucket of size S in the "bucket fills, leaks at R" sense
// (Shopify's, say) is capacity S-1. A request of n units goes at its slot
// and the next one waits n intervals.
//
// Pick it to mirror an upstream that is itself a leaky bucket. A
// LeakyBucket is safe for concurrent use.
type LeakyBucket struct {
	e        *engine[gcraState, *gcra]
	rate     Rate
	capacity int
}

// NewLeakyBucket returns a leaky bucket per key that lets units out at r
// with a burst of capacity units ahead of even spacing (see
// [LeakyBucket]). capacity may be 0. With [WithTolerance](d), it keeps a
// headroom of up to d out of the capacity's span, and lengthens its
// interval only when the capacity cannot spare it (see [WithTolerance]).
func NewLeakyBucket(r Rate, capacity int, opts ...Option) (*LeakyBucket, error) {
	c := newConfig(opts)
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	if capacity < 0 {
		return nil, fmt.Errorf("throttle: capacity must not be negative, got %d", capacity)
	}
	if _, err := span("capacity", capacity, r.interval()); err != nil {
		return nil, err // before capacity+1, which overflows at math.MaxInt
	}
	interval, _ := tolerance.Bucket(r.interval(), capacity+1, c.tolerance)
	if _, err := span("capacity", capacity+1, interval); err != nil {
		return nil, err
	}
	alg := newGCRA(r.interval(), capacity+1, c.tolerance)
	return &LeakyBucket{e: newEngine(alg, capacity+1, c), rate: r, capacity: capacity}, nil
}

// Follows reports whether the bucket's headroom follows the upstream's
// answers: its burst cannot spare its [WithTolerance] (see there).
func (b *LeakyBucket) Follows() bool { return b.e.alg.hr != nil }

// Learn implements [Learner], as [TokenBucket.Learn] does.
func (b *LeakyBucket) Learn(ctx context.Context, key string, o Outcome) error {
	learn(b.e, key, o)
	return nil
}

// Rate returns the rate units leave at.
func (b *LeakyBucket) Rate() Rate { return b.rate }

// Capacity returns the burst the bucket allows ahead of even spacing, as
// configured, before any tolerance.
func (b *LeakyBucket) Capacity() int { return b.capacity }

// Reserve implements [Limiter]: it books n units of key, now or at the
// first later slot with room, if that slot lies within maxWait.
func (b *LeakyBucket) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*Reservation, error) {
	return b.e.reserve(ctx, key, n, 0, maxWait)
}

// ReserveAfter implements [Deferrer]: Reserve, with the slot no earlier
// than after from now.
func (b *LeakyBucket) ReserveAfter(ctx context.Context, key string, n int, after, maxWait time.Duration) (*Reservation, error) {
	return b.e.reserve(ctx, key, n, after, maxWait)
}

// AllowN implements [Allower]: it takes n units of key only if they are
// available now, and allocates nothing.
func (b *LeakyBucket) AllowN(ctx context.Context, key string, n int) (bool, error) {
	return b.e.allow(ctx, key, n)
}

// Pause implements [Pauser]: every slot of key still ahead, and every new
// booking, moves later, so that nothing is due for d from now.
func (b *LeakyBucket) Pause(ctx context.Context, key string, d time.Duration) error {
	return b.e.pause(ctx, key, d)
}

// Inspect implements [Inspector].
func (b *LeakyBucket) Inspect(ctx context.Context, key string) (KeyState, error) {
	return b.e.inspect(ctx, key)
}

func (b *LeakyBucket) engine() keyLocker { return b.e }
