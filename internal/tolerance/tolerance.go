// Package tolerance computes the headroom against jitter that
// throttle.WithTolerance keeps: Bucket, the constant one, and Headroom
// with Span, the one an in-process bucket whose burst cannot spare the
// tolerance keeps, which follows what the upstream shows.
package tolerance

import (
	"math"
	"time"
)

// Bucket applies a tolerance of d to a token bucket with the given
// interval and burst, or to a leaky bucket of capacity burst-1 (which
// admits what a token bucket of burst does), as a redislimit bucket keeps
// it: ceil(d/interval) whole units of the burst in reserve, so that the
// sustained rate is untouched; when the burst cannot spare them, it keeps
// none and lengthens the interval by d instead. (An in-process bucket
// keeps d itself out of the burst's span: see [Span].)
func Bucket(interval time.Duration, burst int, d time.Duration) (time.Duration, int) {
	if d <= 0 {
		return interval, 0
	}
	if Spares(interval, burst, d) {
		return interval, int(units(interval, d))
	}
	if d > math.MaxInt64-interval {
		// interval+d would overflow into a negative interval: saturate,
		// so that the caller's span check refuses it.
		return math.MaxInt64, 0
	}
	return interval + d, 0
}

// Spares reports whether a bucket of burst units at interval can keep a
// tolerance of d out of its burst: whether d takes no more than all of
// the burst but one unit (a positive d).
func Spares(interval time.Duration, burst int, d time.Duration) bool {
	return d > 0 && units(interval, d) < time.Duration(burst)
}

// units returns ceil(d/interval).
func units(interval, d time.Duration) time.Duration {
	keep := d / interval // without d+interval-1, which overflowed for a d near its maximum
	if d%interval != 0 {
		keep++
	}
	return keep
}
