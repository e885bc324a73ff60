package retryafter

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// epochThreshold separates epoch resets from delta resets. A reset of 1e9
// seconds or more is a Unix time (1e9 is September 2001); a smaller one is a
// number of seconds from now. No real delta is 31 years long, and no server
// reports a reset before 2001.
const epochThreshold = 1_000_000_000

// isEpoch reports whether a reset of whole seconds is a Unix time rather
// than a delay, for a response whose clock reads ref: it is 1e9 or more
// (epochThreshold), or no earlier than MaxDelayValue before ref. The
// second rule reads an epoch right on a clock set before 2001, as
// testing/synctest's is (2000-01-01): there "946684810" is ten seconds
// ahead, not a delay of thirty years. A delay that long is absurd anyway.
func isEpoch(whole uint64, ref time.Time) bool {
	if whole >= epochThreshold {
		return true
	}
	r := ref.Unix()
	const maxDelay = int64(MaxDelayValue / time.Second)
	return r > 2*maxDelay && int64(whole) >= r-maxDelay
}

// maxWhole saturates the whole part of a decimal. It is far above any epoch
// or delay anyone sends, and far below the int64 range, so arithmetic on it
// cannot overflow.
const maxWhole = 1 << 53

// decimal is a non-negative decimal number as upstreams write one: one or
// more ASCII digits, then optionally a dot and one or more digits. Signs,
// exponents, hex, NaN, Inf and spaces are not decimals.
type decimal struct {
	whole uint64 // saturates at maxWhole
	nanos int64  // the fraction, in billionths; later digits are dropped
}

// parseDecimal parses s strictly as a decimal.
func parseDecimal(s string) (decimal, bool) {
	if s == "" || len(s) > MaxValueLen {
		return decimal{}, false
	}
	var d decimal
	i := 0
	for ; i < len(s) && isDigit(s[i]); i++ {
		if d.whole < maxWhole {
			d.whole = d.whole*10 + uint64(s[i]-'0')
		}
	}
	if i == 0 {
		return decimal{}, false
	}
	if d.whole > maxWhole {
		d.whole = maxWhole
	}
	if i == len(s) {
		return d, true
	}
	if s[i] != '.' || i+1 == len(s) {
		return decimal{}, false
	}
	scale := int64(1e8)
	for i++; i < len(s); i++ {
		if !isDigit(s[i]) {
			return decimal{}, false
		}
		d.nanos += int64(s[i]-'0') * scale
		scale /= 10
	}
	return d, true
}

// scaled returns d units of unit, clamped to [0, MaxDelayValue].
func (d decimal) scaled(unit time.Duration) time.Duration {
	if d.whole > uint64(MaxDelayValue/unit) {
		return MaxDelayValue
	}
	v := time.Duration(d.whole)*unit + time.Duration(d.nanos*int64(unit)/1e9)
	return clamp(v)
}

// epoch returns d as Unix seconds.
func (d decimal) epoch() time.Time {
	return time.Unix(int64(d.whole), d.nanos)
}

// parseReset reads a reset that may be an epoch or a delta (see
// epochThreshold), or an HTTP-date (sethvargo/go-limiter sends one). ref
// is the instant an absolute reset is measured from.
func parseReset(s string, ref time.Time) (time.Duration, bool) {
	d, ok := parseDecimal(s)
	if !ok {
		if len(s) > MaxValueLen || s == "" || isDigit(s[0]) {
			return 0, false
		}
		t, ok := httpDate(s) // an HTTP-date, or go-limiter's RFC 1123 with zone "UTC"
		return until(t, ref), ok
	}
	if isEpoch(d.whole, ref) {
		return until(d.epoch(), ref), true
	}
	return d.scaled(time.Second), true
}

// parseGoDuration reads a Go duration such as "6m0s" or "12ms", as OpenAI
// sends it. A bare decimal is taken as seconds. Signs are rejected.
func parseGoDuration(s string) (time.Duration, bool) {
	if s == "" || len(s) > MaxValueLen || s[0] == '-' || s[0] == '+' {
		return 0, false
	}
	if d, ok := parseDecimal(s); ok {
		return d.scaled(time.Second), true
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, false
	}
	return clamp(d), true
}

// parseCount reads a limit or a remaining count: an optional minus sign and
// digits. Values beyond the int range saturate.
func parseCount(s string) (int, bool) {
	if s == "" || len(s) > MaxValueLen {
		return 0, false
	}
	digits := strings.TrimPrefix(s, "-")
	if digits == "" {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if !isDigit(digits[i]) {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 0)
	if err != nil { // only a range error is left, and ParseInt saturates
		if n < 0 {
			return math.MinInt, true
		}
		return math.MaxInt, true
	}
	return int(n), true
}

// until returns how long from ref until t, clamped to [0, MaxDelayValue].
// time.Time.Sub saturates instead of overflowing.
func until(t, ref time.Time) time.Duration {
	return clamp(t.Sub(ref))
}

// clamp bounds d to [0, MaxDelayValue].
func clamp(d time.Duration) time.Duration {
	return min(max(d, 0), MaxDelayValue)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
