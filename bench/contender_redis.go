package main

import (
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// redisContenders lists egress's Redis-backed contenders for scenario 2.
func redisContenders() map[string]builder {
	return map[string]builder{"egress (redislimit)": egressRedis}
}

// egressRedis is egress as its README recommends for a quota shared by
// processes: a Transport on a redislimit token bucket at the published
// limit with WithTolerance(DefaultTolerance), and the default retry
// policy. A 429 in one process pauses every process.
func egressRedis(s spec) (client, error) {
	rt := &roundTrips{}
	rdb := countingClient(s.Redis, 4*s.Goroutines, rt)
	tb, err := redislimit.NewTokenBucket(rdb, publishedRate(s.Rate), s.Burst, redislimit.WithTolerance(throttle.DefaultTolerance))
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return redisDoer{httpDoer: egressClient(tb), rt: rt, closers: []func() error{tb.Close, rdb.Close}}, nil
}

// redisDoer is an httpDoer that also closes its limiter and Redis client.
type redisDoer struct {
	httpDoer
	rt      *roundTrips
	closers []func() error
}

func (c redisDoer) redisRoundTrips() int64 { return c.rt.n.Load() }

func (c redisDoer) close() {
	c.httpDoer.close()
	for _, f := range c.closers {
		_ = f()
	}
}
