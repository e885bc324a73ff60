package redislimit

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// switchable is a redis client that can be made unreachable: every script
// then fails as a refused connection would.
type switchable struct {
	redis.Scripter
	down atomic.Bool
}

func (s *switchable) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if s.down.Load() {
		return redis.NewCmdResult(nil, syscall.ECONNREFUSED)
	}
	return s.Scripter.EvalSha(ctx, sha, keys, args...)
}

func (s *switchable) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	if s.down.Load() {
		return redis.NewCmdResult(nil, syscall.ECONNREFUSED)
	}
	return s.Scripter.Eval(ctx, src, keys, args...)
}

// spacedLocal is a local limiter that spaces units by interval on the
// test's clock (a token bucket of burst 1), and records the after each
// ReserveAfter was given.
type spacedLocal struct {
	c        *clock
	interval time.Duration

	mu     sync.Mutex
	next   time.Time // the next free slot
	afters []time.Duration
}

func (l *spacedLocal) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*throttle.Reservation, error) {
	return l.ReserveAfter(ctx, key, n, 0, maxWait)
}

func (l *spacedLocal) ReserveAfter(_ context.Context, _ string, _ int, after, _ time.Duration) (*throttle.Reservation, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.afters = append(l.afters, after)
	now := l.c.now()
	slot := now.Add(after)
	if l.next.After(slot) {
		slot = l.next
	}
	l.next = slot.Add(l.interval)
	return &throttle.Reservation{OK: true, Delay: slot.Sub(now)}, nil
}

// TestFallbackCarriesTheHorizon switches a Redis token bucket to its local
// fallback and back, on a frozen clock: each side books no earlier than
// the latest slot the other handed out for the key, so the units booked
// ahead on one side are not granted again on the other.
func TestFallbackCarriesTheHorizon(t *testing.T) {
	t.Parallel()
	rdb := &switchable{Scripter: startRedis(t).client(t)}
	c := newClock(0)
	local := &spacedLocal{c: c, interval: 100 * ms}
	var o observed
	l, err := NewTokenBucket(rdb, throttle.PerSecond(10), 1, c.option(),
		WithFailurePolicy(Fallback(local)), WithObserver(o.observe))
	require.NoError(t, err)
	closeAll(t, l)
	key := "k"
	delays := func(n int) []time.Duration {
		var ds []time.Duration
		for range n {
			r := reserve(t, l, key, 1, -1)
			require.True(t, r.OK)
			ds = append(ds, r.Delay)
		}
		return ds
	}

	assert.Equal(t, []time.Duration{0, 100 * ms, 200 * ms}, delays(3), "from Redis")

	rdb.down.Store(true)
	assert.Equal(t, []time.Duration{200 * ms, 300 * ms, 400 * ms}, delays(3), "from local, after Redis's latest slot")
	assert.Equal(t, []time.Duration{200 * ms, 200 * ms, 200 * ms}, local.afters)

	rdb.down.Store(false)
	c.advance(ProbeInterval) // the breaker lets a probe through
	assert.Equal(t, []time.Duration{150 * ms, 250 * ms}, delays(2), "from Redis, after local's latest slot (400 ms)")
	failures, recoveries := o.counts()
	assert.Equal(t, 1, failures)
	assert.Equal(t, 1, recoveries)
}

// TestFallbackCarriesTheHorizonForParts is TestFallbackCarriesTheHorizon
// through ReserveParts, as an LLM budget books its request, input and
// output costs, with a local limiter that can book parts too
// (throttle.All): switching to local, it must book no earlier than the
// latest Redis slot this process saw, as Reserve does. It booked at now,
// so the units Redis had booked ahead went out again locally (found by a
// user's test).
func TestFallbackCarriesTheHorizonForParts(t *testing.T) {
	t.Parallel()
	rdb := &switchable{Scripter: startRedis(t).client(t)}
	c := newClock(0)
	localRequests, err := throttle.NewTokenBucket(throttle.PerSecond(10), 1, throttle.WithClock(c.now))
	require.NoError(t, err)
	localTokens, err := throttle.NewTokenBucket(throttle.PerSecond(1000), 100, throttle.WithClock(c.now))
	require.NoError(t, err)
	requests, err := NewTokenBucket(rdb, throttle.PerSecond(10), 1, c.option(),
		WithFailurePolicy(Fallback(throttle.All(localRequests, localTokens))))
	require.NoError(t, err)
	tokens, err := NewTokenBucket(rdb, throttle.PerSecond(1000), 100, c.option())
	require.NoError(t, err)
	closeAll(t, requests, tokens)
	budget, err := All(requests, tokens)
	require.NoError(t, err)
	delays := func(n int) []time.Duration {
		var ds []time.Duration
		for range n {
			r, err := budget.ReserveParts(context.Background(), "k", []int{1, 10}, -1)
			require.NoError(t, err)
			require.True(t, r.OK)
			ds = append(ds, r.Delay)
		}
		return ds
	}
	assert.Equal(t, []time.Duration{0, 100 * ms, 200 * ms}, delays(3), "from Redis")
	rdb.down.Store(true)
	for i, d := range delays(2) {
		assert.GreaterOrEqual(t, d, 200*ms, "local unit %d goes before Redis's latest slot", i)
	}
}

// TestFallbackNilPanics: a nil local limiter panics when the policy is
// built, a nil pointer in the interface too, as the documentation says.
// A local limiter whose constructor failed (burst/N of 0, its error
// ignored) was taken, and the first outage panicked in Reserve with a nil
// dereference (found by a user's test).
func TestFallbackNilPanics(t *testing.T) {
	t.Parallel()
	const want = "redislimit: Fallback given a nil Limiter"
	assert.PanicsWithValue(t, want, func() { Fallback(nil) })
	local, err := throttle.NewTokenBucket(throttle.PerSecond(10), 10/20) // a burst of 10 over 20 processes
	require.Error(t, err)
	assert.PanicsWithValue(t, want, func() { Fallback(local) })
	var bucket *TokenBucket
	assert.PanicsWithValue(t, want, func() { Fallback(bucket) })
}
