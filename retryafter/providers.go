package retryafter

import (
	"net/http"
	"strings"
	"time"
)

// shopifyDrain is how long a full Shopify REST bucket takes to leak empty.
// Every plan leaks its bucket in 20 seconds: 40 calls at 2 per second on
// standard plans, 400 at 20 per second on Shopify Plus.
const shopifyDrain = 20 * time.Second

// readProviders reads the providers' own quota headers, in the order
// ParseQuota documents. ref is the instant absolute resets are measured from.
func readProviders(h http.Header, ref time.Time) []reading {
	var rs []reading
	add := func(r reading) {
		if r.known() {
			rs = append(rs, r)
		}
	}

	// GitHub, Discord, and Envoy's X- prefixed draft-03 fields. Discord's
	// Reset-After is relative, so it wins over Reset when both are valid.
	r := newReading(firstOf(h, "X-RateLimit-Resource", "X-RateLimit-Bucket", "x-ratelimit"), familyProvider)
	readCounts(&r, h, "X-RateLimit-Limit", "X-RateLimit-Remaining")
	readResets(&r, h, "X-RateLimit-Reset-After", time.Time{})
	if !r.hasReset {
		readResets(&r, h, "X-RateLimit-Reset", ref)
	}
	add(r)

	// X (Twitter).
	r = newReading("x-rate-limit", familyProvider)
	readCounts(&r, h, "X-Rate-Limit-Limit", "X-Rate-Limit-Remaining")
	readResets(&r, h, "X-Rate-Limit-Reset", ref)
	add(r)

	// OpenAI and Azure OpenAI: resets are Go durations such as "6m0s".
	for _, name := range []string{"requests", "tokens"} {
		r = newReading(name, familyProvider)
		readCounts(&r, h, "X-Ratelimit-Limit-"+name, "X-Ratelimit-Remaining-"+name)
		for _, v := range members(h, "X-Ratelimit-Reset-"+name) {
			if d, ok := parseGoDuration(v); ok {
				r.setReset(d)
			}
		}
		add(r)
	}

	// Anthropic: resets are RFC 3339 times.
	for _, name := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		r = newReading(name, familyProvider)
		prefix := "Anthropic-Ratelimit-" + name
		readCounts(&r, h, prefix+"-Limit", prefix+"-Remaining")
		for _, v := range members(h, prefix+"-Reset") {
			if len(v) > MaxValueLen {
				continue
			}
			if t, err := time.Parse(time.RFC3339, v); err == nil {
				r.setReset(until(t, ref))
			}
		}
		add(r)
	}

	add(readShopify(h))
	return rs
}

// readShopify reads X-Shopify-Shop-Api-Call-Limit: "used/size" of a leaky
// bucket. A full bucket admits the next call after one leak, size/20s, so
// that is its Reset: 500ms for a 40-call bucket. The header has no reset of
// its own, and a full drain would wait far longer than needed.
func readShopify(h http.Header) reading {
	r := newReading("shopify", familyProvider)
	for _, v := range members(h, "X-Shopify-Shop-Api-Call-Limit") {
		u, s, ok := strings.Cut(v, "/")
		used, okUsed := parseCount(u)
		size, okSize := parseCount(s)
		if !ok || !okUsed || !okSize || used < 0 || size <= 0 {
			continue
		}
		r.setLimit(size)
		r.setRemaining(size - min(used, size))
		if used >= size {
			over := time.Duration(min(used-size+1, size))
			r.setReset(over * shopifyDrain / time.Duration(size))
		} else {
			r.setReset(0)
		}
	}
	return r
}

// readCounts reads a limit and a remaining field into r.
func readCounts(r *reading, h http.Header, limit, remaining string) {
	for _, v := range members(h, limit) {
		v, _, _ = strings.Cut(v, ";") // Envoy: "10, 10;w=1"
		if n, ok := parseCount(strings.TrimRight(v, " \t")); ok {
			r.setLimit(n)
		}
	}
	for _, v := range members(h, remaining) {
		if n, ok := parseCount(v); ok {
			r.setRemaining(n)
		}
	}
}

// readResets reads an epoch-or-delta reset field into r.
func readResets(r *reading, h http.Header, key string, ref time.Time) {
	for _, v := range members(h, key) {
		if d, ok := parseReset(v, ref); ok {
			r.setReset(d)
		}
	}
}

// firstOf returns the first value of the first of keys but the last that
// is set, or the last key itself.
func firstOf(h http.Header, keys ...string) string {
	def := keys[len(keys)-1]
	for _, k := range keys[:len(keys)-1] {
		if vs := values(h, k); len(vs) > 0 && vs[0] != "" && len(vs[0]) <= MaxValueLen {
			return vs[0]
		}
	}
	return def
}
