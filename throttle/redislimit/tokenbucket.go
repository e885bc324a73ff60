package redislimit

import (
	"math"
	"time"

	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress/internal/tolerance"
	"github.com/egress-go/egress/throttle"
)

// TokenBucket is [throttle.TokenBucket] with its state in Redis: bursts
// of up to burst units per key, refilled at a steady rate, computed as
// GCRA (one timestamp per key, see gcra.lua). Every process that builds
// one with the same prefix and rate shares the bucket of each key; the
// key in Redis is prefix{key}:tb:<rate>, so processes should agree on
// burst too.
//
// A TokenBucket is safe for concurrent use. Close it when done.
type TokenBucket struct {
	*budget
	rate  throttle.Rate
	burst int
}

// NewTokenBucket returns a token bucket per key, kept in rdb, that
// refills at r and holds at most burst units. Each key starts full. The
// interval is r's, in nanoseconds rounded up as in process, and the
// script adds it up exactly; a slot is rounded up to a whole microsecond.
// When burst intervals last longer than about 13 days, the interval is
// rounded up to a whole microsecond instead.
func NewTokenBucket(rdb redis.Scripter, r throttle.Rate, burst int, opts ...Option) (*TokenBucket, error) {
	b, err := newGCRA(rdb, "tb", r, "burst", burst, 0, opts)
	if err != nil {
		return nil, err
	}
	return &TokenBucket{budget: b, rate: r, burst: burst}, nil
}

// newGCRA builds the budget of a bucket (tb or lb) that lets n+extra
// units go at once, n being the constructor's argument named field: the
// one constructor of both buckets.
func newGCRA(rdb redis.Scripter, algo string, r throttle.Rate, field string, n, extra int, opts []Option) (*budget, error) {
	switch {
	case n < 1-extra:
		return nil, fmt.Errorf("redislimit: %s must be at least %d, got %d", field, 1-extra, n)
	case n > math.MaxInt-extra:
		return nil, fmt.Errorf("redislimit: %s of %d is out of range", field, n)
	}
	l, cfg, err := gcraLimit(algo, r, n+extra, opts)
	if err != nil {
		return nil, err
	}
	return newBudget(rdb, cfg, l)
}

// gcraLimit builds the limit of a bucket that lets burst units go at
// once, keeping what [WithTolerance] asks in reserve.
func gcraLimit(algo string, r throttle.Rate, burst int, opts []Option) (limit, config, error) {
	interval, err := r.Interval()
	if err != nil {
		return limit{}, config{}, err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return limit{}, config{}, err
	}
	interval, keep := tolerance.Bucket(interval, burst, cfg.tolerance)
	us, err := checkSpan("burst", burst, interval)
	if err != nil {
		return limit{}, config{}, err
	}
	var sub int64
	if interval <= maxNanos/time.Duration(burst) {
		us, sub = int64(interval/time.Microsecond), int64(interval%time.Microsecond)
	}
	most := burst - keep
	return limit{algo: algo, suffix: algo + ":" + rateName(r), most: most, interval: us, sub: sub, burst: int64(most)}, cfg, nil
}

// maxNanos bounds a bucket's span (burst × interval) for the script to
// add its interval up in nanoseconds: sums of a few such spans stay exact
// in Lua's doubles. A longer span has its interval rounded up to a whole
// microsecond.
const maxNanos = 1 << 50

// nanos returns a GCRA limit's interval in nanoseconds.
func (l limit) nanos() int64 { return l.interval*1000 + l.sub }

// maxMicros bounds every span the script adds up, so that sums of a few
// of them stay exact in Lua's doubles (2^53) on top of the Unix time.
const maxMicros = 1 << 50

// checkSpan converts n × d to microseconds, rounding d up, and checks
// that the product stays within maxMicros.
func checkSpan(field string, n int, d time.Duration) (int64, error) {
	us := micros(d)
	if d <= 0 || n < 0 || us > maxMicros/max(int64(n), 1) {
		return 0, fmt.Errorf("redislimit: %s of %d × %v is out of range", field, n, d)
	}
	return us, nil
}

// Rate returns the rate the bucket refills at.
func (b *TokenBucket) Rate() throttle.Rate { return b.rate }

// Burst returns the bucket's size as configured, before any tolerance.
func (b *TokenBucket) Burst() int { return b.burst }
