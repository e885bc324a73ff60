package main

import (
	"context"
	"math"

	"github.com/egress-go/egress/internal/upstream"
	"net/http"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// egressContenders lists egress's own contenders.
func egressContenders() map[string]builder {
	m := map[string]builder{
		"egress":                  egressInProcess,
		"egress (README)":         egressReadme(1),
		"egress (25% too high)":   egressReadme(1.25),
		"egress (WithRetry only)": egressRetryOnly,
		egressCounterRetry:        egressSlidingCounter,
		egressBurstOne:            egressBurstOneClient,
	}
	for _, more := range []map[string]builder{adaptiveContenders(), windowContenders(), redisContenders()} {
		for name, b := range more {
			if _, dup := m[name]; dup {
				// scenario 4's "egress sliding counter" (no Transport,
				// no retry) once replaced 5a's silently
				panic("bench: two contenders named " + name)
			}
			m[name] = b
		}
	}
	return m
}

// egressCounterRetry names egressSlidingCounter, apart from scenario 4's
// "egress sliding counter", which waits on the counter alone.
const egressCounterRetry = "egress sliding counter (WithRetry)"

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

// egressReadme is egress as its README recommends for the algorithm the
// upstream documents, at factor times the published limit: a leaky bucket
// for an nginx-style leaky bucket, a sliding window for "N per window",
// and a token bucket otherwise, each with WithTolerance(DefaultTolerance),
// beside the record of what the upstream states (WithUpstream), and
// WithRetry with the default Policy.
func egressReadme(factor float64) builder {
	return func(s spec) (client, error) {
		rate := throttle.PerSecond(int(math.Round(s.Rate * factor)))
		limit := int(math.Round(float64(s.Limit) * factor))
		tolerance := throttle.WithTolerance(throttle.DefaultTolerance)
		var l throttle.Limiter
		var err error
		switch s.Algorithm {
		case upstream.LeakyBucket:
			l, err = throttle.NewLeakyBucket(rate, s.Burst, tolerance)
		case upstream.SlidingLog, upstream.FixedWindow:
			l, err = throttle.NewSlidingWindow(limit, s.Window, tolerance)
		default:
			l, err = throttle.NewTokenBucket(rate, s.Burst, tolerance)
		}
		if err != nil {
			return nil, err
		}
		return followingClient(l)
	}
}

// egressSlidingCounter is egress with the sliding-window counter, the
// algorithm go-chi/httprate documents, at its published limit.
func egressSlidingCounter(s spec) (client, error) {
	l, err := throttle.NewSlidingWindowCounter(s.Limit, s.Window, throttle.WithTolerance(throttle.DefaultTolerance))
	if err != nil {
		return nil, err
	}
	return egressClient(l), nil
}

// egressRetryOnly is egress with no limiter: only WithRetry with the
// default Policy, so what the upstream answers is all that shapes the
// pace.
func egressRetryOnly(spec) (client, error) {
	t := egress.NewTransport(base(), egress.WithRetry(retryafter.Policy{}))
	return httpDoer{httpClient{hc: &http.Client{Transport: t}}}, nil
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
