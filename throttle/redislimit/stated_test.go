package redislimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// statedProc is one process following the upstream: its own go-redis
// client, Client and script counter, on a server shared with others.
type statedProc struct {
	client  *Client
	scripts *scriptCounter
}

func newStatedProc(t *testing.T, s *server, c *clock) *statedProc {
	t.Helper()
	rdb := s.client(t)
	p := &statedProc{scripts: &scriptCounter{}}
	rdb.AddHook(p.scripts)
	var err error
	p.client, err = NewClient(rdb, c.option())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.client.Close() })
	return p
}

// bucket returns a token bucket of n per second, burst n, following unit.
func (p *statedProc) bucket(t *testing.T, n int, unit string) *TokenBucket {
	t.Helper()
	b, err := NewTokenBucket(p.client.rdb, throttle.PerSecond(n), n, WithClient(p.client), WithStated(unit))
	require.NoError(t, err)
	return b
}

// learn has l learn one statement answered after latency.
func learn(t *testing.T, l throttle.Learner, key string, latency time.Duration, ss ...throttle.Statement) {
	t.Helper()
	require.NoError(t, l.Learn(context.Background(), key, throttle.Outcome{N: 1, Latency: latency, Statements: ss}))
}

func left(t *testing.T, l throttle.Inspector, key string) int {
	t.Helper()
	st, err := l.Inspect(context.Background(), key)
	require.NoError(t, err)
	return st.Remaining
}

// tokens states an LLM API's refilling output-token quota of 1000.
func tokens(remaining int) throttle.Statement {
	return throttle.Statement{Name: "output-tokens", Unit: "output-tokens", Limit: 1000, Remaining: remaining, Reset: time.Second, Refills: true}
}

// TestStatedRefillTightensTheFleet: what one process learns from a
// refilling quota's headers bounds what another is admitted, in the
// call that carries it; a looser statement never loosens; units booked
// after the stated request was sent are still owed.
func TestStatedRefillTightensTheFleet(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	a, b := newStatedProc(t, s, c), newStatedProc(t, s, c)
	ta, tb := a.bucket(t, 1000, "output-tokens"), b.bucket(t, 1000, "output-tokens")
	const key = "llm"

	r := reserve(t, ta, key, 100, 0) // the stated request, sent at t0
	require.True(t, r.OK)
	c.advance(10 * ms)
	r = reserve(t, tb, key, 200, 0) // booked after it was sent: the answer cannot count it
	require.True(t, r.OK)
	c.advance(10 * ms)
	// Another client spent 200 unseen: the upstream had 700 left once
	// the stated request (100) was in, where the buckets think 900.
	learn(t, ta, key, 20*ms, tokens(700))
	assert.Equal(t, 720, left(t, tb, key), "learned, not yet carried: Learn does no I/O")

	calls := a.scripts.n.Load()
	// Level at t0 at most 700, the 200 booked since owed: tat = t0+500ms,
	// so at t0+20ms 520 are left.
	assert.Equal(t, 520, left(t, ta, key))
	assert.Equal(t, int64(1), a.scripts.n.Load()-calls, "carried by the next call, no extra round trip")
	assert.Equal(t, 520, left(t, tb, key), "the other process sees it")
	r = reserve(t, tb, key, 521, 0)
	assert.False(t, r.OK)
	assert.Equal(t, time.Millisecond, r.Delay)

	// Looser statements never loosen, however late or early they come.
	learn(t, tb, key, 0, tokens(1000))
	assert.Equal(t, 520, left(t, tb, key))
	learn(t, tb, key, 20*ms, tokens(900))
	assert.Equal(t, 520, left(t, tb, key))

	// A stricter one wins.
	learn(t, tb, key, 0, tokens(100))
	assert.Equal(t, 100, left(t, tb, key))
	assert.Equal(t, 100, left(t, ta, key))
}

