package retryafter

import (
	"net/http"
	"slices"
	"time"
)

// Unknown is the value of [Quota.Limit] and [Quota.Remaining] when the
// headers do not state them.
const Unknown = -1

// Quota is one rate limit that a response describes: how large it is, how
// much of it is left, and when it returns.
type Quota struct {
	// Name tells quotas apart. It is the IETF policy id, the provider's
	// resource ("requests", "tokens", "tokens_usage_based", "input-tokens",
	// "output-tokens";
	// GitHub's X-RateLimit-Resource, Discord's X-RateLimit-Bucket), or the
	// header family ("x-ratelimit", "x-rate-limit", "ratelimit", "shopify").
	Name string

	// Limit is the size of the quota, or Unknown.
	Limit int

	// Remaining is how much of the quota is left, or Unknown. A negative
	// remaining sent by a server is reported as 0.
	Remaining int

	// Reset is how long until the quota returns, as the server reports it:
	// fully for most providers; for Shopify's leaky bucket, until it has
	// drained (Refills is set: a bucket of Limit calls that refills Limit
	// per drain), whereas [Parse] waits only until one more call fits. It
	// is 0 when not stated or already due, and never above MaxDelayValue.
	Reset time.Duration

	// Window is the IETF policy's window (w), or 0 when not stated.
	Window time.Duration

	// Absolute reports that the reset was stated as an instant (a Unix
	// time, an HTTP-date, an RFC 3339 time), as limiters with fixed window
	// boundaries send it, rather than as a delay ("1", "6m0s", IETF t).
	Absolute bool

	// Refills reports that the reset is when the quota is full again, and
	// that it refills continuously meanwhile (a token bucket), not all at
	// once at a window boundary: OpenAI's and Anthropic's quotas.
	Refills bool

	// ResetAt is the reset as an instant on the client's clock, or the
	// zero time when no reset was stated. An absolute reset (an epoch, an
	// HTTP-date, an RFC 3339 time) is rounded to the safe side: servers
	// truncate it to its Precision, so the quota returns at or before
	// ResetAt and after ResetAt − Precision. It is converted with the
	// response's Date only when the skew between the clocks is larger
	// than Date's own precision of a second can hide: a Date truncated to
	// the second would otherwise make the reset up to a second early or
	// late. A delay is counted from now, unrounded. Like Reset, it is
	// never more than MaxDelayValue (plus Precision) after now.
	ResetAt time.Time

	// Precision is how finely the reset was stated: a second for whole
	// seconds (an integer epoch or delay, an HTTP-date), less for a
	// fraction (a millisecond for "1.5" or "1470173023.123"). It is 0 when
	// no reset was stated.
	Precision time.Duration
}

// ParseQuota returns every quota that h describes, in a fixed order: IETF
// RateLimit policies in field order, the draft-03 RateLimit-* fields,
// X-RateLimit-*, x-rate-limit-*, OpenAI's requests, tokens and
// tokens_usage_based, Anthropic's requests, tokens, input-tokens and
// output-tokens, and Shopify's bucket.
// It returns nil when h describes none, and on a cached response (Age above
// 0).
//
// A server that sends the IETF fields often restates one of their limits
// in X-RateLimit-* or X-Rate-Limit-* for older clients; those fields are
// left out when an IETF policy states the same remaining.
//
// Absolute resets are measured from the response's Date header when present,
// as in [Parse], and repeated fields resolve as in [Parse]. ParseQuota
// reports quotas that are not exhausted too; to learn whether the server
// asked to wait, use [Parse].
func ParseQuota(h http.Header, now time.Time) []Quota {
	f := scan(h)
	if !f.has(presentQuota) {
		return nil
	}
	var buf [quotasOnStack]reading
	rs := f.appendQuotas(buf[:0], now)
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
	at       time.Time // the absolute reset as stated, on the server's clock, or zero
	// leaky is set for a leaky bucket's "used/size" (Shopify): its Reset is
	// when it has drained, and fits, until one more call fits, is the wait.
	leaky bool
	fits  time.Duration
	// restates is set for a reading of X-RateLimit-* or X-Rate-Limit-*
	// (see dropRestated).
	restates bool
}

