package retryafter

import (
	"math"
	"time"

	"github.com/dunglas/httpsfv"
)

// maxFieldLen bounds the Structured Field values that are parsed at all. A
// longer RateLimit or RateLimit-Policy field is ignored as malformed.
const maxFieldLen = 4096

// appendIETF appends the policies of the RateLimit and RateLimit-Policy fields of
// draft-ietf-httpapi-ratelimit-headers (revision 10, September 2025). Both are
// Structured Field Lists (RFC 9651):
//
//	RateLimit-Policy: "burst";q=100;w=60, "daily";q=1000;w=86400
//	RateLimit: "burst";r=0;t=30
//
// A policy's id may be a Token instead of a String, as in some of the
// draft's own examples, and r may be missing. q is also read under its older
// name l. The draft-07 Dictionary form "limit=100, remaining=0, reset=5" is
// read too. A field that does not parse is ignored entirely; an item whose r,
// t, q or w is not a non-negative number is skipped.
func (f fields) appendIETF(rs []reading) []reading {
	if !f.has(presentIETF) {
		return rs
	}
	start := len(rs)
	index := map[string]int{}
	get := func(name string) *reading {
		i, ok := index[name]
		if !ok {
			i = len(rs)
			index[name] = i
			rs = append(rs, newReading(name, familyIETF))
		}
		return &rs[i]
	}

	list, ok := f.sfList(keyRateLimit)
	if !ok {
		if r, ok := f.readIETFDictionary(); ok {
			rs = append(rs, r)
		}
	}
	for _, it := range list {
		name, r, t, ok := policyItem(it, "r", "t", true)
		if !ok {
			continue
		}
		q := get(name)
		if r >= 0 {
			q.setRemaining(int(r))
		}
		if t >= 0 {
			q.setReset(seconds(t))
		}
	}

	policies, _ := f.sfList(keyRateLimitPolicy)
	for _, it := range policies {
		name, limit, window, ok := policyItem(it, "q", "w", false)
		if !ok {
			continue
		}
		if limit < 0 {
			_, limit, _, ok = policyItem(it, "l", "w", false)
			if !ok {
				continue
			}
		}
		q := get(name)
		if limit >= 0 {
			q.setLimit(int(min(limit, maxWhole)))
		}
		if window > 0 {
			q.Window = max(q.Window, seconds(window))
		}
	}
	// An item that stated none of r, t and q (the draft requires r and q)
	// describes no quota: `"default"` alone, or a policy with only w.
	kept := rs[:start]
	for _, r := range rs[start:] {
		if r.known() {
			kept = append(kept, r)
		}
	}
	return kept
}

// readIETFDictionary reads draft-07's RateLimit Dictionary,
// "limit=100, remaining=50, reset=5".
func (f fields) readIETFDictionary() (reading, bool) {
	vs := f.values(keyRateLimit)
	if len(vs) == 0 || fieldLen(vs) > maxFieldLen {
		return reading{}, false
	}
	dict, err := httpsfv.UnmarshalDictionary(vs)
	if err != nil {
		return reading{}, false
	}
	r := newReading("ratelimit", familyIETF)
	if n, ok := dictNumber(dict, "limit", false); ok {
		r.setLimit(int(min(n, maxWhole)))
	}
	if n, ok := dictNumber(dict, "remaining", false); ok {
		r.setRemaining(int(min(n, maxWhole)))
	}
	if n, ok := dictNumber(dict, "reset", true); ok {
		r.setReset(seconds(n))
	}
	return r, r.known()
}

// dictNumber reads the number under key; up is as for nonNegative.
func dictNumber(d *httpsfv.Dictionary, key string, up bool) (int64, bool) {
	m, ok := d.Get(key)
	if !ok {
		return 0, false
	}
	it, ok := m.(httpsfv.Item)
	if !ok {
		return 0, false
	}
	n := nonNegative(it.Value, up)
	return n, n >= 0
}

// sfList parses the field key as a Structured Field List.
func (f fields) sfList(key string) (httpsfv.List, bool) {
	vs := f.values(key)
	if len(vs) == 0 || fieldLen(vs) > maxFieldLen {
		return nil, false
	}
	l, err := httpsfv.UnmarshalList(vs)
	if err != nil {
		return nil, false
	}
	return l, true
}

func fieldLen(vs []string) int {
	n := 0
	for _, v := range vs {
		n += len(v) + 2
	}
	return n
}

// policyItem reads one list member as a policy id with two numeric
// parameters a and b. A missing parameter is -1; a parameter that is present
// but not a non-negative number makes the item malformed. bUp rounds a
// Decimal b up, as a reset must be: see nonNegative.
func policyItem(m httpsfv.Member, a, b string, bUp bool) (name string, va, vb int64, ok bool) {
	it, isItem := m.(httpsfv.Item)
	if !isItem {
		return "", 0, 0, false
	}
	switch v := it.Value.(type) {
	case string:
		name = v
	case httpsfv.Token:
		name = string(v)
	default:
		return "", 0, 0, false
	}
	va, vb = -1, -1
	if it.Params != nil {
		if v, present := it.Params.Get(a); present {
			if va = nonNegative(v, false); va < 0 {
				return "", 0, 0, false
			}
		}
		if v, present := it.Params.Get(b); present {
			if vb = nonNegative(v, bUp); vb < 0 {
				return "", 0, 0, false
			}
		}
	}
	return name, va, vb, true
}

// nonNegative returns a Structured Field Integer, or a Decimal rounded down
// (up when up is set), when it is not negative; otherwise -1. Counts round
// down, to the cautious side; a reset rounds up, since t=1.5 read as 1
// would send the client back half a second before the quota returns, and
// t=0.5 read as 0 would be no signal at all.
func nonNegative(v any, up bool) int64 {
	switch n := v.(type) {
	case int64:
		if n >= 0 {
			return n
		}
	case float64:
		if n < 0 || n >= maxWhole { // NaN never reaches here: Structured Fields have none
			return -1
		}
		if up {
			return int64(math.Ceil(n))
		}
		return int64(n)
	}
	return -1
}

// seconds converts a non-negative number of seconds, clamped.
func seconds(n int64) time.Duration {
	return decimal{whole: uint64(min(n, maxWhole))}.scaled(time.Second)
}
