package main

import (
	"net/http"
	"time"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// llmEgressSettleRedis returns the build of an egress client that settles
// on a redislimit budget shared by every process: one redislimit.All of
// three token buckets, booked with ReserveParts in one script call and
// settled through the Transport, with at most inFlight calls of this
// process booked and not yet answered (0: no bound). With stated, the
// token buckets follow the API's headers (redislimit.WithStated).
func llmEgressSettleRedis(inFlight int, stated bool) func(llmScenario, llmEnv) (llmClient, error) {
	return func(sc llmScenario, env llmEnv) (llmClient, error) {
		rt := &roundTrips{}
		rdb := countingClient(env.redis, 4*sc.workers, rt)
		// Redis gets 5 s before failing closed, so that a loaded machine
		// does not turn slow replies into refused prompts.
		client, err := redislimit.NewClient(rdb, redislimit.WithTimeout(5*time.Second))
		if err != nil {
			_ = rdb.Close()
			return nil, err
		}
		closers := []func() error{client.Close, rdb.Close}
		fail := func(err error) (llmClient, error) {
			for _, f := range closers {
				_ = f()
			}
			return nil, err
		}
		var parts []redislimit.Part
		for i, limit := range []int{sc.limits.Requests, sc.limits.InputTokens, sc.limits.OutputTokens} {
			opts := []redislimit.Option{redislimit.WithClient(client), redislimit.WithTolerance(throttle.DefaultTolerance)}
			if stated && i > 0 {
				opts = append(opts, redislimit.WithStated([]string{"", "input-tokens", "output-tokens"}[i]))
			}
			tb, err := redislimit.NewTokenBucket(rdb, throttle.Rate{N: limit, Per: sc.limits.Period}, limit, opts...)
			if err != nil {
				return fail(err)
			}
			closers = append([]func() error{tb.Close}, closers...)
			parts = append(parts, tb)
		}
		all, err := redislimit.All(parts...)
		if err != nil {
			return fail(err)
		}
		opts := []egress.Option{egress.WithLimiter(all), egress.WithEstimate(llmEstimateOf), egress.WithRetry(retryafter.Policy{})}
		if inFlight > 0 {
			q, err := queue.New(inFlight, sc.workers)
			if err != nil {
				return fail(err)
			}
			opts = append(opts, egress.WithQueue(q))
		}
		hc := llmHTTP(func(base http.RoundTripper) http.RoundTripper { return egress.NewTransport(base, opts...) })
		return &llmSettleRedisClient{
			llmSettleClient: llmSettleClient{hc: hc, maxTokens: sc.maxTokens},
			rt:              rt, closers: closers,
		}, nil
	}
}

// llmSettleRedisClient is llmSettleClient on a budget in Redis.
type llmSettleRedisClient struct {
	llmSettleClient
	rt      *roundTrips
	closers []func() error // run by close, in order; the Client's Close sends the settles still queued
}

func (c *llmSettleRedisClient) redisRoundTrips() int64 { return c.rt.n.Load() }

func (c *llmSettleRedisClient) close() {
	c.llmSettleClient.close()
	for _, f := range c.closers {
		_ = f()
	}
}