// TestStatedRefillBoundsTheBucket: the statement bounds the level the
// bucket held when the request was sent; one the bucket already keeps
// to, or a looser one, changes nothing.
func TestStatedRefillBoundsTheBucket(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	p := newStatedProc(t, s, c)
	tb := p.bucket(t, 1000, "output-tokens")
	const key = "llm"

	tests := []struct {
		name      string
		giveLeft  int
		wantAfter int
	}{
		{"as the bucket thinks", 900, 900},
		{"others spent 300", 600, 600},
		{"more than the burst", 5000, 600},
		{"none left", 0, 0},
	}
	require.True(t, reserve(t, tb, key, 100, 0).OK)
	for _, tt := range tests {
		learn(t, tb, key, 0, tokens(tt.giveLeft))
		assert.Equal(t, tt.wantAfter, left(t, tb, key), tt.name)
	}
}

// TestStatedRingReachesBack: a statement about a request sent before
// the oldest booking the ring still holds is not applied: the units
// booked since cannot be counted.
func TestStatedRingReachesBack(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	p := newStatedProc(t, s, c)
	tb := p.bucket(t, 1_000_000, "output-tokens")
	const key = "llm"
	for range 200 { // past ringMax (128)
		c.advance(ms)
		require.True(t, reserve(t, tb, key, 1, 0).OK)
	}
	learn(t, tb, key, 150*ms, throttle.Statement{Name: "t", Unit: "output-tokens", Limit: 1_000_000, Remaining: 0, Reset: time.Second, Refills: true})
	assert.Equal(t, 999_999, left(t, tb, key), "older than the ring: skipped")
	learn(t, tb, key, 100*ms, throttle.Statement{Name: "t", Unit: "output-tokens", Limit: 1_000_000, Remaining: 0, Reset: time.Second, Refills: true})
	// Empty 100ms ago, 100 000 refilled since, the 100 booked since owed.
	assert.Equal(t, 99_900, left(t, tb, key), "within it: applied")
}

// requests states a window of 50 requests with remaining left, its reset
// a whole second away.
func requests(remaining int, reset time.Duration) throttle.Statement {
	return throttle.Statement{Name: "requests", Unit: throttle.UnitRequests, Limit: 50, Remaining: remaining, Reset: reset, Absolute: true}
}

// TestStatedWindowBoundsTheFleet: "R more before T", learned by one
// process, bounds every process until T, and nothing after it.
func TestStatedWindowBoundsTheFleet(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	a, b := newStatedProc(t, s, c), newStatedProc(t, s, c)
	ta, tb := a.bucket(t, 100, throttle.UnitRequests), b.bucket(t, 100, throttle.UnitRequests)
	const key = "api"

	require.True(t, reserve(t, ta, key, 1, 0).OK)
	learn(t, ta, key, 0, requests(3, time.Second))
	calls := a.scripts.n.Load()
	r := reserve(t, ta, key, 1, 0) // carries it: 2 left
	require.True(t, r.OK)
	assert.Equal(t, 2, r.Remaining)
	assert.Equal(t, int64(1), a.scripts.n.Load()-calls)
	assert.Equal(t, 2, left(t, tb, key), "Inspect reports the window's bound")
	require.True(t, reserve(t, tb, key, 1, 0).OK)
	require.True(t, reserve(t, tb, key, 1, 0).OK)
	r = reserve(t, tb, key, 1, 0)
	assert.False(t, r.OK, "nothing left before the reset")
	assert.Equal(t, time.Second, r.Delay)
	r = reserve(t, tb, key, 1, -1)
	require.True(t, r.OK)
	assert.Equal(t, time.Second, r.Delay, "booked at the reset")
	c.advance(time.Second)
	assert.True(t, reserve(t, ta, key, 1, 0).OK, "the window is over")

	h, err := s.client(t).HGetAll(context.Background(), "egress:{api}:stated").Result()
	require.NoError(t, err)
	for _, f := range []string{"requests:unit", "requests:kind", "requests:remaining", "requests:left", "requests:sent", "requests:reset", "requests:precision", "ring:requests"} {
		assert.Contains(t, h, f)
	}
	assert.Equal(t, "window", h["requests:kind"])
	assert.Equal(t, "requests", h["requests:unit"])
	assert.Equal(t, "3", h["requests:remaining"])
	ttl, err := s.client(t).PTTL(context.Background(), "egress:{api}:stated").Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, 2*time.Minute, "the record expires, and outlives its reset and latest slot")
}

