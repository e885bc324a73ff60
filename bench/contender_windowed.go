package main

import (
	"time"

	"github.com/egress-go/egress/throttle"
)

// windowContenders lists egress's algorithms for scenario 4, each set to
// the upstream's "Limit per Window" with DefaultTolerance.
func windowContenders() map[string]builder {
	tolerance := throttle.WithTolerance(throttle.DefaultTolerance)
	window := func(build func(limit int, window time.Duration) (throttle.Limiter, error)) builder {
		return func(s spec) (client, error) {
			l, err := build(s.Limit, s.Window)
			if err != nil {
				return nil, err
			}
			return windowClient{httpClient: newHTTPClient(), lim: l}, nil
		}
	}
	return map[string]builder{
		"egress fixed window": window(func(limit int, w time.Duration) (throttle.Limiter, error) {
			return throttle.NewFixedWindow(limit, w, tolerance)
		}),
		"egress sliding log": window(func(limit int, w time.Duration) (throttle.Limiter, error) {
			return throttle.NewSlidingWindow(limit, w, tolerance)
		}),
		"egress sliding counter": window(func(limit int, w time.Duration) (throttle.Limiter, error) {
			return throttle.NewSlidingWindowCounter(limit, w, tolerance)
		}),
		// burst + rate·window must not exceed limit: burst limit/10 and
		// the rest as rate.
		"egress token bucket": window(func(limit int, w time.Duration) (throttle.Limiter, error) {
			return throttle.NewTokenBucket(throttle.Rate{N: limit - limit/10, Per: w}, limit/10, tolerance)
		}),
	}
}
