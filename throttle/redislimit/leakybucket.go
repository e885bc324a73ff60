package redislimit

import (
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress/throttle"
)

// LeakyBucket is [throttle.LeakyBucket] with its state in Redis: units
// leave evenly spaced at the rate, with no burst, and at most capacity
// units may hold a slot in the future. Its key in Redis is
// prefix{key}:lb:<rate>.
//
// A LeakyBucket is safe for concurrent use. Close it when done.
type LeakyBucket struct {
	*limiter
	rate     throttle.Rate
	capacity int
}

// NewLeakyBucket returns a leaky bucket per key, kept in rdb, that lets
// units out at r with up to capacity units waiting for a future slot.
func NewLeakyBucket(rdb redis.Scripter, r throttle.Rate, capacity int, opts ...Option) (*LeakyBucket, error) {
	interval, err := r.Interval()
	if err != nil {
		return nil, err
	}
	if capacity < 1 {
		return nil, fmt.Errorf("redislimit: capacity must be at least 1, got %d", capacity)
	}
	cfg, err := newConfig(rdb, opts)
	if err != nil {
		return nil, err
	}
	us, err := checkSpan("capacity", capacity+1, interval+cfg.tolerance)
	if err != nil {
		return nil, err
	}
	s := spec{algo: "lb", x: us, y: int64(capacity) + 1, suffix: "lb:" + r.String(), most: capacity + 1}
	return &LeakyBucket{limiter: newLimiter(newCore(rdb, cfg), s), rate: r, capacity: capacity}, nil
}

// Rate returns the rate units leave at.
func (b *LeakyBucket) Rate() throttle.Rate { return b.rate }

// Capacity returns how many units may wait for a future slot.
func (b *LeakyBucket) Capacity() int { return b.capacity }
