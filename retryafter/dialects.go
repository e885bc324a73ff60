package retryafter

import (
	"math/bits"
	"slices"
	"strings"
	"time"
)

// A dialect is one way upstreams state a quota: the header fields that
// carry it and how its reset is written. Every provider quota that
// [ParseQuota] reads is one row of dialects; the IETF RateLimit and
// RateLimit-Policy Structured Fields, which carry several named quotas in
// one field, are read by appendIETF.
//
// To read a new provider, add a row. Field names are canonical
// (http.CanonicalHeaderKey); a field the dialect lacks is "".
type dialect struct {
	// name is the quota's Name, unless a field in names names it.
	name   string
	family family

	// names are fields whose value names the quota, first found wins:
	// GitHub's X-RateLimit-Resource, Discord's X-RateLimit-Bucket.
	names []string

	// limit and remaining hold counts. A limit may carry parameters after
	// a ";" (Envoy's "10, 10;w=1"), which are ignored.
	limit, remaining string

	// reset holds when the quota returns, written in resetUnit.
	reset     string
	resetUnit unit

	// resetAfter holds seconds until the quota returns (decimals allowed).
	// When valid it wins over reset, since a relative time needs no clock.
	resetAfter string

	// usedOfSize holds "used/size" of a leaky bucket that drains from full
	// to empty in drain (Shopify). It gives the limit, the remaining and
	// the reset: the time for one more call to fit.
	usedOfSize string
	drain      time.Duration

	// refills marks a quota whose reset is when it is full again, as a
	// token bucket refilling continuously (OpenAI, Anthropic).
	refills bool

	// restates marks the unnamed legacy fields that servers sending the
	// IETF ones often send beside them, for older clients: the same limit
	// again, less exactly (see dropRestated).
	restates bool
}

// unit is how a reset field is written.
type unit int

const (
	// epochOrSeconds is a Unix time when 1e9 or more (fractions allowed, as
	// Discord sends), and otherwise seconds from now; see epochThreshold.
	epochOrSeconds unit = iota
	// goDuration is a Go duration such as "6m0s" or "12ms" (OpenAI); a bare
	// number is seconds.
	goDuration
	// rfc3339 is an RFC 3339 time (Anthropic).
	rfc3339
)

// dialects is every provider quota this package reads, in the order
// ParseQuota returns them. It is never written.
var dialects = [...]dialect{
	// IETF draft-03's separate fields. Reset is delay-seconds, but some
	// servers (GitLab) send an epoch, which is read as one.
	{name: "ratelimit", family: familyIETF,
		limit: "Ratelimit-Limit", remaining: "Ratelimit-Remaining",
		reset: "Ratelimit-Reset", resetUnit: epochOrSeconds},

	// GitHub, Discord, and Envoy's X- prefixed draft-03 fields.
	{name: "x-ratelimit", family: familyProvider,
		names: []string{"X-Ratelimit-Resource", "X-Ratelimit-Bucket"},
		limit: "X-Ratelimit-Limit", remaining: "X-Ratelimit-Remaining",
		reset: "X-Ratelimit-Reset", resetUnit: epochOrSeconds,
		resetAfter: "X-Ratelimit-Reset-After", restates: true},

	// X (Twitter).
	{name: "x-rate-limit", family: familyProvider,
		limit: "X-Rate-Limit-Limit", remaining: "X-Rate-Limit-Remaining",
		reset: "X-Rate-Limit-Reset", resetUnit: epochOrSeconds, restates: true},

	// OpenAI and Azure OpenAI.
	openAI("requests", "Requests"),
	openAI("tokens", "Tokens"),
	openAI("tokens_usage_based", "Tokens_usage_based"),

	// Anthropic.
	anthropic("requests", "Requests"),
	anthropic("tokens", "Tokens"),
	anthropic("input-tokens", "Input-Tokens"),
	anthropic("output-tokens", "Output-Tokens"),

	// Shopify REST: every plan's bucket drains in 20 seconds (40 calls at
	// 2/s on standard plans, 400 at 20/s on Shopify Plus).
	{name: "shopify", family: familyProvider,
		usedOfSize: "X-Shopify-Shop-Api-Call-Limit", drain: 20 * time.Second},
}

// openAI is OpenAI's row for quota name: X-Ratelimit-Limit-<field> and
// its -Remaining- and -Reset- twins, the reset a Go duration, refilling.
func openAI(name, field string) dialect {
	return dialect{name: name, family: familyProvider,
		limit: "X-Ratelimit-Limit-" + field, remaining: "X-Ratelimit-Remaining-" + field,
		reset: "X-Ratelimit-Reset-" + field, resetUnit: goDuration, refills: true}
}

