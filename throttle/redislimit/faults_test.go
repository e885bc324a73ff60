package redislimit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

func TestScriptFlush(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
				WithFailurePolicy(tt.givePolicy), WithTimeout(5*time.Second), WithObserver(o.observe))
			require.NoError(t, err)
			defer l.Close()
			key := "restart"

			r, err := l.Reserve(ctx, key, 1, 0)
			require.NoError(t, err)
			require.True(t, r.OK)

			s.kill()
			for range 50 {
				r, err := l.Reserve(ctx, key, 1, 0)
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
			// The restart reset the budget: a decision from Redis shows as
			// the key's state coming back.
			require.Eventually(t, func() bool {
				r, err := l.Reserve(ctx, key, 1, 0)
				return err == nil && r.OK && rdb.Exists(ctx, "egress:{restart}:tb:1000/s").Val() == 1
			}, 10*time.Second, 10*time.Millisecond, "the breaker probes every ProbeInterval")
			_, recoveries := o.counts()
			assert.Equal(t, 1, recoveries)
		})
	}
}

// TestSlowRedis has Redis stall in a script of its own: a call is
// bounded by the timeout on a client that honours context deadlines, and
// by the client's read timeout on one that does not; either way the
// circuit breaker then turns the next call away without trying.
func TestSlowRedis(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		giveOptions  func(addr string) *redis.Options
		wantDeadline bool // the error says the context's deadline passed
	}{
		{"context deadline", func(addr string) *redis.Options {
			return &redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true}
		}, true},
		{"read timeout", func(addr string) *redis.Options {
			return &redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: 50 * time.Millisecond}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startRedis(t)
			rdb := redis.NewClient(tt.giveOptions(s.addr()))
			defer rdb.Close()
			ctx := context.Background()
			l, err := NewTokenBucket(rdb, throttle.PerSecond(10), 10, WithTimeout(50*time.Millisecond))
			require.NoError(t, err)
			defer l.Close()
			// Load the script without the 50 ms bound, which a busy
			// machine may miss: on a client of the server's own, since
			// rdb may have a 50 ms read timeout.
			require.NoError(t, s.client(t).ScriptLoad(ctx, l.client.script.src).Err())
			l.client.script.loaded.Store(true)

			s.stall(t, 30*time.Second)

			start := time.Now()
			_, err = l.Reserve(ctx, "k", 1, 0)
			var ue *UnavailableError
			require.ErrorAs(t, err, &ue)
			assert.NotEqual(t, ErrUnavailable, ue.Err, "Redis was tried")
			if tt.wantDeadline {
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				assert.LessOrEqual(t, strings.Count(err.Error(), context.DeadlineExceeded.Error()), 1, "said once: %v", err)
			}
			assert.Less(t, time.Since(start), 10*time.Second, "not the 30 s the script stalls")

			_, err = l.Reserve(ctx, "k", 1, 0)
			require.ErrorAs(t, err, &ue)
			assert.Equal(t, ErrUnavailable, ue.Err, "the breaker is open")
			s.kill() // ends the stall
		})
	}
}

func TestCallerCancelIsNotAnOutage(t *testing.T) {
	t.Parallel()
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

// TestShortDeadlinesMeetTheFailurePolicy: with Redis gone, callers whose
// deadlines are shorter than WithTimeout end with their context's error,
// since nothing tells a slow reply from none; once nothing has been
// answered for a whole WithTimeout, the breaker opens and the failure
// policy decides at once. Before, every such caller paid its deadline for
// the whole outage, and FailOpen never granted (found by a user's test).
func TestShortDeadlinesMeetTheFailurePolicy(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	var o observed
	l, err := NewTokenBucket(s.client(t), throttle.PerSecond(100), 10,
		WithFailurePolicy(FailOpen), WithTimeout(100*time.Millisecond), WithObserver(o.observe))
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Reserve(context.Background(), "k", 1, 0)
	require.NoError(t, err)
	s.kill()
	granted := 0
	for range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
		r, err := l.Reserve(ctx, "k", 1, 0)
		cancel()
		if err == nil && r.OK {
			granted++
		}
	}
	failures, _ := o.counts()
	assert.Positive(t, failures, "the breaker opened")
	assert.Positive(t, granted, "FailOpen granted")
}

// TestWithoutSubscribe uses a client that hides Subscribe: pauses are
// learned from replies only.
func TestWithoutSubscribe(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	var plain redis.Scripter = struct{ redis.Scripter }{rdb}
	l, err := NewTokenBucket(plain, throttle.PerSecond(10), 1)
	require.NoError(t, err)
	defer l.Close()
	assert.Nil(t, l.client.ps)
	reserve(t, l, "k", 1, 0)
	b := book(t, l, "k", 1)
	require.NoError(t, l.Pause(ctx, "k", time.Second))
	assert.Greater(t, b.Until(), time.Second, "the pause's own reply updates this process")
}
