package redislimit

import (
	"context"
	"github.com/redis/go-redis/v9"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/throttle"
)

// fleetProc is one process of a fleet: its own go-redis client, counted by
// a hook, its own Client.
type fleetProc struct {
	client *Client
	cmds   atomic.Int64
}

func newFleetProc(t *testing.T, s *server, c *clock) *fleetProc {
	t.Helper()
	rdb := s.client(t)
	p := &fleetProc{}
	rdb.AddHook(allCommands{&p.cmds})
	var err error
	p.client, err = NewClient(rdb, c.option())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.client.Close() })
	return p
}

func fleetGet(t *testing.T, client *http.Client, url string) int {
	t.Helper()
	resp, err := client.Get(url)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode
}

// TestStatedTransportRoundTrips: processes sharing a WithStated
// budget through their Transports make one Redis round trip per request,
// including the requests whose answer states the window spent (a 200 at
// remaining 0): the statement rides on the next booking, as documented.
func TestStatedTransportRoundTrips(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	var mu sync.Mutex
	n := 0
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		n++
		w.Header().Set("X-RateLimit-Limit", "4")
		w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(3-n%4))
		w.Header().Set("X-RateLimit-Reset", "1")
	}))
	defer upstream.Close()

	var procs []*fleetProc
	var clients []*http.Client
	for range 3 {
		p := newFleetProc(t, s, c)
		l, err := NewTokenBucket(p.client.rdb, throttle.PerSecond(100), 100, WithClient(p.client), WithStated(throttle.UnitRequests))
		require.NoError(t, err)
		cl := egress.NewClient(egress.WithLimiter(l))
		defer cl.CloseIdleConnections()
		procs = append(procs, p)
		clients = append(clients, cl)
	}
	for _, cl := range clients { // warm: connections' handshakes
		c.advance(2 * time.Second)
		fleetGet(t, cl, upstream.URL)
	}
	for _, p := range procs {
		p.cmds.Store(0)
	}
	const requests = 24
	for i := range requests {
		c.advance(2 * time.Second) // every stated window is over
		require.Equal(t, 200, fleetGet(t, clients[i%3], upstream.URL))
	}
	var total int64
	for _, p := range procs {
		total += p.cmds.Load()
	}
	assert.Equal(t, "1.00", strconv.FormatFloat(float64(total)/requests, 'f', 2, 64), "round trips per request")
}

// TestStatedTokensSpentNotPaused: an LLM API's 200 stating its
// refilling token quota spent ("0 left, full again in 30s") tightens the
// fleet's WithStated("tokens") bucket: tokens come back at the bucket's
// refill, as WithStated documents. It is a budget, not a pause: the
// Transport does not hold every process for the whole 30 s refill.
func TestStatedTokensSpentNotPaused(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.advance(time.Second) // the call takes a second on Redis's clock
		w.Header().Set("X-Ratelimit-Limit-Tokens", "1000")
		w.Header().Set("X-Ratelimit-Remaining-Tokens", "0")
		w.Header().Set("X-Ratelimit-Reset-Tokens", "30s")
	}))
	defer upstream.Close()
	host := upstream.Listener.Addr().String()
	a, b := newFleetProc(t, s, c), newFleetProc(t, s, c)
	perMinute := func(p *fleetProc) *TokenBucket {
		l, err := NewTokenBucket(p.client.rdb, throttle.PerMinute(1000), 1000, WithClient(p.client), WithStated("tokens"))
		require.NoError(t, err)
		return l
	}
	la, lb := perMinute(a), perMinute(b)
	client := egress.NewClient(egress.WithLimiter(la), egress.WithCost(func(*http.Request) int { return 100 }))
	defer client.CloseIdleConnections()
	fleetGet(t, client, upstream.URL)
	before := a.cmds.Load()
	_ = left(t, la, host) // a's next call carries the statement
	assert.Equal(t, int64(1), a.cmds.Load()-before)

	// Empty when the request was sent: 100 tokens back after 6 s at
	// 1000/min (less the request's real latency), not after 30 s.
	r := reserve(t, lb, host, 100, -1)
	require.True(t, r.OK)
	assert.Greater(t, r.Delay, 5*time.Second)
	assert.Less(t, r.Delay, 7*time.Second, "held by the bucket's refill, not paused for the quota's full reset")
}

// TestStatedWindowSpentHoldsFleet: a's 200 stating "0 more until
// T" (X-RateLimit-*), carried by a's next call, holds b's next booking
// until T, and nothing after it.
func TestStatedWindowSpentHoldsFleet(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Limit", "10")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", "5")
	}))
	defer upstream.Close()
	host := upstream.Listener.Addr().String()
	a, b := newFleetProc(t, s, c), newFleetProc(t, s, c)
	la, err := NewTokenBucket(a.client.rdb, throttle.PerSecond(100), 100, WithClient(a.client), WithStated(throttle.UnitRequests))
	require.NoError(t, err)
	lb, err := NewTokenBucket(b.client.rdb, throttle.PerSecond(100), 100, WithClient(b.client), WithStated(throttle.UnitRequests))
	require.NoError(t, err)
	client := egress.NewClient(egress.WithLimiter(la))
	defer client.CloseIdleConnections()
	fleetGet(t, client, upstream.URL)
	assert.Equal(t, 0, left(t, la, host), "carried")
	r := reserve(t, lb, host, 1, 0)
	assert.False(t, r.OK)
	assert.Equal(t, 5*time.Second, r.Delay)
	c.advance(5 * time.Second)
	assert.True(t, reserve(t, lb, host, 1, 0).OK)
}

