package egress

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
)

// keyHashLen is how many bytes of the SHA-256 of a header value a key made
// by KeyByHeader keeps: 64 bits, far beyond any collision worry among the
// keys of one API.
const keyHashLen = 8

// KeyByHeader returns a key func for [WithKey] that draws each request's
// budget key from its header name, such as "Authorization" or "X-Api-Key",
// so that every API key gets its own budget.
//
// The value is hashed: the key is the canonical header name, "#", and the
// first 16 hex digits of the value's SHA-256, as in
// "Authorization#3c5f0b0e33c7a4d1". Secrets therefore never appear in keys,
// in errors, in an [Observer]'s reports or in Redis. (The hash hides a
// strong secret; it cannot hide one that is easy to guess.) A request
// without the header is keyed by its host, as by default.
//
// KeyByHeader panics if name is empty: no request has that header, so
// every request would fall back to its host, silently.
func KeyByHeader(name string) func(*http.Request) string {
	if name == "" {
		panic("egress: KeyByHeader given an empty header name")
	}
	name = http.CanonicalHeaderKey(name)
	return func(req *http.Request) string {
		v := req.Header.Get(name)
		if v == "" {
			return req.URL.Host
		}
		sum := sha256.Sum256([]byte(v))
		var buf [keyHashLen * 2]byte
		hex.Encode(buf[:], sum[:keyHashLen])
		return name + "#" + string(buf[:])
	}
}

// requestKey and requestCost are the context keys of WithRequestKey and
// WithRequestCost.
type (
	requestKey  struct{}
	requestCost struct{}
)

// WithRequestKey returns a copy of ctx that sets the budget key of a
// request made with it, overriding the Transport's key func ([WithKey]).
// Like any key, it may end up in errors and in Redis: hash secrets first,
// or use [KeyByHeader].
func WithRequestKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, requestKey{}, key)
}

// WithRequestCost returns a copy of ctx that sets how many units of its
// key's budget a request made with it takes, overriding the Transport's
// cost func ([WithCost]). A cost of 0 takes nothing from the limiter; a
// negative cost fails the request.
func WithRequestCost(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, requestCost{}, n)
}

// keyAndCost returns req's budget key and cost.
func (t *Transport) keyAndCost(req *http.Request) (string, int) {
	ctx := req.Context()
	key, ok := ctx.Value(requestKey{}).(string)
	if !ok {
		if t.keyOf != nil {
			key = t.keyOf(req)
		} else {
			key = req.URL.Host
		}
	}
	cost, ok := ctx.Value(requestCost{}).(int)
	if !ok {
		if t.costOf != nil {
			cost = t.costOf(req)
		} else {
			cost = 1
		}
	}
	return key, cost
}
