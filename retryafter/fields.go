package retryafter

import (
	"iter"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// The header fields this package reads, in canonical form, so that a lookup
// is one map access with no canonicalization and no concatenation.
const (
	keyRetryAfter   = "Retry-After"
	keyRetryAfterMs = "Retry-After-Ms"
	keyDate         = "Date"
	keyAge          = "Age"

	keyRateLimit          = "Ratelimit"
	keyRateLimitPolicy    = "Ratelimit-Policy"
	keyRateLimitLimit     = "Ratelimit-Limit"
	keyRateLimitRemaining = "Ratelimit-Remaining"
	keyRateLimitReset     = "Ratelimit-Reset"

	keyXRateLimitResource   = "X-Ratelimit-Resource"
	keyXRateLimitBucket     = "X-Ratelimit-Bucket"
	keyXRateLimitLimit      = "X-Ratelimit-Limit"
	keyXRateLimitRemaining  = "X-Ratelimit-Remaining"
	keyXRateLimitReset      = "X-Ratelimit-Reset"
	keyXRateLimitResetAfter = "X-Ratelimit-Reset-After"

	keyXRateLimitDashLimit     = "X-Rate-Limit-Limit"
	keyXRateLimitDashRemaining = "X-Rate-Limit-Remaining"
	keyXRateLimitDashReset     = "X-Rate-Limit-Reset"

	keyOpenAILimitRequests     = "X-Ratelimit-Limit-Requests"
	keyOpenAIRemainingRequests = "X-Ratelimit-Remaining-Requests"
	keyOpenAIResetRequests     = "X-Ratelimit-Reset-Requests"
	keyOpenAILimitTokens       = "X-Ratelimit-Limit-Tokens"
	keyOpenAIRemainingTokens   = "X-Ratelimit-Remaining-Tokens"
	keyOpenAIResetTokens       = "X-Ratelimit-Reset-Tokens"

	keyAnthropicRequestsLimit         = "Anthropic-Ratelimit-Requests-Limit"
	keyAnthropicRequestsRemaining     = "Anthropic-Ratelimit-Requests-Remaining"
	keyAnthropicRequestsReset         = "Anthropic-Ratelimit-Requests-Reset"
	keyAnthropicTokensLimit           = "Anthropic-Ratelimit-Tokens-Limit"
	keyAnthropicTokensRemaining       = "Anthropic-Ratelimit-Tokens-Remaining"
	keyAnthropicTokensReset           = "Anthropic-Ratelimit-Tokens-Reset"
	keyAnthropicInputTokensLimit      = "Anthropic-Ratelimit-Input-Tokens-Limit"
	keyAnthropicInputTokensRemaining  = "Anthropic-Ratelimit-Input-Tokens-Remaining"
	keyAnthropicInputTokensReset      = "Anthropic-Ratelimit-Input-Tokens-Reset"
	keyAnthropicOutputTokensLimit     = "Anthropic-Ratelimit-Output-Tokens-Limit"
	keyAnthropicOutputTokensRemaining = "Anthropic-Ratelimit-Output-Tokens-Remaining"
	keyAnthropicOutputTokensReset     = "Anthropic-Ratelimit-Output-Tokens-Reset"

	keyShopifyCallLimit = "X-Shopify-Shop-Api-Call-Limit"
)

// group is a set of header families, one bit each. Reading a family whose
// bit is clear is skipped: none of its fields is present.
type group uint16

const (
	groupRetryAfter     group = 1 << iota // Retry-After, Retry-After-Ms
	groupIETF                             // RateLimit, RateLimit-Policy
	groupDraft03                          // RateLimit-Limit, -Remaining, -Reset
	groupXRateLimit                       // X-RateLimit-* of GitHub, Discord, Envoy
	groupXRateLimitDash                   // x-rate-limit-* of X
	groupOpenAI                           // x-ratelimit-*-requests, -tokens
	groupAnthropic                        // anthropic-ratelimit-*
	groupShopify                          // X-Shopify-Shop-Api-Call-Limit
	groupDate                             // Date
	groupAge                              // Age

	// groupQuota is every family that describes a quota.
	groupQuota = groupIETF | groupDraft03 | groupXRateLimit | groupXRateLimitDash |
		groupOpenAI | groupAnthropic | groupShopify

	// groupAll is every field this package reads.
	groupAll = groupRetryAfter | groupQuota | groupDate | groupAge
)

// groupOf returns the family of a canonical key, or 0 for a field this
// package does not read.
func groupOf(key string) group {
	switch key {
	case keyRetryAfter, keyRetryAfterMs:
		return groupRetryAfter
	case keyDate:
		return groupDate
	case keyAge:
		return groupAge
	case keyRateLimit, keyRateLimitPolicy:
		return groupIETF
	case keyRateLimitLimit, keyRateLimitRemaining, keyRateLimitReset:
		return groupDraft03
	case keyXRateLimitResource, keyXRateLimitBucket, keyXRateLimitLimit,
		keyXRateLimitRemaining, keyXRateLimitReset, keyXRateLimitResetAfter:
		return groupXRateLimit
	case keyXRateLimitDashLimit, keyXRateLimitDashRemaining, keyXRateLimitDashReset:
		return groupXRateLimitDash
	case keyOpenAILimitRequests, keyOpenAIRemainingRequests, keyOpenAIResetRequests,
		keyOpenAILimitTokens, keyOpenAIRemainingTokens, keyOpenAIResetTokens:
		return groupOpenAI
	case keyAnthropicRequestsLimit, keyAnthropicRequestsRemaining, keyAnthropicRequestsReset,
		keyAnthropicTokensLimit, keyAnthropicTokensRemaining, keyAnthropicTokensReset,
		keyAnthropicInputTokensLimit, keyAnthropicInputTokensRemaining, keyAnthropicInputTokensReset,
		keyAnthropicOutputTokensLimit, keyAnthropicOutputTokensRemaining, keyAnthropicOutputTokensReset:
		return groupAnthropic
	case keyShopifyCallLimit:
		return groupShopify
	}
	return 0
}

// fields is a header as this package reads it: which families it holds,
// and whether any of their keys is spelled other than canonically, as in a
// header built by hand as a map literal. Build one with scan.
//
// Its zero value is an empty header.
type fields struct {
	h   http.Header
	set group

	// folded is set when h holds a key that equals one of ours only
	// case-insensitively. Lookups then gather every spelling, which costs
	// a pass over h and allocations; headers that net/http built never
	// need it, since it canonicalizes every key it reads.
	folded bool
}

// scan makes one pass over the keys of h and notes the families present.
// It does not allocate for a header whose keys are canonical.
func scan(h http.Header) fields {
	f := fields{h: h}
	for k := range h {
		if g := groupOf(k); g != 0 {
			f.set |= g
			continue
		}
		if !mayFold(k) {
			continue
		}
		if c := http.CanonicalHeaderKey(k); c != k {
			if g := groupOf(c); g != 0 {
				f.set |= g
				f.folded = true
			}
		} else if !isASCII(k) {
			// strings.EqualFold, which the lookups use, folds "ſ" to
			// "s" and the Kelvin sign to "k": such a key may be one of
			// ours. Read everything the slow way.
			f.set, f.folded = groupAll, true
		}
	}
	return f
}

// mayFold reports whether k may be one of our keys spelled another way,
// judging by its first byte: every key we read starts with A, D, R or X,
// and no other rune folds to those.
func mayFold(k string) bool {
	if k == "" {
		return false
	}
	switch k[0] | 0x20 {
	case 'a', 'd', 'r', 'x':
		return true
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// has reports whether any family of g is present.
func (f fields) has(g group) bool { return f.set&g != 0 }

// values returns the field lines of key, which must be canonical. Lines
// under keys spelled another way ("x-ratelimit-remaining") follow the
// canonical ones, in sorted key order, so that the result does not depend
// on map order.
func (f fields) values(key string) []string {
	vs := f.h[key]
	if !f.folded {
		return vs
	}
	var others []string
	for k := range f.h {
		if k != key && strings.EqualFold(k, key) {
			others = append(others, k)
		}
	}
	if len(others) == 0 {
		return vs
	}
	slices.Sort(others)
	vs = slices.Clone(vs)
	for _, k := range others {
		vs = append(vs, f.h[k]...)
	}
	return vs
}

// first returns the first line of key when it is not empty and not longer
// than MaxValueLen, or "".
func (f fields) first(key string) string {
	if vs := f.values(key); len(vs) > 0 && len(vs[0]) <= MaxValueLen {
		return vs[0]
	}
	return ""
}

// members yields every member of the field key: each field line, split at
// commas, with optional whitespace trimmed and empty members dropped. Use it
// only for fields whose values cannot contain a comma.
func (f fields) members(key string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, line := range f.values(key) {
			for m := range strings.SplitSeq(line, ",") {
				if m = strings.Trim(m, " \t"); m != "" && !yield(m) {
					return
				}
			}
		}
	}
}