// TestStatedOrderAcrossProcesses: of two statements of one window
// learned by two processes, the one for the later request wins whatever
// process carries first.
func TestStatedOrderAcrossProcesses(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	for _, laterFirst := range []bool{true, false} {
		key := "order-" + strconv.FormatBool(laterFirst)
		a, b := newFleetProc(t, s, c), newFleetProc(t, s, c)
		ta, err := NewTokenBucket(a.client.rdb, throttle.PerSecond(1000), 1000, WithClient(a.client), WithStated(throttle.UnitRequests))
		require.NoError(t, err)
		tb, err := NewTokenBucket(b.client.rdb, throttle.PerSecond(1000), 1000, WithClient(b.client), WithStated(throttle.UnitRequests))
		require.NoError(t, err)
		require.True(t, reserve(t, ta, key, 1, 0).OK) // a's request, sent at t0
		c.advance(10 * ms)
		require.True(t, reserve(t, tb, key, 1, 0).OK) // b's, sent at t0+10ms
		c.advance(10 * ms)
		// a's answer (older) says 12, b's (newer) says 9: 9 wins either way (an older one arrived late wins only when it leaves less, documented).
		learn(t, ta, key, 20*ms, requests(12, time.Second))
		learn(t, tb, key, 10*ms, requests(9, time.Second))
		if laterFirst {
			_ = left(t, tb, key)
			_ = left(t, ta, key)
		} else {
			_ = left(t, ta, key)
			_ = left(t, tb, key)
		}
		assert.Equal(t, 9, left(t, ta, key), "laterFirst=%v: the later request's statement wins", laterFirst)
		assert.Equal(t, 9, left(t, tb, key))
	}
}

// TestRetryAfterPausesFleet: a 429 with Retry-After, answered to one
// process's Transport, pauses the key in every process.
func TestRetryAfterPausesFleet(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer upstream.Close()
	host := upstream.Listener.Addr().String()
	a, b := newFleetProc(t, s, c), newFleetProc(t, s, c)
	la, err := NewTokenBucket(a.client.rdb, throttle.PerSecond(100), 100, WithClient(a.client), WithStated(throttle.UnitRequests))
	require.NoError(t, err)
	lb, err := NewTokenBucket(b.client.rdb, throttle.PerSecond(100), 100, WithClient(b.client), WithStated(throttle.UnitRequests))
	require.NoError(t, err)
	client := egress.NewClient(egress.WithLimiter(la))
	defer client.CloseIdleConnections()
	require.Equal(t, http.StatusTooManyRequests, fleetGet(t, client, upstream.URL))
	r := reserve(t, lb, host, 1, -1)
	require.True(t, r.OK)
	assert.Greater(t, r.Delay, 6*time.Second)
	assert.LessOrEqual(t, r.Delay, 7*time.Second)
}

// TestOddKeys: keys with spaces, braces and ':' share statements and
// the learned rate (pub/sub included) like any other.
func TestOddKeys(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	for _, key := range []string{"a b", "{x}", "a:b:c", "x}y{z", "a {b} :c", "%20 %"} {
		a, b := newFleetProc(t, s, c), newFleetProc(t, s, c)
		ta, err := NewTokenBucket(a.client.rdb, throttle.PerSecond(100), 100, WithClient(a.client), WithStated(throttle.UnitRequests))
		require.NoError(t, err)
		tb, err := NewTokenBucket(b.client.rdb, throttle.PerSecond(100), 100, WithClient(b.client), WithStated(throttle.UnitRequests))
		require.NoError(t, err)
		require.True(t, reserve(t, ta, key, 1, 0).OK)
		learn(t, ta, key, 0, throttle.Statement{Name: "a b:{c}", Unit: throttle.UnitRequests, Limit: 10, Remaining: 0, Reset: time.Second})
		_ = left(t, ta, key)
		r := reserve(t, tb, key, 1, 0)
		assert.False(t, r.OK, key)
		assert.Equal(t, time.Second, r.Delay, key)

		aa, err := NewAdaptive(a.client.rdb, throttle.PerSecond(100), WithClient(a.client))
		require.NoError(t, err)
		ab, err := NewAdaptive(b.client.rdb, throttle.PerSecond(100), WithClient(b.client))
		require.NoError(t, err)
		adaptiveBook(t, aa, key)
		adaptiveBook(t, aa, key)
		sleeper := adaptiveBook(t, ab, key)
		answer(t, aa, key, true)
		adaptiveBook(t, aa, key)
		require.Eventually(t, func() bool { return sleeper.Until() == 24286*time.Microsecond }, 5*time.Second, 5*ms, key)
		assert.Equal(t, 70.0, ab.Rate(key), key)
	}
}

