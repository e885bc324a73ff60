package main

import (
	"net/http"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// followingClient wraps base in a Transport on l beside the record of
// what the upstream states (egress.WithUpstream), with the default retry
// policy: the README's recipe for "the API allows X per Y".
func followingClient(l throttle.Limiter) (client, error) {
	u, err := throttle.NewUpstream()
	if err != nil {
		return nil, err
	}
	t := egress.NewTransport(base(), egress.WithLimiter(l), egress.WithUpstream(u), egress.WithRetry(retryafter.Policy{}))
	return httpDoer{httpClient{hc: &http.Client{Transport: t}}}, nil
}

// egressBurstOneClient builds egressBurstOne.
func egressBurstOneClient(s spec) (client, error) {
	tb, err := throttle.NewTokenBucket(publishedRate(s.Rate), 1, throttle.WithTolerance(throttle.DefaultTolerance))
	if err != nil {
		return nil, err
	}
	return egressClient(tb), nil
}
