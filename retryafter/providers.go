package retryafter

import (
	"strings"
	"time"
)

// shopifyDrain is how long a full Shopify REST bucket takes to leak empty.
// Every plan leaks its bucket in 20 seconds: 40 calls at 2 per second on
// standard plans, 400 at 20 per second on Shopify Plus.
const shopifyDrain = 20 * time.Second

// appendProviders appends the providers' own quota headers, in the order
// ParseQuota documents. ref is the instant absolute resets are measured from.
func (f fields) appendProviders(rs []reading, ref time.Time) []reading {
	// GitHub, Discord, and Envoy's X- prefixed draft-03 fields. Discord's
	// Reset-After is relative, so it wins over Reset when both are valid.
	if f.has(groupXRateLimit) {
		name := f.first(keyXRateLimitResource)
		if name == "" {
			name = f.first(keyXRateLimitBucket)
		}
		if name == "" {
			name = "x-ratelimit"
		}
		r := newReading(name, familyProvider)
		r.readCounts(f, keyXRateLimitLimit, keyXRateLimitRemaining)
		r.readResets(f, keyXRateLimitResetAfter, time.Time{})
		if !r.hasReset {
			r.readResets(f, keyXRateLimitReset, ref)
		}
		rs = appendKnown(rs, r)
	}

	// X (Twitter).
	if f.has(groupXRateLimitDash) {
		r := newReading("x-rate-limit", familyProvider)
		r.readCounts(f, keyXRateLimitDashLimit, keyXRateLimitDashRemaining)
		r.readResets(f, keyXRateLimitDashReset, ref)
		rs = appendKnown(rs, r)
	}

	// OpenAI and Azure OpenAI: resets are Go durations such as "6m0s".
	if f.has(groupOpenAI) {
		for _, k := range [...]quotaKeys{
			{"requests", keyOpenAILimitRequests, keyOpenAIRemainingRequests, keyOpenAIResetRequests},
			{"tokens", keyOpenAILimitTokens, keyOpenAIRemainingTokens, keyOpenAIResetTokens},
		} {
			r := newReading(k.name, familyProvider)
			r.readCounts(f, k.limit, k.remaining)
			for v := range f.members(k.reset) {
				if d, ok := parseGoDuration(v); ok {
					r.setReset(d)
				}
			}
			rs = appendKnown(rs, r)
		}
	}

	// Anthropic: resets are RFC 3339 times.
	if f.has(groupAnthropic) {
		for _, k := range [...]quotaKeys{
			{"requests", keyAnthropicRequestsLimit, keyAnthropicRequestsRemaining, keyAnthropicRequestsReset},
			{"tokens", keyAnthropicTokensLimit, keyAnthropicTokensRemaining, keyAnthropicTokensReset},
			{"input-tokens", keyAnthropicInputTokensLimit, keyAnthropicInputTokensRemaining, keyAnthropicInputTokensReset},
			{"output-tokens", keyAnthropicOutputTokensLimit, keyAnthropicOutputTokensRemaining, keyAnthropicOutputTokensReset},
		} {
			r := newReading(k.name, familyProvider)
			r.readCounts(f, k.limit, k.remaining)
			for v := range f.members(k.reset) {
				if len(v) > MaxValueLen {
					continue
				}
				if t, err := time.Parse(time.RFC3339, v); err == nil {
					r.setReset(until(t, ref))
				}
			}
			rs = appendKnown(rs, r)
		}
	}

	if f.has(groupShopify) {
		rs = appendKnown(rs, f.readShopify())
	}
	return rs
}

// quotaKeys names the fields of one provider quota.
type quotaKeys struct {
	name                    string
	limit, remaining, reset string
}

// readShopify reads X-Shopify-Shop-Api-Call-Limit: "used/size" of a leaky
// bucket. A full bucket admits the next call after one leak, size/20s, so
// that is its Reset: 500ms for a 40-call bucket. The header has no reset of
// its own, and a full drain would wait far longer than needed.
func (f fields) readShopify() reading {
	r := newReading("shopify", familyProvider)
	for v := range f.members(keyShopifyCallLimit) {
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
func (r *reading) readCounts(f fields, limit, remaining string) {
	for v := range f.members(limit) {
		v, _, _ = strings.Cut(v, ";") // Envoy: "10, 10;w=1"
		if n, ok := parseCount(strings.TrimRight(v, " \t")); ok {
			r.setLimit(n)
		}
	}
	for v := range f.members(remaining) {
		if n, ok := parseCount(v); ok {
			r.setRemaining(n)
		}
	}
}

// readResets reads an epoch-or-delta reset field into r.
func (r *reading) readResets(f fields, key string, ref time.Time) {
	for v := range f.members(key) {
		if d, ok := parseReset(v, ref); ok {
			r.setReset(d)
		}
	}
}
