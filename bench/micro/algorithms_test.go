package micro

import (
	"time"

	"github.com/egress-go/egress/throttle"
)

// algorithm builds one of egress's in-process limiters, generous enough
// that a unit is always available now, or stingy enough that a key, once
// used, holds live state for an hour.
type algorithm struct {
	name     string
	generous func(opts ...throttle.Option) (throttle.Limiter, error)
	stingy   func(opts ...throttle.Option) (throttle.Limiter, error)
}

// algorithms lists every in-process algorithm egress offers.
func algorithms() []algorithm {
	return []algorithm{
		{
			name: "tokenbucket",
			generous: func(opts ...throttle.Option) (throttle.Limiter, error) {
				return throttle.NewTokenBucket(throttle.Rate{N: 1e9, Per: time.Second}, 1e6, opts...)
			},
			stingy: func(opts ...throttle.Option) (throttle.Limiter, error) {
				return throttle.NewTokenBucket(throttle.PerHour(1), 1, opts...)
			},
		},
		{
			name: "leakybucket",
			generous: func(opts ...throttle.Option) (throttle.Limiter, error) {
				return throttle.NewLeakyBucket(throttle.Rate{N: 1e9, Per: time.Second}, 1e6, opts...)
			},
			stingy: func(opts ...throttle.Option) (throttle.Limiter, error) {
				return throttle.NewLeakyBucket(throttle.PerHour(1), 1, opts...)
			},
		},
		{
			// The log keeps the slots of the last limit units per key: a
			// window so short that far fewer calls than limit fit in it.
			name: "slidingwindow",
			generous: func(opts ...throttle.Option) (throttle.Limiter, error) {
				return throttle.NewSlidingWindow(1000, 10*time.Microsecond, opts...)
			},
			stingy: func(opts ...throttle.Option) (throttle.Limiter, error) {
				return throttle.NewSlidingWindow(1, time.Hour, opts...)
			},
		},
		{
			name: "slidingwindowcounter",
			generous: func(opts ...throttle.Option) (throttle.Limiter, error) {
				return throttle.NewSlidingWindowCounter(1e9, time.Second, opts...)
			},
			stingy: func(opts ...throttle.Option) (throttle.Limiter, error) {
				return throttle.NewSlidingWindowCounter(1, time.Hour, opts...)
			},
		},
		{
			name: "fixedwindow",
			generous: func(opts ...throttle.Option) (throttle.Limiter, error) {
				return throttle.NewFixedWindow(1e9, time.Second, opts...)
			},
			stingy: func(opts ...throttle.Option) (throttle.Limiter, error) {
				return throttle.NewFixedWindow(1, time.Hour, opts...)
			},
		},
	}
}
