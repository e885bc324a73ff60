package main

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// roundTrips is a go-redis hook that counts the commands a client sends
// to Redis, a pipeline counting as one round trip. Commands that scripts
// run inside Redis are not round trips and are not counted, unlike in
// INFO commandstats.
type roundTrips struct{ n atomic.Int64 }

func (*roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

// countingClient returns a go-redis client on addr whose round trips are
// counted in rt.
func countingClient(addr string, poolSize int, rt *roundTrips) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: poolSize})
	rdb.AddHook(rt)
	return rdb
}

var _ redis.Hook = (*roundTrips)(nil)