// anthropic is Anthropic's row for quota name:
// Anthropic-Ratelimit-<field>-Limit, -Remaining and -Reset, the reset an
// RFC 3339 time, refilling.
func anthropic(name, field string) dialect {
	prefix := "Anthropic-Ratelimit-" + field
	return dialect{name: name, family: familyProvider,
		limit: prefix + "-Limit", remaining: prefix + "-Remaining",
		reset: prefix + "-Reset", resetUnit: rfc3339, refills: true}
}

// fields returns the dialect's field names.
func (d *dialect) fields() []string {
	var ks []string
	for _, k := range slices.Concat(d.names, []string{d.limit, d.remaining, d.reset, d.resetAfter, d.usedOfSize}) {
		if k != "" {
			ks = append(ks, k)
		}
	}
	return ks
}

// appendDialects appends a reading of every dialect present in f, in table
// order. ref is the instant absolute resets are measured from.
func (f fields) appendDialects(rs []reading, ref time.Time) []reading {
	for i := range dialects {
		if f.has(1 << i) {
			rs = appendKnown(rs, dialects[i].read(f, ref))
		}
	}
	return rs
}

// read reads the dialect's quota from f.
func (d *dialect) read(f fields, ref time.Time) reading {
	r := newReading(d.quotaName(f), d.family)
	r.Refills = d.refills
	r.restates = d.restates
	r.readLimit(f, d.limit)
	for v := range f.members(d.remaining) {
		if n, ok := parseCount(v); ok {
			r.setRemaining(n)
		}
	}
	for v := range f.members(d.resetAfter) {
		if n, ok := parseDecimal(v); ok {
			r.setReset(n.scaled(time.Second))
			r.Precision = max(r.Precision, precisionOf(v))
		}
	}
	if !r.hasReset {
		for v := range f.members(d.reset) {
			if t, ok := d.resetUnit.parse(v, ref); ok {
				r.setReset(t)
				r.Precision = max(r.Precision, d.resetUnit.precision(v))
				if at, ok := d.resetUnit.instant(v, ref); ok {
					r.Absolute = true
					r.at = later(r.at, at)
				}
			}
		}
	}
	if !r.hasReset && d.resetUnit == epochOrSeconds {
		// An HTTP-date holds a comma, so it is read as a whole line.
		for _, v := range f.values(d.reset) {
			if v = strings.Trim(v, " \t"); !isDigit(firstByte(v)) {
				if t, ok := parseReset(v, ref); ok {
					r.setReset(t)
					r.Absolute = true
					r.Precision = max(r.Precision, time.Second)
					if at, ok := httpDate(v); ok {
						r.at = later(r.at, at)
					}
				}
			}
		}
	}
	for v := range f.members(d.usedOfSize) {
		r.readUsedOfSize(v, d.drain)
	}
	return r
}

// readLimit reads the limit field key. Draft-03's RateLimit-Limit (and
// Envoy's X- prefixed copy) is "expiring-limit [, quota-policy]*": the bare
// first member is the limit that Remaining and Reset describe, the one
// closest to exhaustion, and the members with parameters ("10;w=1")
// describe every policy, so they are not the limit ("50, 10;w=1, 50;w=60"
// is a limit of 50). Bare members win (the lowest, when the field repeats);
// a field of policies alone gives the lowest of their quotas.
func (r *reading) readLimit(f fields, key string) {
	bare, policy := Unknown, Unknown
	for v := range f.members(key) {
		v, params, _ := strings.Cut(v, ";")
		n, ok := parseCount(strings.TrimRight(v, " \t"))
		switch {
		case !ok || n < 0:
		case params == "" && (bare == Unknown || n < bare):
			bare = n
		case params != "" && (policy == Unknown || n < policy):
			policy = n
		}
	}
	if bare != Unknown {
		r.setLimit(bare)
	} else if policy != Unknown {
		r.setLimit(policy)
	}
}

// quotaName returns the value of the first naming field present, or the
// dialect's name.
func (d *dialect) quotaName(f fields) string {
	for _, k := range d.names {
		if v := f.first(k); v != "" {
			return v
		}
	}
	return d.name
}

