package main

import (
	"context"
	"net/http"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// egressContenders lists egress's own contenders.
func egressContenders() map[string]builder {
	m := map[string]builder{"egress": egressInProcess}
	for name, b := range windowContenders() {
		m[name] = b
	}
	for name, b := range redisContenders() {
		m[name] = b
	}
	return m
}

// egressInProcess is egress as its README recommends for "the API allows
// N per second with a burst of B": a Transport with a token bucket at the
// published limit plus WithTolerance(DefaultTolerance), and WithRetry
// with the default Policy, so a 429 pauses every caller of the key.
func egressInProcess(s spec) (client, error) {
	tb, err := throttle.NewTokenBucket(publishedRate(s.Rate), s.Burst, throttle.WithTolerance(throttle.DefaultTolerance))
	if err != nil {
		return nil, err
	}
	return egressClient(tb), nil
}

// egressClient wraps base in a Transport on l with the default retry
// policy.
func egressClient(l throttle.Limiter) httpDoer {
	t := egress.NewTransport(base(), egress.WithLimiter(l), egress.WithRetry(retryafter.Policy{}))
	return httpDoer{httpClient{hc: &http.Client{Transport: t}}}
}

// publishedRate turns a rate per second into a throttle.Rate.
func publishedRate(perSecond float64) throttle.Rate {
	return throttle.PerSecond(int(perSecond))
}

// windowClient sends each request after throttle.Wait on l, without
// retries: scenario 4 looks at what each algorithm lets through.
type windowClient struct {
	httpClient
	lim throttle.Limiter
}

func (c windowClient) do(ctx context.Context, url string) (int, error) {
	if err := throttle.Wait(ctx, c.lim, "bench", 1); err != nil {
		return 0, err
	}
	resp, err := c.get(ctx, url)
	if err != nil {
		return 0, err
	}
	drain(resp)
	return resp.StatusCode, nil
}
