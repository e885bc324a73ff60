package redislimit

import (
	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress/throttle"
)

// LeakyBucket is [throttle.LeakyBucket] with its state in Redis: units
// leave evenly spaced at the rate, and capacity units may arrive ahead of
// that spacing, as in nginx's limit_req with burst=capacity. A new key
// admits 1+capacity units at once, then one per interval: GCRA with a
// tolerance of capacity intervals, exactly what a [TokenBucket] of burst
// capacity+1 admits. Its key in Redis is prefix{key}:lb:<rate>.
//
// It never refuses a caller whose slot lies within its max wait: how many
// may wait is the queue's and the max wait's business. A bucket of size S
// in Shopify's terms is a capacity of S-1.
//
// A LeakyBucket is safe for concurrent use. Close it when done.
type LeakyBucket struct {
	*budget
	rate     throttle.Rate
	capacity int
}

// NewLeakyBucket returns a leaky bucket per key, kept in rdb, that lets
// units out at r, with up to capacity units ahead of even spacing.
// capacity 0 is strict even spacing; a negative capacity is an error.
// [WithTolerance](d) keeps ceil(d×rate) units of the capacity in reserve,
// or lengthens the interval by d when the capacity cannot spare them.
func NewLeakyBucket(rdb redis.Scripter, r throttle.Rate, capacity int, opts ...Option) (*LeakyBucket, error) {
	b, err := newGCRA(rdb, "lb", r, "capacity", capacity, 1, opts)
	if err != nil {
		return nil, err
	}
	return &LeakyBucket{budget: b, rate: r, capacity: capacity}, nil
}

// Rate returns the rate units leave at.
func (b *LeakyBucket) Rate() throttle.Rate { return b.rate }

// Capacity returns how many units may arrive ahead of even spacing, as
// configured, before any tolerance.
func (b *LeakyBucket) Capacity() int { return b.capacity }