// wait returns how long r asks a client to wait when nothing is left: its
// reset, or, for a leaky bucket, until one more call fits.
func (r *reading) wait() time.Duration {
	if r.leaky {
		return r.fits
	}
	return r.Reset
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

// appendKnown appends r to rs if anything was read.
func appendKnown(rs []reading, r reading) []reading {
	if r.known() {
		return append(rs, r)
	}
	return rs
}

// quotasOnStack is how many readings fit in the buffer that Parse and
// ParseQuota keep on the stack: one per provider quota, and a few IETF
// policies. More spill to the heap.
const quotasOnStack = 16

// appendQuotas appends every quota in f to dst, or none on a cached
// response.
func (f fields) appendQuotas(dst []reading, now time.Time) []reading {
	if !f.has(presentQuota) || f.cached() {
		return dst
	}
	start := len(dst)
	dst = f.appendIETF(dst)
	dst = f.appendDialects(dst, f.reference(now))
	dst = dropRestated(dst, start)
	skew := f.skew(now)
	for i := range dst[start:] {
		dst[start+i].setResetAt(now, skew)
	}
	return dst
}

// dropRestated removes from rs[start:] each reading of X-RateLimit-* or
// X-Rate-Limit-* whose remaining an IETF reading states too: a server
// that sends both dialects states one limit twice, and the IETF fields
// say more of it. Read as a second quota, the older fields made it
// stricter than it is: egress's own middleware states a token bucket of
// 48/s and burst 9 as "q=47;w=1" in the IETF fields and as a limit of 9
// in X-RateLimit-Limit, with its reset the epoch second at which it is
// full, and the README recipe, reading a second quota of 9 a window, used
// 27% of the bucket. Fields that state another remaining describe another
// limit, and stay.
func dropRestated(rs []reading, start int) []reading {
	// The IETF readings come before the others (appendIETF, then the
	// draft-03 row), so compacting in place never overwrites one before
	// it is read.
	out := rs[:start]
	for _, r := range rs[start:] {
		if r.restates && r.Remaining != Unknown && slices.ContainsFunc(rs[start:], func(i reading) bool {
			return i.family == familyIETF && i.Remaining == r.Remaining
		}) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// setResetAt sets ResetAt from what was read: an absolute reset rounded up
// by its precision and moved by skew (the client's clock less the
// server's), or a delay from now.
func (r *reading) setResetAt(now time.Time, skew time.Duration) {
	if !r.hasReset {
		return
	}
	if r.Precision == 0 { // a delay read elsewhere (IETF t): whole seconds
		r.Precision = time.Second
	}
	switch {
	case !r.at.IsZero():
		r.ResetAt = r.at.Add(r.Precision + skew)
		// Clamped as Reset is: an absurd instant (an epoch in
		// milliseconds, read as seconds, is tens of thousands of years
		// out) must not become a ResetAt that nobody lives to see.
		if limit := now.Add(MaxDelayValue + r.Precision); r.ResetAt.After(limit) {
			r.ResetAt = limit
		}
	default:
		r.ResetAt = now.Add(r.Reset)
	}
}

// skew returns how far the client's clock (now, when the response
// arrived) is ahead of the server's, as far as the response's Date can
// tell: the server sent it at or after Date and less than a second
// later, and it took some time to arrive. A skew within that (Date ≤ now
// < Date + 2s, a second of transit allowed) cannot be measured and is 0;
// beyond it, the largest skew Date allows, now − Date, so that a reset
// moved by it is never early. (The smallest, now − Date − 2s, made the
// reset of a client minutes ahead up to two seconds early: 429s at every
// window boundary.)
func (f fields) skew(now time.Time) time.Duration {
	date := f.reference(time.Time{})
	switch {
	case date.IsZero():
		return 0
	case now.Before(date), now.Sub(date) >= 2*time.Second:
		return now.Sub(date)
	}
	return 0
}

// resetWait returns the longest reset among the exhausted quotas of family
// f. A quota is exhausted when its remaining is 0, or, if lenient, unknown.
// A reset that is already due is no signal.
func resetWait(rs []reading, f family, lenient bool) (time.Duration, bool) {
	var d time.Duration
	for _, r := range rs {
		exhausted := r.Remaining == 0 || (lenient && r.Remaining == Unknown)
		if r.family == f && exhausted && r.hasReset {
			d = max(d, r.wait())
		}
	}
	return d, d > 0
}

// exhaustedWait is Parse's families 2 and 3, counting only quotas whose
// remaining is stated to be 0.
func (f fields) exhaustedWait(now time.Time) (time.Duration, bool) {
	if !f.has(presentQuota) {
		return 0, false
	}
	var buf [quotasOnStack]reading
	rs := f.appendQuotas(buf[:0], now)
	if d, ok := resetWait(rs, familyIETF, false); ok {
		return d, true
	}
	return resetWait(rs, familyProvider, false)
}

// exhausted reports whether any quota in f has nothing remaining.
func (f fields) exhausted() bool {
	if !f.has(presentQuota) {
		return false
	}
	var buf [quotasOnStack]reading
	for _, r := range f.appendQuotas(buf[:0], time.Time{}) {
		if r.Remaining == 0 {
			return true
		}
	}
	return false
}

// cached reports whether the response came from a cache: an Age above 0.
// A malformed Age is ignored.
func (f fields) cached() bool {
	if !f.has(presentAge) {
		return false
	}
	for v := range f.members(keyAge) {
		if n, ok := parseCount(v); ok && n > 0 {
			return true
		}
	}
	return false
}