// TestStatedWindowOrder: of two statements of one window, the one for
// the request sent later wins, whichever arrives first; one for an
// older request, arrived late, wins only if it leaves less; a window
// already over changes nothing.
func TestStatedWindowOrder(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	p := newStatedProc(t, s, c)
	tb := p.bucket(t, 1000, throttle.UnitRequests)
	rdb := s.client(t)
	const key = "api"
	field := func(f string) string {
		v, err := rdb.HGet(context.Background(), "egress:{api}:stated", f).Result()
		require.NoError(t, err)
		return v
	}

	require.True(t, reserve(t, tb, key, 1, 0).OK)
	c.advance(100 * ms)
	// Resets in whole seconds are stated to a second: those within a
	// second of each other are one window.
	tests := []struct {
		name        string
		giveAdvance time.Duration
		giveLatency time.Duration // before now: when the request was sent
		giveReset   time.Duration
		giveLeft    int
		wantLeft    string
	}{
		{"first", 0, 50 * ms, time.Second, 10, "10"},
		{"older, more left: loses", 10 * ms, 90 * ms, time.Second, 12, "10"},
		{"older, less left: wins", 0, 90 * ms, time.Second, 6, "6"},
		{"later, more left (a sliding window's decay): wins", 0, 10 * ms, time.Second, 20, "20"},
		{"the next window: replaces", 0, 5 * ms, 2 * time.Second, 50, "50"},
		{"a window already over: ignored", 0, 5 * ms, 500 * ms, 0, "50"},
	}
	for _, tt := range tests {
		c.advance(tt.giveAdvance)
		learn(t, tb, key, tt.giveLatency, requests(tt.giveLeft, tt.giveReset))
		_ = left(t, tb, key) // carries it
		assert.Equal(t, tt.wantLeft, field("requests:left"), tt.name)
	}
}

// TestStatedClamped: absurd values are clamped: a remaining of 10^18
// bounds nothing; a reset years ahead, or a refilling quota stated empty
// on a bucket that takes a day to refill, holds a key for at most
// throttle.DefaultMaxHold. (A refilling quota's reset beyond it is
// clamped by Statement.Clamp, which keeps the stated pace.)
func TestStatedClamped(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	p := newStatedProc(t, s, c)
	tests := []struct {
		name      string
		giveRate  throttle.Rate
		give      throttle.Statement
		wantDelay time.Duration
	}{
		{"remaining 10^18", throttle.PerSecond(10),
			throttle.Statement{Name: "r", Unit: throttle.UnitRequests, Limit: -1, Remaining: 1e18, Reset: time.Second, Refills: true}, 0},
		{"a window's reset in 10 years", throttle.PerSecond(10),
			throttle.Statement{Name: "w", Limit: 10, Remaining: 0, Reset: 10 * 365 * 24 * time.Hour}, throttle.DefaultMaxHold},
		{"a day's bucket empty", throttle.PerDay(10),
			throttle.Statement{Name: "d", Unit: throttle.UnitRequests, Limit: 10, Remaining: 0, Reset: 30 * time.Second, Refills: true}, throttle.DefaultMaxHold},
	}
	for _, tt := range tests {
		tb, err := NewTokenBucket(p.client.rdb, tt.giveRate, tt.giveRate.N, WithClient(p.client), WithStated(throttle.UnitRequests))
		require.NoError(t, err)
		learn(t, tb, tt.name, 0, tt.give)
		r := reserve(t, tb, tt.name, 1, -1)
		require.True(t, r.OK)
		assert.Equal(t, tt.wantDelay, r.Delay, tt.name)
	}
}