// TestStatedUnitWhitespace: a unit holding any whitespace the script
// splits the record's text on (Lua's %s: also \v and \f) is an error
// naming it, as one with a space is.
func TestStatedUnitWhitespace(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	for _, u := range []string{"a\vb", "a\fb", "\v", "tokens\f"} {
		_, err := NewTokenBucket(rdb, throttle.PerSecond(1), 1, WithStated(u))
		assert.ErrorContains(t, err, "WithStated unit must be non-empty", "%q", u)
	}
}

// TestStatedSurvivesStall: Redis stops (SIGSTOP) for 2 s, longer
// than the Client's timeout; a's call fails and opens the breaker
// (FailOpen lets the request through). Its answer says "0 more for 5 s",
// and a's next call, which would carry it, fails fast on the open
// breaker. Once Redis answers again, a's next call carries the statement
// still, as an Adaptive's answers wait, and b is held until the reset:
// the statement is not lost with a call that never reached Redis.
func TestStatedSurvivesStall(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	ctx := context.Background()
	proc := func() (*Client, *TokenBucket) {
		rdb := s.client(t)
		cl, err := NewClient(rdb, c.option(), WithTimeout(300*ms))
		require.NoError(t, err)
		t.Cleanup(func() { _ = cl.Close() })
		tb, err := NewTokenBucket(rdb, throttle.PerSecond(100), 100, WithClient(cl), WithStated(throttle.UnitRequests), WithFailurePolicy(FailOpen))
		require.NoError(t, err)
		return cl, tb
	}
	ca, ta := proc()
	_, tb := proc()
	const key = "stall"
	require.True(t, reserve(t, ta, key, 1, 0).OK)
	require.True(t, reserve(t, tb, key, 1, 0).OK)

	require.NoError(t, s.cmd.Process.Signal(syscall.SIGSTOP))
	r, err := ta.Reserve(ctx, key, 1, 0)
	require.NoError(t, err)
	assert.True(t, r.OK, "FailOpen")
	assert.False(t, ca.Available())
	// The request FailOpen let through is answered: nothing more for 5 s.
	learn(t, ta, key, 0, requests(0, 5*time.Second))
	at := c.now()
	r, err = ta.Reserve(ctx, key, 1, 0) // the breaker is open: no call to Redis
	require.NoError(t, err)
	assert.True(t, r.OK, "FailOpen")
	time.Sleep(2 * time.Second)
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGCONT))
	require.Eventually(t, func() bool {
		c.advance(ProbeInterval) // the breaker probes on the frozen clock
		_, err := ta.Inspect(ctx, key)
		return err == nil
	}, 20*time.Second, 50*ms, "Redis answers again")
	stalled := c.now().Sub(at)

	r = reserve(t, tb, key, 1, 0)
	assert.False(t, r.OK, "the statement learned before the stall holds the fleet")
	assert.Equal(t, 5*time.Second-stalled, r.Delay)
}

// TestClusterOddKeys: on a three-node cluster, two processes (each its
// own ClusterClient) share statements and the learned rate for keys with
// spaces, braces and ':', each request one script call.
func TestClusterOddKeys(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	rdb := startCluster(t)
	other := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rdb.Options().Addrs})
	t.Cleanup(func() { _ = other.Close() })
	c := newClock(time.Hour)
	ca, err := NewClient(rdb, c.option())
	require.NoError(t, err)
	t.Cleanup(func() { _ = ca.Close() })
	cb, err := NewClient(other, c.option())
	require.NoError(t, err)
	t.Cleanup(func() { _ = cb.Close() })
	ta, err := NewTokenBucket(rdb, throttle.PerSecond(100), 100, WithClient(ca), WithStated(throttle.UnitRequests))
	require.NoError(t, err)
	tb, err := NewTokenBucket(other, throttle.PerSecond(100), 100, WithClient(cb), WithStated(throttle.UnitRequests))
	require.NoError(t, err)
	aa, err := NewAdaptive(rdb, throttle.PerSecond(100), WithClient(ca))
	require.NoError(t, err)
	ab, err := NewAdaptive(other, throttle.PerSecond(100), WithClient(cb))
	require.NoError(t, err)
	for _, key := range []string{"a b", "{x}", "a:b:c", "x}y{z", "a {b} :c", "%20 %", "}{", "{}"} {
		if key[0] == '}' {
			continue
		}
		require.True(t, reserve(t, ta, key, 1, 0).OK, key)
		learn(t, ta, key, 0, requests(0, time.Second))
		_ = left(t, ta, key)
		r := reserve(t, tb, key, 1, 0)
		assert.False(t, r.OK, key)
		assert.Equal(t, time.Second, r.Delay, key)

		adaptiveBook(t, aa, key)
		answer(t, aa, key, true)
		adaptiveBook(t, aa, key)
		adaptiveBook(t, ab, key)
		assert.Equal(t, 70.0, ab.Rate(key), key)
	}
}
