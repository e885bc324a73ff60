package retryafter

import (
	"net/http"
	"time"
)

// Unknown is the value of [Quota.Limit] and [Quota.Remaining] when the
// headers do not state them.
const Unknown = -1

// Quota is one rate limit that a response describes: how large it is, how
// much of it is left, and when it returns.
type Quota struct {
	// Name tells quotas apart. It is the IETF policy id, the provider's
	// resource ("requests", "tokens", "input-tokens", "output-tokens";
	// GitHub's X-RateLimit-Resource, Discord's X-RateLimit-Bucket), or the
	// header family ("x-ratelimit", "x-rate-limit", "ratelimit", "shopify").
	Name string

	// Limit is the size of the quota, or Unknown.
	Limit int

	// Remaining is how much of the quota is left, or Unknown. A negative
	// remaining sent by a server is reported as 0.
	Remaining int

	// Reset is how long until the quota returns, as the server reports it:
	// fully for most providers; for Shopify's leaky bucket, until one more
	// call fits. It is 0 when not stated or already due, and never above
	// MaxDelayValue.
	Reset time.Duration

	// Window is the IETF policy's window (w), or 0 when not stated.
	Window time.Duration
}

// ParseQuota returns every quota that h describes, in a fixed order: IETF
// RateLimit policies in field order, the draft-03 RateLimit-* fields,
// X-RateLimit-*, x-rate-limit-*, OpenAI's requests and tokens, Anthropic's
// requests, tokens, input-tokens and output-tokens, and Shopify's bucket.
// It returns nil when h describes none, and on a cached response (Age above
// 0).
//
// Absolute resets are measured from the response's Date header when present,
// as in [Parse], and repeated fields resolve as in [Parse]. ParseQuota
// reports quotas that are not exhausted too; to learn whether the server
// asked to wait, use [Parse].
func ParseQuota(h http.Header, now time.Time) []Quota {
	rs := readQuotas(h, now)
	if len(rs) == 0 {
		return nil
	}
	qs := make([]Quota, len(rs))
	for i, r := range rs {
		qs[i] = r.Quota
	}
	return qs
}

type family int

const (
	familyIETF     family = iota // RateLimit, RateLimit-Policy, draft-03 RateLimit-*
	familyProvider               // everyone else
)

// reading is a Quota as read, with what the public type cannot say.
type reading struct {
	Quota
	family   family
	hasReset bool
}

// newReading returns a reading that knows nothing yet.
func newReading(name string, f family) reading {
	return reading{Quota: Quota{Name: name, Limit: Unknown, Remaining: Unknown}, family: f}
}

// setLimit, setRemaining and setReset record a value. When a value is stated
// more than once, the most cautious one wins: the lowest limit and remaining,
// the longest reset.
func (r *reading) setLimit(n int) {
	if n < 0 {
		return
	}
	if r.Limit == Unknown || n < r.Limit {
		r.Limit = n
	}
}

func (r *reading) setRemaining(n int) {
	n = max(n, 0)
	if r.Remaining == Unknown || n < r.Remaining {
		r.Remaining = n
	}
}

func (r *reading) setReset(d time.Duration) {
	r.Reset = max(r.Reset, clamp(d))
	r.hasReset = true
}

// known reports whether anything was read.
func (r *reading) known() bool {
	return r.Limit != Unknown || r.Remaining != Unknown || r.hasReset
}

// readQuotas reads every quota in h, or none on a cached response.
func readQuotas(h http.Header, now time.Time) []reading {
	if h == nil || cached(h) {
		return nil
	}
	ref := reference(h, now)
	rs := readIETF(h)
	rs = append(rs, readDraft03(h, ref)...)
	return append(rs, readProviders(h, ref)...)
}

// resetWait returns the longest reset among the exhausted quotas of family
// f. A quota is exhausted when its remaining is 0, or, if lenient, unknown.
// A reset that is already due is no signal.
func resetWait(rs []reading, f family, lenient bool) (time.Duration, bool) {
	var d time.Duration
	for _, r := range rs {
		exhausted := r.Remaining == 0 || (lenient && r.Remaining == Unknown)
		if r.family == f && exhausted && r.hasReset {
			d = max(d, r.Reset)
		}
	}
	return d, d > 0
}

// exhaustedWait is Parse's families 2 and 3, counting only quotas whose
// remaining is stated to be 0.
func exhaustedWait(h http.Header, now time.Time) (time.Duration, bool) {
	rs := readQuotas(h, now)
	if d, ok := resetWait(rs, familyIETF, false); ok {
		return d, true
	}
	return resetWait(rs, familyProvider, false)
}

// exhausted reports whether any quota in h has nothing remaining.
func exhausted(h http.Header) bool {
	for _, r := range readQuotas(h, time.Time{}) {
		if r.Remaining == 0 {
			return true
		}
	}
	return false
}

// cached reports whether the response came from a cache: an Age above 0.
// A malformed Age is ignored.
func cached(h http.Header) bool {
	for _, v := range members(h, "Age") {
		if n, ok := parseCount(v); ok && n > 0 {
			return true
		}
	}
	return false
}
