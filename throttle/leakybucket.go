package throttle

import (
	"context"
	"fmt"
	"time"
)

// LeakyBucket lets units out evenly spaced at its rate, with no burst:
// the leaky bucket as a queue. A caller that finds the line busy is given
// the next free slot; at most capacity units may hold a slot in the
// future, and beyond that Reserve is refused. A request of n units goes
// at its slot and the next one waits n intervals.
//
// Pick it for upstreams that punish any two requests closer than
// 1/rate. A LeakyBucket is safe for concurrent use.
type LeakyBucket struct {
	*keyed[gcraState, *gcra]
	rate     Rate
	capacity int
}

// NewLeakyBucket returns a leaky bucket per key that lets units out at r,
// with up to capacity units waiting for a future slot.
func NewLeakyBucket(r Rate, capacity int, opts ...Option) (*LeakyBucket, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	if capacity < 1 {
		return nil, fmt.Errorf("throttle: capacity must be at least 1, got %d", capacity)
	}
	interval := r.interval() + c.tolerance
	if _, err := span("capacity", capacity+1, interval); err != nil {
		return nil, err
	}
	alg := &gcra{interval: int64(interval), queue: int64(capacity) + 1}
	return &LeakyBucket{keyed: newKeyed(alg, capacity+1, c), rate: r, capacity: capacity}, nil
}

// Rate returns the rate units leave at.
func (b *LeakyBucket) Rate() Rate { return b.rate }

// Capacity returns how many units may wait for a future slot.
func (b *LeakyBucket) Capacity() int { return b.capacity }

// Reserve implements [Limiter]. A caller that keeps the Reservation to
// itself allocates nothing.
func (b *LeakyBucket) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*Reservation, error) {
	return b.reserve(ctx, key, n, maxWait, new(Reservation))
}
