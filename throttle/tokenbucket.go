package throttle

import (
	"context"
	"fmt"
	"time"

	"github.com/egress-go/egress/internal/tolerance"
)

// TokenBucket allows bursts of up to burst units per key, refilled at a
// steady rate: the classic token bucket, computed as GCRA so that each
// key costs one timestamp. It is the right default for "the API allows
// N per second with a burst of B".
//
// Unlike x/time/rate, it reads the clock while the key is locked, so a
// caller holding a stale time can never move a bucket backwards and
// over-admit.
//
// [Reservation.Settle] gives back a booking's unused units in full while
// no later booking relies on them: the key's latest booking always, and
// an earlier one as far as the bookings after it were granted ahead of
// their slot (they did not wait for its units). Units a bucket refilled
// during an idle stretch after the booking are not given back twice. An
// excess is always charged in full. With [WithMoveUp], a caller asleep in
// [Reservation.Wait] moves up when an earlier booking gives units back
// (see "Moving up" in the package doc). The same rules hold for [LeakyBucket].
//
// A TokenBucket is safe for concurrent use.
type TokenBucket struct {
	e     *engine[gcraState, *gcra]
	rate  Rate
	burst int
}

// NewTokenBucket returns a token bucket per key that refills at r and
// holds at most burst units. Each key starts full.
func NewTokenBucket(r Rate, burst int, opts ...Option) (*TokenBucket, error) {
	c := newConfig(opts)
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	if burst < 1 {
		return nil, fmt.Errorf("throttle: burst must be at least 1, got %d", burst)
	}
	interval, _ := tolerance.Bucket(r.interval(), burst, c.tolerance)
	if _, err := span("burst", burst, interval); err != nil {
		return nil, err
	}
	alg := newGCRA(r.interval(), burst, c.tolerance)
	return &TokenBucket{e: newEngine(alg, burst, c), rate: r, burst: burst}, nil
}

// Follows reports whether the bucket's headroom follows the upstream's
// answers: its burst cannot spare its [WithTolerance] (see there).
func (b *TokenBucket) Follows() bool { return b.e.alg.hr != nil }

// Learn implements [Learner]. When the burst cannot spare the bucket's
// [WithTolerance], the headroom in use, up to it, follows what the
// upstream's answers show (see [WithTolerance]): jitter is a property of
// the path, not of a key. And a refusal of key's units lowers key's rate
// below what the upstream was seen to admit, if that is below the
// bucket's: the stricter of the two wins (see "Learned rates" in the
// package doc). Learn ignores ctx, and holds key's lock only briefly.
func (b *TokenBucket) Learn(ctx context.Context, key string, o Outcome) error {
	learn(b.e, key, o)
	return nil
}

// Rate returns the rate the bucket refills at.
func (b *TokenBucket) Rate() Rate { return b.rate }

// Burst returns the bucket's size as configured, before any tolerance.
func (b *TokenBucket) Burst() int { return b.burst }

// Reserve implements [Limiter]: it books n units of key, now or at the
// first later slot with room, if that slot lies within maxWait.
func (b *TokenBucket) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*Reservation, error) {
	return b.e.reserve(ctx, key, n, 0, maxWait)
}

// ReserveAfter implements [Deferrer]: Reserve, with the slot no earlier
// than after from now.
func (b *TokenBucket) ReserveAfter(ctx context.Context, key string, n int, after, maxWait time.Duration) (*Reservation, error) {
	return b.e.reserve(ctx, key, n, after, maxWait)
}

// AllowN implements [Allower]: it takes n units of key only if they are
// available now, and allocates nothing.
func (b *TokenBucket) AllowN(ctx context.Context, key string, n int) (bool, error) {
	return b.e.allow(ctx, key, n)
}

// Pause implements [Pauser]: every slot of key still ahead, and every new
// booking, moves later, so that nothing is due for d from now.
func (b *TokenBucket) Pause(ctx context.Context, key string, d time.Duration) error {
	return b.e.pause(ctx, key, d)
}

// Inspect implements [Inspector].
func (b *TokenBucket) Inspect(ctx context.Context, key string) (KeyState, error) {
	return b.e.inspect(ctx, key)
}

func (b *TokenBucket) engine() keyLocker { return b.e }
