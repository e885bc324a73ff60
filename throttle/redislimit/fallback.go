package redislimit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/egress-go/egress/internal/nilcheck"
	"github.com/egress-go/egress/throttle"
)

// FailurePolicy says what a limiter does when Redis cannot decide: it is
// unreachable, does not answer within [WithTimeout], or says it cannot
// serve now (READONLY, LOADING, MASTERDOWN, CLUSTERDOWN, TRYAGAIN...).
// It is one of [FailClosed], [FailOpen], [Fallback] or, with
// [WithSlotLease], [FailShare].
type FailurePolicy interface {
	failurePolicy()
}

// FailMode is a [FailurePolicy] that needs no limiter of its own.
type FailMode int

const (
	// FailClosed refuses with an *[UnavailableError]: nothing is sent
	// while Redis is away. It is the default, because exceeding a paid
	// quota is the harm this package exists to prevent.
	FailClosed FailMode = iota
	// FailOpen grants every request at once while Redis is away. Pick it
	// when the upstream's limit is soft and availability comes first.
	FailOpen
)

func (FailMode) failurePolicy() {}

// String returns "FailClosed", "FailOpen" or "FailShare".
func (m FailMode) String() string {
	switch m {
	case FailClosed:
		return "FailClosed"
	case FailOpen:
		return "FailOpen"
	case FailShare:
		return "FailShare"
	}
	return fmt.Sprintf("FailMode(%d)", int(m))
}

type fallback struct {
	local throttle.Limiter
}

func (fallback) failurePolicy() {}

// Fallback returns a FailurePolicy that takes units from local while
// Redis is away, and pauses it too. local is an in-process limiter, so
// each of N processes spends its own budget: set it to rate/N (and
// burst/N) of the shared limit, so that together they stay within it.
//
// Each switch carries the key's horizon over, the latest slot handed out
// on the side being left: switching to local, the local limiter books no
// earlier than the latest Redis slot this process saw for the key (when
// local implements [throttle.Deferrer], and for ReserveParts
// [throttle.PartsDeferrer], as the limiters of package throttle do); on
// recovery, Redis books no earlier than the latest local slot. So the units already booked ahead on one side are never
// granted again on the other. What a switch can still add is the local
// limiter's burst: it starts full, so each process may send up to its
// local burst at the horizon on top of the shared schedule. A nil local
// panics.
func Fallback(local throttle.Limiter) FailurePolicy {
	// A nil pointer in the interface too: a local limiter whose
	// constructor failed (a burst/N of 0, its error ignored) was taken,
	// and the first outage panicked with a nil dereference (found by a
	// user's test).
	if nilcheck.Is(local) {
		panic("redislimit: Fallback given a nil Limiter")
	}
	return fallback{local: local}
}

// fail applies the policy to err.
func (b *budget) fail(ctx context.Context, key string, n int, after, maxWait time.Duration, err error) (*throttle.Reservation, error) {
	if !errors.Is(err, ErrUnavailable) {
		return nil, err
	}
	switch p := b.policy.(type) {
	case FailMode:
		if p == FailOpen {
			return &throttle.Reservation{OK: true}, nil
		}
	case fallback:
		now := b.client.now()
		after = max(after, time.Duration(b.horizons.redis(key, now)))
		var r *throttle.Reservation
		if d, ok := p.local.(throttle.Deferrer); ok {
			r, err = d.ReserveAfter(ctx, key, n, after, maxWait)
		} else {
			r, err = p.local.Reserve(ctx, key, n, maxWait)
		}
		if err == nil && r.OK {
			b.horizons.sawLocal(key, now+int64(r.Delay), now)
		}
		return r, err
	}
	return nil, err
}

// failParts is fail for ReserveParts: a Fallback books costs on the local
// limiter when it is a [throttle.PartsReserver], and the largest of them
// otherwise. A [throttle.PartsDeferrer] books no earlier than the latest
// Redis slot, as fail does; a bare PartsReserver cannot be told it.
func (b *budget) failParts(ctx context.Context, key string, costs []int, maxWait time.Duration, err error) (*throttle.Reservation, error) {
	if fb, ok := b.policy.(fallback); ok && errors.Is(err, ErrUnavailable) {
		if pr, ok := fb.local.(throttle.PartsReserver); ok {
			now := b.client.now()
			var r *throttle.Reservation
			if pd, ok := pr.(throttle.PartsDeferrer); ok {
				// Found by a user's test: booked at now, the units this
				// process had booked ahead in Redis went out again.
				r, err = pd.ReservePartsAfter(ctx, key, costs, time.Duration(b.horizons.redis(key, now)), maxWait)
			} else {
				r, err = pr.ReserveParts(ctx, key, costs, maxWait)
			}
			if err == nil && r.OK {
				b.horizons.sawLocal(key, now+int64(r.Delay), now)
			}
			return r, err
		}
	}
	return b.fail(ctx, key, slices.Max(costs), 0, maxWait, err)
}

// failPause applies policy to a pause Redis could not take: a fallback
// pauses its local limiter, FailOpen drops it, FailClosed returns err.
func failPause(ctx context.Context, policy FailurePolicy, key string, d time.Duration, err error) error {
	if !errors.Is(err, ErrUnavailable) {
		return err
	}
	switch p := policy.(type) {
	case FailMode:
		if p == FailOpen {
			return nil
		}
	case fallback:
		if local, ok := p.local.(throttle.Pauser); ok {
			return local.Pause(ctx, key, d)
		}
		return nil
	}
	return err
}

// horizons are, per key, the latest slot this process saw handed out by
// Redis and by the local limiter, in local monotonic nanoseconds: what a
// switch between the two carries over. A key whose slots have both
// passed is dropped at the next sweep.
type horizons struct {
	// mu guards the maps and sweepAt.
	mu        sync.Mutex
	fromRedis map[string]int64
	fromLocal map[string]int64
	sweepAt   int
}

func newHorizons() *horizons {
	return &horizons{fromRedis: make(map[string]int64), fromLocal: make(map[string]int64), sweepAt: minSweep}
}

// sawRedis records a slot Redis handed out for key.
func (h *horizons) sawRedis(key string, slot, now int64) { h.saw(h.fromRedis, key, slot, now) }

// sawLocal records a slot the local limiter handed out for key.
func (h *horizons) sawLocal(key string, slot, now int64) { h.saw(h.fromLocal, key, slot, now) }

func (h *horizons) saw(m map[string]int64, key string, slot, now int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if slot > m[key] {
		if len(h.fromRedis)+len(h.fromLocal) >= h.sweepAt {
			h.sweep(now)
		}
		m[key] = slot
	}
}

// sweep drops the horizons that lie before now. h.mu is held.
func (h *horizons) sweep(now int64) {
	for _, m := range []map[string]int64{h.fromRedis, h.fromLocal} {
		for k, at := range m {
			if at < now {
				delete(m, k)
			}
		}
	}
	h.sweepAt = max(minSweep, 2*(len(h.fromRedis)+len(h.fromLocal)))
}

// redis returns how long from now until the latest Redis slot for key.
func (h *horizons) redis(key string, now int64) int64 { return h.ahead(h.fromRedis, key, now) }

// local returns how long from now until the latest local slot for key.
func (h *horizons) local(key string, now int64) time.Duration {
	return time.Duration(h.ahead(h.fromLocal, key, now))
}

func (h *horizons) ahead(m map[string]int64, key string, now int64) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return max(m[key]-now, 0)
}
