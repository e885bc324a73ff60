package redislimit

import (
	"fmt"

	"github.com/egress-go/egress/internal/tolerance"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress/throttle"
)

// TokenBucket is [throttle.TokenBucket] with its state in Redis: bursts
// of up to burst units per key, refilled at a steady rate, computed as
// GCRA (one timestamp per key). Every process that builds one with the
// same prefix and rate shares the bucket of each key; the key in Redis is
// prefix{key}:tb:<rate>, so processes should agree on burst too.
//
// A TokenBucket is safe for concurrent use. Close it when done.
type TokenBucket struct {
	*limiter
	rate  throttle.Rate
	burst int
}

// NewTokenBucket returns a token bucket per key, kept in rdb, that
// refills at r and holds at most burst units. Each key starts full. Times
// are kept in microseconds, and the interval is rounded up to one.
func NewTokenBucket(rdb redis.Scripter, r throttle.Rate, burst int, opts ...Option) (*TokenBucket, error) {
	interval, err := r.Interval()
	if err != nil {
		return nil, err
	}
	if burst < 1 {
		return nil, fmt.Errorf("redislimit: burst must be at least 1, got %d", burst)
	}
	cfg, err := newConfig(rdb, opts)
	if err != nil {
		return nil, err
	}
	interval, keep := tolerance.Bucket(interval, burst, cfg.tolerance)
	us, err := checkSpan("burst", burst, interval)
	if err != nil {
		return nil, err
	}
	s := spec{algo: "tb", x: us, y: int64(burst - keep), suffix: "tb:" + r.String(), most: burst - keep}
	return &TokenBucket{limiter: newLimiter(newCore(rdb, cfg), s), rate: r, burst: burst}, nil
}

// Rate returns the rate the bucket refills at.
func (b *TokenBucket) Rate() throttle.Rate { return b.rate }

// Burst returns the bucket's size as configured, before any tolerance.
func (b *TokenBucket) Burst() int { return b.burst }
