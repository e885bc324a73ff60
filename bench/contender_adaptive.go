//go:build adaptive

package main

import "github.com/egress-go/egress/throttle"

// adaptiveContenders lists egress's adaptive limiter, set up as the
// recipe "I do not know the limit" shows: throttle.NewAdaptive with a
// ceiling of 1 000/s, and WithRetry with the default Policy. It builds
// only with -tags adaptive until throttle.NewAdaptive (branch
// wt-upstream) has landed; then the tag goes.
func adaptiveContenders() map[string]builder {
	return map[string]builder{"egress (adaptive)": func(spec) (client, error) {
		l, err := throttle.NewAdaptive(throttle.PerSecond(1000))
		if err != nil {
			return nil, err
		}
		return egressClient(l), nil
	}}
}
