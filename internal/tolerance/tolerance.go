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
// admits what a token bucket of burst does). It keeps ceil(d/interval) units of the burst in
// reserve, so that the sustained rate is untouched; when the burst cannot
// spare them, it keeps none and lengthens the interval by d instead.
func Bucket(interval time.Duration, burst int, d time.Duration) (time.Duration, int) {
	if d <= 0 {
		return interval, 0
	}
	keep := d / interval // ceil(d/interval) without d+interval-1, which overflowed for a d near its maximum
	if d%interval != 0 {
		keep++
	}
	if keep < time.Duration(burst) {
		return interval, int(keep)
	}
	if d > math.MaxInt64-interval {
		// interval+d would overflow into a negative interval: saturate,
		// so that the caller's span check refuses it.
		return math.MaxInt64, 0
	}
	return interval + d, 0
}
