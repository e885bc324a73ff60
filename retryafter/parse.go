package retryafter

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// MaxDelayValue is the longest delay this package ever reports. Larger
// values, such as a Retry-After of 9223372036854775807 or a date a century
// away, are clamped to it instead of overflowing. It is 31 days, so that a
// monthly quota's reset still reads true; [Policy] caps what is actually
// slept or paused far lower.
const MaxDelayValue = 31 * 24 * time.Hour

// MaxValueLen is the longest single header value, in bytes, that the parsers
// read. The longest valid HTTP-date is 33 bytes ("Wednesday, 09-Nov-94
// 08:49:37 GMT"); anything past 64 bytes is rejected as garbage.
const MaxValueLen = 64

// ErrInvalid is returned, wrapped, by [ParseValue] for a value that is not a
// valid Retry-After.
var ErrInvalid = errors.New("retryafter: invalid Retry-After value")

// ParseValue parses one Retry-After field value (RFC 9110 §10.2.3) and
// returns how long to wait from now.
//
// It accepts delay-seconds ("120"), non-negative decimal seconds ("2.0", as
// Shopify sends), and the three HTTP-date formats a recipient must accept:
// IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), obsolete RFC 850
// ("Sunday, 06-Nov-94 08:49:37 GMT") and asctime ("Sun Nov  6 08:49:37
// 1994"). A date in the past means 0.
//
// The result is never negative and never above [MaxDelayValue]. An empty or
// whitespace-only value, a sign, an exponent, NaN, Inf, hex, trailing
// garbage or a value longer than [MaxValueLen] is an error that wraps
// [ErrInvalid] and quotes the value.
//
// To convert a date using the response's own Date header, which cancels
// clock skew, use [Parse].
func ParseValue(v string, now time.Time) (time.Duration, error) {
	d, ok := parseValue(v, now)
	switch {
	case ok:
		return d, nil
	case len(v) > MaxValueLen:
		return 0, fmt.Errorf("%w: %q... is longer than %d bytes", ErrInvalid, v[:MaxValueLen], MaxValueLen)
	case v == "":
		return 0, fmt.Errorf("%w: %q is empty", ErrInvalid, v)
	}
	return 0, fmt.Errorf("%w %q", ErrInvalid, v)
}

// parseValue is ParseValue without the error, which would allocate.
func parseValue(v string, now time.Time) (time.Duration, bool) {
	if v == "" || len(v) > MaxValueLen {
		return 0, false
	}
	if isDigit(v[0]) {
		d, ok := parseDecimal(v)
		return d.scaled(time.Second), ok
	}
	t, ok := parseHTTPDate(v)
	if !ok {
		return 0, false
	}
	return until(t, now), true
}

// The three HTTP-date forms (RFC 9110 §5.6.7), each with its zone spelled
// "GMT", as the RFC requires.
const (
	imfFixdate = http.TimeFormat                  // "Sun, 06 Nov 1994 08:49:37 GMT"
	rfc850GMT  = "Monday, 02-Jan-06 15:04:05 GMT" // "Sunday, 06-Nov-94 08:49:37 GMT"
	asctime    = time.ANSIC                       // "Sun Nov  6 08:49:37 1994"
)

// parseHTTPDate is http.ParseTime without its allocations on valid dates,
// for the package doc's promise that Parse, Pause, Next and Throttled do
// not allocate on a well-formed Retry-After (alloc_test.go).
// http.ParseTime tries IMF-fixdate, then RFC 850, then asctime, and every
// failed attempt allocates its error, so a valid RFC 850 or asctime date
// cost six or seven allocations. The forms are told apart by their shape
// (IMF-fixdate has a comma fourth, after a short day name; RFC 850 a comma
// after a long one; asctime none), and only that layout is tried. A value
// it does not parse goes to http.ParseTime, so that exactly the same values
// are accepted.
func parseHTTPDate(v string) (time.Time, bool) {
	layout := asctime
	if i := strings.IndexByte(v, ','); i == 3 {
		layout = imfFixdate
	} else if i > 3 {
		layout = rfc850GMT
	}
	if t, err := time.Parse(layout, v); err == nil {
		return t, true
	}
	t, err := http.ParseTime(v)
	return t, err == nil
}

