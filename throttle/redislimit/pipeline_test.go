package redislimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// pipelines counts the pipelines a client sends.
type pipelines struct{ n atomic.Int64 }

func (*pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		p.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestPipelineGrantsExactlyTheBurst has many goroutines share one key:
// the calls that start while one is on the wire go in one pipeline, each
// still one script, and exactly the burst is granted, before and after a
// script flush.
func TestPipelineGrantsExactlyTheBurst(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	var p pipelines
	rdb.AddHook(&p)
	ctx := context.Background()
	const burst = 300
	l, err := NewTokenBucket(rdb, throttle.Rate{N: 1, Per: time.Hour}, burst, WithTimeout(time.Minute)) // a busy machine is no outage
	require.NoError(t, err)
	closeAll(t, l)
	tests := []struct {
		name      string
		giveFlush bool
	}{
		{"loaded", false},
		{"after a script flush", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.AllowN(ctx, "warm-up", 1) // load the script
			require.NoError(t, err)
			if tt.giveFlush {
				require.NoError(t, rdb.ScriptFlush(ctx).Err())
			}
			var granted atomic.Int64
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					for range 2 * burst / 64 {
						ok, err := l.AllowN(ctx, tt.name, 1)
						assert.NoError(t, err)
						if ok {
							granted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			assert.Equal(t, int64(burst), granted.Load())
		})
	}
	assert.Positive(t, p.n.Load(), "pipelines")
}

// TestPipelineCallerGivesUp stalls Redis while one call is on the wire:
// a caller queued behind it whose context ends returns at once, and one
// that waits is answered once Redis is back.
func TestPipelineCallerGivesUp(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1, ContextTimeoutEnabled: true, ReadTimeout: -1, WriteTimeout: -1}) // only the context bounds a call
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	l, err := NewTokenBucket(rdb, throttle.PerSecond(1000), 1000, WithTimeout(30*time.Second))
	require.NoError(t, err)
	closeAll(t, l)
	reserve(t, l, "k", 1, 0) // load the script

	s.stall(t, 5*time.Second)

	order := make(chan string, 3)
	var wg sync.WaitGroup
	wg.Go(func() { // on the wire
		_, err := l.Reserve(ctx, "k", 1, 0)
		assert.NoError(t, err)
		order <- "on the wire"
	})
	require.Eventually(t, func() bool {
		l.client.batcher.mu.Lock()
		defer l.client.batcher.mu.Unlock()
		return l.client.batcher.sending > 0
	}, 5*time.Second, time.Millisecond)
	wg.Go(func() { // queued, waits
		r, err := l.Reserve(ctx, "k", 1, 0)
		assert.NoError(t, err)
		assert.True(t, r.OK)
		order <- "waited"
	})
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	_, err = l.Reserve(short, "k", 1, 0)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	order <- "gave up"
	wg.Wait()
	close(order)
	var got []string
	for o := range order {
		got = append(got, o)
	}
	assert.Equal(t, "gave up", got[0], "before Redis came back")
	assert.ElementsMatch(t, []string{"gave up", "on the wire", "waited"}, got)
}

// TestPipelineQueuedCallsKeepTheirBound stalls Redis while one call,
// whose caller gives up soon, is on the wire: the calls queued behind it,
// whose contexts never end, have no timer of their own, and still give
// up with Redis unavailable once the Client's timeout has passed, rather
// than wait for Redis.
func TestPipelineQueuedCallsKeepTheirBound(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1, ContextTimeoutEnabled: true, ReadTimeout: -1, WriteTimeout: -1}) // only the context bounds a call
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	l, err := NewTokenBucket(rdb, throttle.PerSecond(1000), 1000, WithTimeout(3*time.Second))
	require.NoError(t, err)
	closeAll(t, l)
	reserve(t, l, "k", 1, 0) // load the script

	s.stall(t, 10*time.Minute) // until the server is killed

	var wg sync.WaitGroup
	wg.Go(func() { // on the wire, until its caller gives up
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := l.Reserve(short, "k", 1, 0)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
	require.Eventually(t, func() bool {
		l.client.batcher.mu.Lock()
		defer l.client.batcher.mu.Unlock()
		return l.client.batcher.sending > 0
	}, 5*time.Second, time.Millisecond)
	errs := make(chan error, 8)
	for range 8 { // queued, then sent in one pipeline while Redis sleeps
		wg.Go(func() {
			_, err := l.Reserve(ctx, "k", 1, 0)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.ErrorIs(t, err, ErrUnavailable)
	}
}
