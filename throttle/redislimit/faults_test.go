package redislimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

func TestScriptFlush(t *testing.T) {
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	l, err := NewTokenBucket(rdb, throttle.PerSecond(1000), 1000)
	require.NoError(t, err)
	closeAll(t, l)
	for i := range 20 {
		if i == 10 {
			require.NoError(t, rdb.ScriptFlush(ctx).Err())
		}
		r, err := l.Reserve(ctx, "k", 1, 0)
		require.NoError(t, err, "call %d", i)
		assert.True(t, r.OK)
	}
}

// observed collects what an observer hears.
type observed struct {
	mu     sync.Mutex
	events []Event
}

func (o *observed) observe(e Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}

func (o *observed) counts() (failures, recoveries int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.events {
		if e.Recovered {
			recoveries++
		} else {
			failures++
		}
	}
	return failures, recoveries
}

// TestRestart kills redis-server mid-run and restarts it, under each
// failure policy: while it is down the policy decides, and within about
// a second of its return decisions come from Redis again.
func TestRestart(t *testing.T) {
	local, err := throttle.NewTokenBucket(throttle.PerSecond(1000), 1000)
	require.NoError(t, err)
	tests := []struct {
		name       string
		givePolicy FailurePolicy
		wantOK     bool // while Redis is down
		wantErr    error
	}{
		{name: "fail closed", givePolicy: FailClosed, wantErr: ErrUnavailable},
		{name: "fail open", givePolicy: FailOpen, wantOK: true},
		{name: "fallback", givePolicy: Fallback(local), wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startRedis(t)
			rdb := s.client(t)
			ctx := context.Background()
			var o observed
			l, err := NewTokenBucket(rdb, throttle.PerSecond(1000), 1000,
				WithFailurePolicy(tt.givePolicy), WithTimeout(100*time.Millisecond), WithObserver(o.observe))
			require.NoError(t, err)
			defer l.Close()
			key := "restart"

			r, err := l.Reserve(ctx, key, 1, 0)
			require.NoError(t, err)
			require.True(t, r.OK)

			s.kill()
			for range 50 { // an outage costs no timeout per call
				start := time.Now()
				r, err := l.Reserve(ctx, key, 1, 0)
				assert.Less(t, time.Since(start), 500*time.Millisecond)
				if tt.wantErr != nil {
					require.ErrorIs(t, err, tt.wantErr)
					var ue *UnavailableError
					require.ErrorAs(t, err, &ue)
					continue
				}
				require.NoError(t, err)
				assert.Equal(t, tt.wantOK, r.OK)
			}
			failures, _ := o.counts()
			assert.Positive(t, failures)
			assert.Less(t, failures, 10, "the breaker turns calls away without trying")

			s.start()
			back := time.Now()
			// The restart reset the budget: a decision from Redis shows as
			// the key's state coming back.
			require.Eventually(t, func() bool {
				r, err := l.Reserve(ctx, key, 1, 0)
				return err == nil && r.OK && rdb.Exists(ctx, "egress:{restart}:tb:1000/s").Val() == 1
			}, 3*time.Second, 10*time.Millisecond)
			assert.Less(t, time.Since(back), 1500*time.Millisecond, "recovery within about a second")
			_, recoveries := o.counts()
			assert.Equal(t, 1, recoveries)
		})
	}
}

// TestSlowRedis has Redis stall in a script of its own: every call is
// bounded by the timeout, and the circuit breaker keeps later calls from
// waiting at all. A client that honours context deadlines is called on
// the caller's goroutine, any other on a worker.
func TestSlowRedis(t *testing.T) {
	tests := []struct {
		name        string
		giveContext bool
		wantDirect  bool
	}{
		{"worker", false, false},
		{"direct", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			testSlowRedis(t, tt.giveContext, tt.wantDirect)
		})
	}
}

func testSlowRedis(t *testing.T, contextTimeout, wantDirect bool) {
	s := startRedis(t, "--enable-debug-command", "local")
	rdb := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1, ContextTimeoutEnabled: contextTimeout})
	defer rdb.Close()
	ctx := context.Background()
	l, err := NewTokenBucket(rdb, throttle.PerSecond(10), 10, WithTimeout(50*time.Millisecond))
	require.NoError(t, err)
	defer l.Close()
	assert.Equal(t, wantDirect, l.c.direct)
	_, err = l.Reserve(ctx, "k", 1, 0) // load the script
	require.NoError(t, err)

	blocker := s.client(t)
	stalled := make(chan error, 1)
	go func() { stalled <- blocker.Do(ctx, "DEBUG", "SLEEP", "0.6").Err() }()
	time.Sleep(50 * time.Millisecond) // let the sleep begin

	start := time.Now()
	_, err = l.Reserve(ctx, "k", 1, 0)
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 300*time.Millisecond)

	start = time.Now()
	_, err = l.Reserve(ctx, "k", 1, 0)
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.Less(t, time.Since(start), 10*time.Millisecond, "the breaker is open")
	require.NoError(t, <-stalled)
}

func TestCallerCancelIsNotAnOutage(t *testing.T) {
	s := startRedis(t)
	rdb := s.client(t)
	var o observed
	l, err := NewTokenBucket(rdb, throttle.PerSecond(10), 10, WithObserver(o.observe))
	require.NoError(t, err)
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = l.Reserve(ctx, "k", 1, 0)
	assert.True(t, errors.Is(err, context.Canceled))
	failures, _ := o.counts()
	assert.Zero(t, failures)
}

// TestWithoutSubscribe uses a client that hides Subscribe: pauses are
// learned from replies only.
func TestWithoutSubscribe(t *testing.T) {
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	var plain redis.Scripter = struct{ redis.Scripter }{rdb}
	l, err := NewTokenBucket(plain, throttle.PerSecond(10), 1)
	require.NoError(t, err)
	defer l.Close()
	assert.Nil(t, l.c.lis.ps)
	reserve(t, l, "k", 1, 0)
	_, b, err := l.book(ctx, "k", 1, -1, true)
	require.NoError(t, err)
	require.NoError(t, l.Pause(ctx, "k", time.Second))
	assert.Greater(t, b.Until(), time.Second, "the pause's own reply updates this process")
}