// Parse returns how long the server asked the client to wait before its next
// request, and whether it asked at all. now is the client's current time.
//
// It reads, in this order, and the first family present wins:
//
//  1. Retry-After, refined by retry-after-ms (OpenAI, Azure OpenAI) when
//     both are present. retry-after-ms alone is honored too.
//  2. The IETF RateLimit field's t, for a policy whose r is 0 or absent
//     (draft-ietf-httpapi-ratelimit-headers); then the older draft-03
//     RateLimit-Reset, when RateLimit-Remaining is 0 or absent.
//  3. A provider's quota reset, but only where that quota's remaining is 0
//     or less: X-RateLimit-* (GitHub, Discord, Envoy), x-rate-limit-* (X),
//     x-ratelimit-*-requests and -tokens (OpenAI),
//     anthropic-ratelimit-*, and X-Shopify-Shop-Api-Call-Limit.
//
// So a 200 with remaining=5 and a reset in 30s is not a request to wait. In
// families 2 and 3, a reset that is already due is no signal either.
//
// Absolute times (HTTP-dates, epoch resets, RFC 3339 resets) are measured
// from the response's Date header when it is present and valid, so a client
// clock minutes off still waits the intended time; otherwise from now. A
// reset of 1e9 or more is a Unix epoch (fractions allowed, as Discord
// sends); a smaller one is a number of seconds.
//
// Rate-limit fields (families 2 and 3) are ignored on a cached response, one
// whose Age is above 0. Retry-After is not.
//
// Malformed values are ignored. When a field appears more than once, as
// several lines, or a rate-limit field as a comma-separated list, the
// values are never summed: the longest delay and the lowest remaining win.
// Retry-After holds one value: an HTTP-date has a comma of its own, so a
// list ("5, 30") is malformed. When several quotas are
// exhausted, the longest reset wins, since all of them must return.
//
// The result is never negative and never above [MaxDelayValue].
func Parse(h http.Header, now time.Time) (time.Duration, bool) {
	return scan(h).parse(now)
}

// parse is Parse on a scanned header.
func (f fields) parse(now time.Time) (time.Duration, bool) {
	if d, ok := f.retryAfter(now); ok {
		return d, true
	}
	if !f.has(presentQuota) {
		return 0, false
	}
	var buf [quotasOnStack]reading
	rs := f.appendQuotas(buf[:0], now)
	if d, ok := resetWait(rs, familyIETF, true); ok {
		return d, true
	}
	return resetWait(rs, familyProvider, false)
}

// retryAfter reads Retry-After and retry-after-ms.
//
// retry-after-ms carries the same delay as Retry-After at millisecond
// precision, so when the two agree to within Retry-After's own precision of
// one second, retry-after-ms wins. When they disagree by more, as when Azure
// sends retry-after-ms: 0, the longer one wins.
func (f fields) retryAfter(now time.Time) (time.Duration, bool) {
	if !f.has(presentRetryAfter) {
		return 0, false
	}
	ref := now
	refRead := false
	sec, secOK := time.Duration(0), false
	for _, v := range f.values(keyRetryAfter) {
		if !refRead && v != "" && !isDigit(v[0]) { // an HTTP-date
			ref, refRead = f.reference(now), true
		}
		if d, ok := parseValue(v, ref); ok {
			sec, secOK = max(sec, d), true
		}
	}
	ms, msOK := time.Duration(0), false
	for v := range f.members(keyRetryAfterMs) {
		if d, ok := parseDecimal(v); ok {
			ms, msOK = max(ms, d.scaled(time.Millisecond)), true
		}
	}
	switch {
	case secOK && msOK:
		if (sec - ms).Abs() < time.Second {
			return ms, true
		}
		return max(sec, ms), true
	case secOK:
		return sec, true
	case msOK:
		return ms, true
	}
	return 0, false
}

// reference returns the instant that absolute times in f are measured from:
// the response's Date when valid (the earliest, if there are several), or
// now.
func (f fields) reference(now time.Time) time.Time {
	var ref time.Time
	for _, v := range f.values(keyDate) {
		if len(v) > MaxValueLen {
			continue
		}
		if t, ok := parseHTTPDate(v); ok && (ref.IsZero() || t.Before(ref)) {
			ref = t
		}
	}
	if ref.IsZero() {
		return now
	}
	return ref
}
