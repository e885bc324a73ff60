package throttle

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Rate is N units per Per. The zero Rate is invalid.
//
// The spacing between units, Per/N, is rounded up to the nanosecond, so a
// limiter never runs faster than the Rate it was given. A spacing below
// 1ns cannot be represented and is an error.
type Rate struct {
	N   int
	Per time.Duration
}

// PerSecond returns a Rate of n units per second.
func PerSecond(n int) Rate { return Rate{N: n, Per: time.Second} }

// PerMinute returns a Rate of n units per minute.
func PerMinute(n int) Rate { return Rate{N: n, Per: time.Minute} }

// PerHour returns a Rate of n units per hour.
func PerHour(n int) Rate { return Rate{N: n, Per: time.Hour} }

// PerDay returns a Rate of n units per 24 hours.
func PerDay(n int) Rate { return Rate{N: n, Per: 24 * time.Hour} }

// Interval returns the spacing between two units, Per/N rounded up.
// It returns an error when the Rate is invalid.
func (r Rate) Interval() (time.Duration, error) {
	if err := r.validate(); err != nil {
		return 0, err
	}
	return r.interval(), nil
}

func (r Rate) interval() time.Duration {
	n := time.Duration(r.N)
	q := r.Per / n // rounded up below: Per + N − 1 overflowed for a Per near its maximum
	if r.Per%n != 0 {
		q++
	}
	return q
}

func (r Rate) validate() error {
	switch {
	case r.N <= 0:
		return fmt.Errorf("throttle: Rate.N must be positive, got %d", r.N)
	case r.Per <= 0:
		return fmt.Errorf("throttle: Rate.Per must be positive, got %v", r.Per)
	case r.Per < time.Duration(r.N):
		return fmt.Errorf("throttle: Rate %d per %v is faster than 1 unit per nanosecond", r.N, r.Per)
	}
	return nil
}

// String formats the Rate as N/unit. Per is written as "s", "min" or "h"
// when it is exactly one second, minute or hour, and otherwise as a
// [time.Duration] with trailing zero units trimmed: PerSecond(10) is
// "10/s", PerMinute(600) is "600/min", PerDay(100) is "100/24h", and
// Rate{5, 1500 * time.Millisecond} is "5/1.5s".
func (r Rate) String() string {
	n := strconv.Itoa(r.N)
	switch r.Per {
	case time.Second:
		return n + "/s"
	case time.Minute:
		return n + "/min"
	case time.Hour:
		return n + "/h"
	}
	return n + "/" + shortDuration(r.Per)
}

// shortDuration trims the zero minutes and seconds that time.Duration's
// String keeps ("24h0m0s" becomes "24h").
func shortDuration(d time.Duration) string {
	s := d.String()
	for _, suffix := range []string{"0s", "0m"} {
		if len(s) > len(suffix) && s[len(s)-len(suffix):] == suffix && s[len(s)-len(suffix)-1] >= 'a' {
			s = s[:len(s)-len(suffix)]
		}
	}
	return s
}

// maxSpan bounds every computed span (burst×interval, limit, window) so
// that sums of a few of them never overflow int64 nanoseconds.
const maxSpan = math.MaxInt64 / 8

// maxAhead is how far ahead a slot may lie (about 73 years): beyond a
// pause of maxSpan, a span more. Callers with no max wait booked a key of
// a bucket of one unit per 30 years ten times over, and the eleventh,
// past int64 nanoseconds, went at once.
const maxAhead = 2 * maxSpan

// tooFarAhead is the error of a booking whose slot would lie more than
// maxAhead ahead.
func tooFarAhead(key string) error {
	return fmt.Errorf("throttle: key %q is booked more than %v ahead", key, time.Duration(maxAhead))
}

// span returns n×d, or an error naming field when it would overflow.
func span(field string, n int, d time.Duration) (int64, error) {
	if n > 0 && int64(d) > maxSpan/int64(n) {
		return 0, fmt.Errorf("throttle: %s %d × %v is too long a span", field, n, d)
	}
	return int64(n) * int64(d), nil
}
