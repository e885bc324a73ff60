package main

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// adaptiveRedis names the contender of the part 6 rows with 4 processes.
const adaptiveRedis = "egress (adaptive, redislimit, 4 processes)"

// redisContenders lists egress's Redis-backed contenders for scenario 2
// and the part 6 rows with 4 processes.
func redisContenders() map[string]builder {
	return map[string]builder{"egress (redislimit)": egressRedis, adaptiveRedis: egressAdaptiveRedis}
}

// egressAdaptiveRedis is "egress (adaptive)" with the learned rate in
// Redis: redislimit.NewAdaptive with a ceiling of 1 000/s, shared by
// every process, the record of what the upstream states (in process),
// and WithRetry with the default Policy.
func egressAdaptiveRedis(s spec) (client, error) {
	rt := &roundTrips{}
	rdb := countingClient(s.Redis, 4*s.Goroutines, rt)
	// A prefix of the row's own: the rows share one Redis and one
	// upstream address, and what one row learned must not start the next.
	l, err := redislimit.NewAdaptive(rdb, throttle.PerSecond(1000), redislimit.WithPrefix(fmt.Sprintf("egress:%d:", s.StartAt)))
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	u, err := throttle.NewUpstream()
	if err != nil {
		_ = l.Close()
		_ = rdb.Close()
		return nil, err
	}
	t := egress.NewTransport(base(), egress.WithLimiter(l), egress.WithUpstream(u), egress.WithRetry(retryafter.Policy{}))
	c := &adaptiveClient{httpDoer: httpDoer{httpClient{hc: &http.Client{Transport: t}}}, done: make(chan struct{})}
	key := ""
	if parsed, err := url.Parse(s.URL); err == nil {
		key = parsed.Host // the Transport's default key
	}
	c.wg.Go(func() { c.sample(l, key, time.Unix(0, s.StartAt)) })
	return adaptiveRedisClient{adaptiveClient: c, rt: rt, closers: []func() error{l.Close, rdb.Close}}, nil
}

// adaptiveRedisClient is an adaptiveClient that counts its round trips to
// Redis and closes its limiter and Redis client.
type adaptiveRedisClient struct {
	*adaptiveClient
	rt      *roundTrips
	closers []func() error
}

func (c adaptiveRedisClient) redisRoundTrips() int64 { return c.rt.n.Load() }

func (c adaptiveRedisClient) close() {
	c.adaptiveClient.close()
	for _, f := range c.closers {
		_ = f()
	}
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
