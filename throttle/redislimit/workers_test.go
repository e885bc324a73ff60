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

// TestWorkersPipeline has many goroutines share one key on a client that
// does not bound calls by their context: the calls that queue while a
// worker is busy go in one pipeline, each still one script, and exactly
// the burst is granted, before and after a script flush.
func TestWorkersPipeline(t *testing.T) {
	s := startRedis(t)
	rdb := s.client(t)
	var p pipelines
	rdb.AddHook(&p)
	ctx := context.Background()
	const burst = 300
	l, err := NewTokenBucket(rdb, throttle.Rate{N: 1, Per: time.Hour}, burst)
	require.NoError(t, err)
	defer l.Close()
	require.False(t, l.c.direct)
	l.c.workers.idle = 10 * time.Millisecond

	tests := []struct {
		name      string
		giveFlush bool
	}{
		{"loaded", false},
		{"after a script flush", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := tt.name
			_, err := l.AllowN(ctx, "warm-up", 1) // load the script
			require.NoError(t, err)
			if tt.giveFlush {
				require.NoError(t, rdb.ScriptFlush(ctx).Err())
			}
			// With no worker left, the first call starts one, and the
			// others queue for its pipelines.
			require.Eventually(t, func() bool { return l.c.workers.live.Load() == 0 }, time.Second, time.Millisecond)
			var granted atomic.Int64
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					for range 2 * burst / 64 {
						ok, err := l.AllowN(ctx, key, 1)
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
