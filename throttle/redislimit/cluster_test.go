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

// TestCluster runs the limiters on a three-node Redis Cluster: a
// budget's keys share a slot, All books in one script, cancel and pause
// work, pauses reach another client through pub/sub, and a script flush
// on every node costs nothing.
func TestCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	rdb := startCluster(t)
	other := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rdb.Options().Addrs})
	t.Cleanup(func() { _ = other.Close() })
	ctx := context.Background()
	c := newClock(time.Hour)

	perSecond, err := NewTokenBucket(rdb, throttle.PerSecond(10), 2, c.option())
	require.NoError(t, err)
	perDay, err := NewFixedWindow(rdb, 4, 24*time.Hour, c.option())
	require.NoError(t, err)
	log, err := NewSlidingWindow(rdb, 100, time.Minute, c.option())
	require.NoError(t, err)
	elsewhere, err := NewTokenBucket(other, throttle.PerSecond(10), 1, c.option())
	require.NoError(t, err)
	closeAll(t, perSecond, perDay, log, elsewhere)
	both, err := All(perSecond, perDay, log)
	require.NoError(t, err)

	for _, key := range []string{"a", "b", "api.example.com"} {
		r := reserve(t, both, key, 1, -1)
		require.True(t, r.OK)
		ks, err := both.keys(key)
		require.NoError(t, err)
		want, err := rdb.ClusterKeySlot(ctx, ks[0]).Result()
		require.NoError(t, err)
		for _, k := range ks[1:] {
			got, err := rdb.ClusterKeySlot(ctx, k).Result()
			require.NoError(t, err)
			assert.Equal(t, want, got, k)
			assert.Equal(t, int64(1), rdb.Exists(ctx, k).Val(), k)
		}
	}

	// Cancel gives back the latest booking on every part, and All is
	// all-or-nothing.
	reserve(t, both, "c", 1, -1)
	b := book(t, both, "c", 2)
	require.NoError(t, b.Cancel(ctx))
	again := reserve(t, both, "c", 2, -1)
	assert.Equal(t, 100*ms, again.Delay, "the cancelled slot is free again")
	refused := reserve(t, both, "c", 2, time.Second)
	assert.False(t, refused.OK, "the day's window is spent")
	alone := reserve(t, perSecond, "c", 1, -1)
	assert.Equal(t, 200*ms, alone.Delay, "the refusal left the bucket alone")

	// A pause reaches a sleeper on another client through pub/sub.
	sleeper := book(t, elsewhere, "p", 1)
	require.NoError(t, perSecond.Pause(ctx, "p", time.Second))
	require.Eventually(t, func() bool { return sleeper.Until() == time.Second }, 5*time.Second, 5*ms)

	// Calls on many keys at once go out in pipelines, which the cluster
	// client splits by node: every key grants exactly its burst.
	hourly, err := NewTokenBucket(rdb, throttle.Rate{N: 1, Per: time.Hour}, 20, c.option())
	require.NoError(t, err)
	closeAll(t, hourly)
	keys := []string{"k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8"}
	var granted atomic.Int64
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 2 * 20 * len(keys) / 32 {
				ok, err := hourly.AllowN(ctx, keys[(g+i)%len(keys)], 1)
				assert.NoError(t, err)
				if ok {
					granted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(20*len(keys)), granted.Load())

	// A script flush on every node: the next call loads it again.
	require.NoError(t, rdb.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
		return c.ScriptFlush(ctx).Err()
	}))
	r, err := both.Reserve(ctx, "b", 1, -1)
	require.NoError(t, err)
	assert.True(t, r.OK)
}
