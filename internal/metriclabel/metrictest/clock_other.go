//go:build !linux

package metrictest

import "time"

// threadClock reads the wall clock where no per-thread CPU clock is at
// hand.
type threadClock struct{}

var epoch = time.Now()

func (threadClock) lock()              {}
func (threadClock) unlock()            {}
func (threadClock) now() time.Duration { return time.Since(epoch) }