// parse reads one reset value written in u. ref is the instant absolute
// times are measured from.
func (u unit) parse(v string, ref time.Time) (time.Duration, bool) {
	switch u {
	case goDuration:
		return parseGoDuration(v)
	case rfc3339:
		if len(v) > MaxValueLen {
			return 0, false
		}
		t, err := time.Parse(time.RFC3339, v)
		return until(t, ref), err == nil
	}
	return parseReset(v, ref)
}

// firstByte returns v's first byte, or 0.
func firstByte(v string) byte {
	if v == "" {
		return 0
	}
	return v[0]
}

// instant returns the instant the reset value v, already parsed, names,
// or false when it is a delay. ref is as for parse.
func (u unit) instant(v string, ref time.Time) (time.Time, bool) {
	switch u {
	case goDuration:
		return time.Time{}, false
	case rfc3339:
		t, err := time.Parse(time.RFC3339, v)
		return t, err == nil
	}
	d, ok := parseDecimal(v)
	if !ok {
		return httpDate(v) // not a number: an HTTP-date
	}
	return d.epoch(), isEpoch(d.whole, ref)
}

// httpDate parses an HTTP-date, or the RFC 1123 date with zone "UTC" that
// go-limiter sends.
func httpDate(v string) (time.Time, bool) {
	if len(v) > MaxValueLen {
		return time.Time{}, false
	}
	if t, ok := parseHTTPDate(v); ok {
		return t, true
	}
	t, err := time.Parse(time.RFC1123, v)
	return t, err == nil
}

// later returns the later of a and b, a zero time counting as earliest.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// precision returns how finely the reset value v, already parsed, is
// stated (see [Quota.Precision]).
func (u unit) precision(v string) time.Duration {
	switch u {
	case goDuration:
		if _, ok := parseDecimal(v); ok {
			return precisionOf(v)
		}
		switch {
		case strings.HasSuffix(v, "ns"):
			return time.Nanosecond
		case strings.HasSuffix(v, "us"), strings.HasSuffix(v, "µs"):
			return time.Microsecond
		case strings.HasSuffix(v, "ms"), strings.Contains(v, "."):
			return time.Millisecond
		}
		return time.Second
	case rfc3339:
		if _, frac, ok := strings.Cut(v, "."); ok {
			return precisionOf("0." + digitsOf(frac))
		}
		return time.Second
	}
	if _, ok := parseDecimal(v); ok {
		return precisionOf(v)
	}
	return time.Second // an HTTP-date
}

// digitsOf returns the leading digits of s.
func digitsOf(s string) string {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i]
}

// precisionOf returns the precision of the decimal v: a second for a whole
// number, a tenth of one for one digit after the dot, and so on, down to a
// nanosecond.
func precisionOf(v string) time.Duration {
	_, frac, ok := strings.Cut(v, ".")
	p := time.Second
	for range min(len(frac), 9) {
		p /= 10
	}
	if !ok {
		return time.Second
	}
	return p
}

// readUsedOfSize reads "used/size" of a leaky bucket that drains in drain.
// Such a bucket is a token bucket of size calls refilling size per drain:
// what is left is size − used, and it is full again (Reset, with Refills)
// once the used calls have drained, used × drain/size from now (Shopify
// counts a call in flight as used, so that is never early). A wait (Parse)
// is shorter: a full bucket admits the next call after one leak,
// drain/size, 500ms for a 40-call bucket draining in 20s; a full drain
// would wait far longer than needed.
func (r *reading) readUsedOfSize(v string, drain time.Duration) {
	u, s, ok := strings.Cut(v, "/")
	used, okUsed := parseCount(u)
	size, okSize := parseCount(s)
	if !ok || !okUsed || !okSize || used < 0 || size <= 0 {
		return
	}
	r.setLimit(size)
	r.setRemaining(size - min(used, size))
	leak := drain / time.Duration(size)
	r.Refills, r.leaky = true, true
	drained := min(used, size) + min(max(used-size, 0), size) // a count beyond twice the size is absurd; no overflow
	r.setReset(time.Duration(drained) * leak)
	r.Precision = max(r.Precision, min(leak, time.Second)) // a Precision is at most a second (Quota); a bucket of fewer than 20 calls leaks slower
	if used >= size {
		// over × drain / size, in 128 bits: over ≤ size, so the quotient
		// is at most drain, but the product overflows an int64 once over
		// passes 2⁶³/drain (about 4.6e8 calls for 20 s).
		over := uint64(min(used-size+1, size))
		hi, lo := bits.Mul64(over, uint64(drain))
		fits, _ := bits.Div64(hi, lo, uint64(size))
		r.fits = clamp(time.Duration(fits))
	}
}
