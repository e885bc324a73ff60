package middleware

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/egress-go/egress"
)

// MaxKeyLen is the longest key the middleware accepts, in bytes, and the
// longest header value [KeyByHeader] reads. A longer one is answered with
// 400 Bad Request. It matches the built-in limiters' own bound. API keys
// are far shorter; to limit by a bearer token that may be longer (a JWT),
// authenticate it first and key by its subject with [KeyByUser].
const MaxKeyLen = 1024

// ErrKeyTooLong is returned by a [KeyFunc] whose key (or the value it reads)
// is longer than [MaxKeyLen]. The middleware answers such a request with
// 400 Bad Request.
var ErrKeyTooLong = errors.New("middleware: key too long")

// A KeyFunc returns the budget key of a request.
//
// It returns "" and a nil error when the request carries no key, and an
// error when the key it carries is malformed: either way the middleware
// keys the request by its fallback ([WithFallback]), never lets it through
// unlimited. An error that wraps [ErrKeyTooLong] is answered with 400 Bad
// Request instead.
//
// Keys end up in the limiter's state, in Redis and in logs: a KeyFunc
// must never return a secret as it is. [KeyByHeader] hashes it.
type KeyFunc func(r *http.Request) (string, error)

// tooLong returns the error for a value of n bytes read from what.
func tooLong(what string, n int) error {
	return fmt.Errorf("%w: %s is %d bytes, longer than MaxKeyLen (%d)", ErrKeyTooLong, what, n, MaxKeyLen)
}

// KeyByHeader returns a KeyFunc that keys each request by the value of its
// header name, such as "X-Api-Key" or "Authorization", so that every API
// key gets its own budget.
//
// The value is hashed exactly as [egress.KeyByHeader] hashes it on the
// client: the key is the canonical header name, "#", and the first 16 hex
// digits of the value's SHA-256, as in "X-Api-Key#3c5f0b0e33c7a4d1". So
// secrets never reach the limiter, Redis or a log, and a service that looks
// up a plan per API key can store the hashes instead of the keys. A
// request without the header goes to the fallback key; one whose value is
// longer than [MaxKeyLen] gets 400 Bad Request.
func KeyByHeader(name string) KeyFunc {
	if name == "" {
		panic("middleware: KeyByHeader given an empty header name")
	}
	name = http.CanonicalHeaderKey(name)
	hash := egress.KeyByHeader(name)
	return func(r *http.Request) (string, error) {
		v := r.Header.Get(name)
		switch {
		case v == "":
			return "", nil
		case len(v) > MaxKeyLen:
			return "", tooLong("header "+name, len(v))
		}
		return hash(r), nil
	}
}

// KeyByUser returns a KeyFunc that keys each request by the user that
// user reports, such as the subject of a token your authentication
// middleware has already checked. The key is "user:" followed by it. When
// user returns "", as for an anonymous request, the request goes to the
// fallback key.
func KeyByUser(user func(r *http.Request) string) KeyFunc {
	if user == nil {
		panic("middleware: KeyByUser given a nil func")
	}
	return func(r *http.Request) (string, error) {
		u := user(r)
		switch {
		case u == "":
			return "", nil
		case len(u) > MaxKeyLen-len("user:"):
			return "", tooLong("the user", len(u))
		}
		return "user:" + u, nil
	}
}

// KeyByIP returns a KeyFunc that keys each request by its client's IP
// address, as "ip:203.0.113.7". An IPv6 client is keyed by its /64, since
// one host is usually handed a whole /64 and could otherwise take a fresh
// budget per address.
//
// The client is the peer that connected (the request's RemoteAddr), unless
// that peer is one of the trusted proxies: then it is read from
// X-Forwarded-For, from the right, skipping every address that is itself a
// trusted proxy. X-Forwarded-For is never read from an untrusted peer,
// because anyone can send it: a client that wrote a fresh made-up address
// into it on every request would get a fresh budget each time, and one
// that wrote its victim's address would spend the victim's budget. Only
// the entries your own proxies appended can be believed, and they are the
// rightmost ones.
//
// A request whose address cannot be read goes to the fallback key.
func KeyByIP(trustedProxies ...netip.Prefix) KeyFunc {
	trusted := make([]netip.Prefix, len(trustedProxies))
	for i, p := range trustedProxies {
		if !p.IsValid() {
			panic(fmt.Sprintf("middleware: KeyByIP given an invalid prefix (#%d)", i))
		}
		trusted[i] = p.Masked()
	}
	return func(r *http.Request) (string, error) {
		a, ok := clientIP(r, trusted)
		if !ok {
			return "", nil
		}
		return ipKey(a), nil
	}
}

// clientIP returns the address of r's client, as KeyByIP describes.
func clientIP(r *http.Request, trusted []netip.Prefix) (netip.Addr, bool) {
	a, ok := parseAddr(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, false
	}
	if !isTrusted(a, trusted) {
		return a, true
	}
	// Walk X-Forwarded-For from the right: its last entry was written by
	// the trusted peer, and each entry left of a trusted one by it too.
	vs := r.Header.Values("X-Forwarded-For")
	for i := len(vs) - 1; i >= 0; i-- {
		rest := vs[i]
		for rest != "" {
			var hop string
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				hop, rest = rest[j+1:], rest[:j]
			} else {
				hop, rest = rest, ""
			}
			h, ok := parseAddr(strings.TrimSpace(hop))
			if !ok {
				// A proxy we trust wrote garbage: nothing left of it can be
				// believed, so the last hop we could read is the client.
				return a, true
			}
			a = h
			if !isTrusted(a, trusted) {
				return a, true
			}
		}
	}
	return a, true
}

// parseAddr reads an address as "ip:port", "[ip]:port" or a bare ip, and
// returns it unmapped. RemoteAddr is "ip:port" from net/http's server, but
// a bare ip once a middleware in front (chi's RealIP, gorilla's
// ProxyHeaders) has rewritten it; and some proxies (Azure's, IIS ARR)
// append "ip:port" to X-Forwarded-For. Read as unreadable, either put
// every client under one key: "ip:unknown", or the proxy's own.
func parseAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	return netip.Addr{}, false
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ipKey returns the key of client address a: its /64 for IPv6.
func ipKey(a netip.Addr) string {
	if a.Is6() {
		a = netip.PrefixFrom(a, 64).Masked().Addr()
	}
	var buf [3 + 48]byte
	b := append(buf[:0], "ip:"...)
	return string(a.AppendTo(b))
}

// unknownKey is the key of a request that neither the key func nor the
// fallback could key: every such request shares it.
const unknownKey = "ip:unknown"