// TestStatedComposite: in an LLM budget, each statement goes to the
// parts following its unit, and parts that follow nothing are left
// alone; every request stays one script call.
func TestStatedComposite(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	p := newStatedProc(t, s, c)
	rdb := p.client.rdb
	ctx := context.Background()
	rpm, err := NewTokenBucket(rdb, throttle.PerSecond(50), 50, WithClient(p.client))
	require.NoError(t, err)
	itpm, err := NewTokenBucket(rdb, throttle.PerSecond(2000), 2000, WithClient(p.client), WithStated("input-tokens"))
	require.NoError(t, err)
	otpm, err := NewTokenBucket(rdb, throttle.PerSecond(1000), 1000, WithClient(p.client), WithStated("output-tokens"))
	require.NoError(t, err)
	all, err := All(rpm, itpm, otpm)
	require.NoError(t, err)
	const key = "llm"

	start := p.scripts.n.Load()
	const n = 20
	for i := range n {
		r, err := all.ReserveParts(ctx, key, []int{1, 10, 40}, -1)
		require.NoError(t, err)
		require.True(t, r.OK)
		// The upstream saw only these: it agrees with the buckets.
		learn(t, all, key, 0,
			throttle.Statement{Name: "input-tokens", Unit: "input-tokens", Limit: 2000, Remaining: 2000 - 10*(i+1), Reset: time.Second, Refills: true},
			throttle.Statement{Name: "output-tokens", Unit: "output-tokens", Limit: 1000, Remaining: 1000 - 40*(i+1), Reset: time.Second, Refills: true})
	}
	assert.Equal(t, int64(n), p.scripts.n.Load()-start, "one script call per request, statements included")
	assert.Equal(t, 30, left(t, rpm, key))
	assert.Equal(t, 1800, left(t, itpm, key), "a statement that agrees changes nothing")
	assert.Equal(t, 200, left(t, otpm, key))

	// Another client spent 150 output tokens.
	learn(t, all, key, 0, throttle.Statement{Name: "output-tokens", Unit: "output-tokens", Limit: 1000, Remaining: 50, Reset: time.Second, Refills: true})
	_, err = all.Inspect(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, 50, left(t, otpm, key))
	assert.Equal(t, 1800, left(t, itpm, key))
	assert.Equal(t, 30, left(t, rpm, key))
}

// TestStatedNotFollowed: without WithStated, Learn does nothing and the
// calls carry nothing.
func TestStatedNotFollowed(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	p := newStatedProc(t, s, c)
	tb, err := NewTokenBucket(p.client.rdb, throttle.PerSecond(10), 10, WithClient(p.client))
	require.NoError(t, err)
	learn(t, tb, "k", 0, requests(0, time.Second))
	assert.Equal(t, 10, left(t, tb, "k"))
	n, err := s.client(t).Exists(context.Background(), "egress:{k}:stated").Result()
	require.NoError(t, err)
	assert.Zero(t, n)
}

// TestStatedBadConfig: a unit that cannot be carried is an error naming
// it, and so is WithStated with WithSlotLease.
func TestStatedBadConfig(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	for _, u := range []string{"", "-", "a b", "a:b"} {
		_, err := NewTokenBucket(rdb, throttle.PerSecond(1), 1, WithStated(u))
		assert.ErrorContains(t, err, fmt.Sprintf("WithStated unit must be non-empty, not \"-\", and have no spaces or ':', got %q", u))
	}
	_, err := NewTokenBucket(rdb, throttle.PerSecond(1), 1, WithStated("requests"), WithSlotLease(time.Second))
	assert.ErrorContains(t, err, "WithSlotLease")
}

// TestStatedCluster: the record lives under the budget's hash tag, so a
// statement rides on the key's call on a Redis Cluster too.
func TestStatedCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	rdb := startCluster(t)
	c := newClock(time.Hour)
	tb, err := NewTokenBucket(rdb, throttle.PerSecond(100), 100, c.option(), WithStated(throttle.UnitRequests))
	require.NoError(t, err)
	closeAll(t, tb)
	ctx := context.Background()
	for _, key := range []string{"a", "b", "api.example.com"} {
		require.True(t, reserve(t, tb, key, 1, 0).OK)
		learn(t, tb, key, 0, requests(0, time.Second))
		r := reserve(t, tb, key, 1, 0)
		assert.False(t, r.OK, key)
		assert.Equal(t, time.Second, r.Delay, key)
		ks, err := tb.keys(key)
		require.NoError(t, err)
		want, err := rdb.ClusterKeySlot(ctx, ks[0]).Result()
		require.NoError(t, err)
		got, err := rdb.ClusterKeySlot(ctx, "egress:{"+key+"}:stated").Result()
		require.NoError(t, err)
		assert.Equal(t, want, got)
		assert.Equal(t, int64(1), rdb.Exists(ctx, "egress:{"+key+"}:stated").Val(), key)
	}
}
