package main

import (
	"net/http"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// adaptiveContenders lists egress set up as the README's recipe "I do
// not know the limit" shows: throttle.NewAdaptive with a ceiling of
// 1 000/s, the record of what the upstream states (WithUpstream), and
// WithRetry with the default Policy.
func adaptiveContenders() map[string]builder {
	return map[string]builder{"egress (adaptive)": func(spec) (client, error) {
		l, err := throttle.NewAdaptive(throttle.PerSecond(1000))
		if err != nil {
			return nil, err
		}
		u, err := throttle.NewUpstream()
		if err != nil {
			return nil, err
		}
		t := egress.NewTransport(base(), egress.WithLimiter(l), egress.WithUpstream(u), egress.WithRetry(retryafter.Policy{}))
		return httpDoer{httpClient{hc: &http.Client{Transport: t}}}, nil
	}}
}
