package retryafter

import (
	"iter"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// The header fields this package reads besides the quota dialects, in
// canonical form, so that a lookup is one map access.
const (
	keyRetryAfter      = "Retry-After"
	keyRetryAfterMs    = "Retry-After-Ms"
	keyDate            = "Date"
	keyAge             = "Age"
	keyRateLimit       = "Ratelimit"        // IETF, a Structured Field
	keyRateLimitPolicy = "Ratelimit-Policy" // IETF, a Structured Field
)

// present is a set of what a header holds: bit i for a field of
// dialects[i], and the bits below for the other fields.
type present uint32

const (
	presentRetryAfter present = 1 << (31 - iota) // Retry-After, Retry-After-Ms
	presentIETF                                  // RateLimit, RateLimit-Policy
	presentDate                                  // Date
	presentAge                                   // Age

	// presentQuota is every bit that describes a quota.
	presentQuota = presentIETF | (presentAge - 1) // IETF's, and every dialect's bit

	// maxDialects is how many dialects the bits below presentAge can tell
	// apart.
	maxDialects = 28

	// presentAll is everything this package reads.
	presentAll = ^present(0)
)

// fieldIndex maps every field this package reads, in canonical form, to its
// presence bit. It is derived from the constants above and from dialects,
// and never written after.
var fieldIndex = indexFields()

func indexFields() map[string]present {
	m := map[string]present{
		keyRetryAfter:      presentRetryAfter,
		keyRetryAfterMs:    presentRetryAfter,
		keyRateLimit:       presentIETF,
		keyRateLimitPolicy: presentIETF,
		keyDate:            presentDate,
		keyAge:             presentAge,
	}
	for i, d := range dialects {
		for _, k := range d.fields() {
			m[k] |= 1 << i
		}
	}
	return m
}

// maxKeyLen is the longest field name fieldIndex can hold; a longer key is
// none of ours.
const maxKeyLen = 64

// fields is a header as this package reads it: which fields it holds, and
// whether any of them is spelled other than canonically, as in a header
// built by hand as a map literal. Build one with scan.
//
// Its zero value is an empty header.
type fields struct {
	h   http.Header
	set present

	// folded is set when h holds a key that equals one of ours only
	// case-insensitively. Lookups then gather every spelling, which costs
	// a pass over h and allocations; headers that net/http built never
	// need it, since it canonicalizes every key it reads.
	folded bool
}

// scan makes one pass over the keys of h and notes which of ours are
// present. It does not allocate, and the presence bits let every reader
// skip the fields that are absent: together they keep [Policy.Pause], which
// the Transport calls on every response, free of allocations on ordinary
// responses (TestAllocs in alloc_test.go).
func scan(h http.Header) fields {
	f := fields{h: h}
	for k := range h {
		if p, ok := fieldIndex[k]; ok {
			f.set |= p
		} else if p, ok := lookupFolded(k); ok {
			f.set |= p
			f.folded = true
		} else if !isASCII(k) {
			// strings.EqualFold, which the lookups use, folds "ſ" to
			// "s" and the Kelvin sign to "k": such a key may be one of
			// ours. Read everything the slow way.
			f.set, f.folded = presentAll, true
		}
	}
	return f
}

// lookupFolded looks up the canonical form of an ASCII key that is not in
// canonical form, without allocating. It reports false for a key that is
// already canonical, longer than maxKeyLen, or not ASCII.
func lookupFolded(k string) (present, bool) {
	if len(k) > maxKeyLen {
		return 0, false
	}
	var buf [maxKeyLen]byte
	changed, upper := false, true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c >= utf8.RuneSelf {
			return 0, false
		}
		switch {
		case upper && 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		case !upper && 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		changed = changed || c != k[i]
		buf[i] = c
		upper = c == '-'
	}
	if !changed {
		return 0, false
	}
	p, ok := fieldIndex[string(buf[:len(k)])] // no allocation: the compiler sees the conversion is only a key
	return p, ok
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// has reports whether anything in p is present.
func (f fields) has(p present) bool { return f.set&p != 0 }

// values returns the field lines of key, which must be canonical. Lines
// under keys spelled another way ("x-ratelimit-remaining") follow the
// canonical ones, in sorted key order, so that the result does not depend
// on map order.
func (f fields) values(key string) []string {
	if key == "" {
		return nil
	}
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
