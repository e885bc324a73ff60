package middleware_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/egress-go/egress/middleware"
	"github.com/egress-go/egress/throttle"
)

// Limit each client IP to 2 requests a second, with bursts of 3. The
// fourth request of a burst is refused, and every response says what is
// left.
func Example() {
	stopped := func() time.Time { return time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC) } // so that the output is exact
	limit, err := throttle.NewTokenBucket(throttle.PerSecond(2), 3, throttle.WithClock(stopped))
	if err != nil {
		panic(err)
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	h := middleware.New(limit).Wrap(api)

	for range 4 {
		req := httptest.NewRequest(http.MethodGet, "http://api.test/", nil)
		req.RemoteAddr = "203.0.113.7:40000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", rec.Code, rec.Header().Get("RateLimit"), rec.Header().Get("Retry-After"))
		if rec.Code == http.StatusTooManyRequests {
			fmt.Println("RateLimit-Policy:", rec.Header().Get("RateLimit-Policy"))
		}
	}
	// Output:
	// 200 RateLimit: "bucket";r=2;t=1 Retry-After: ""
	// 200 RateLimit: "bucket";r=1;t=1 Retry-After: ""
	// 200 RateLimit: "bucket";r=0;t=2 Retry-After: ""
	// 429 RateLimit: "bucket";r=0;t=2 Retry-After: "1"
	// RateLimit-Policy: "bucket";q=4;w=2
}

// Plan tiers keyed by API key: the pick func sees the key hashed, so the
// table of plans holds hashes, never the keys themselves.
func Example_tiers() {
	free, _ := throttle.NewFixedWindow(100, 24*time.Hour)
	pro, _ := throttle.NewTokenBucket(throttle.PerMinute(600), 600)
	tiers := map[string]struct {
		limit    throttle.Limiter
		policies *middleware.Policies
	}{
		"free": {free, middleware.Describe(free)},
		"pro":  {pro, middleware.Describe(pro)},
	}
	keyOf := middleware.KeyByHeader("X-Api-Key")
	plans := map[string]string{} // hashed API key → plan
	for apiKey, plan := range map[string]string{"key-of-ada": "pro", "key-of-bob": "free"} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("X-Api-Key", apiKey)
		hashed, _ := keyOf(req)
		plans[hashed] = plan
	}
	plan := func(key string) string {
		if p, ok := plans[key]; ok {
			return p
		}
		return "free" // unknown keys and keyless requests (by IP)
	}
	h := middleware.New(
		throttle.Route(func(key string) throttle.Limiter { return tiers[plan(key)].limit }),
		middleware.WithKey(keyOf),
		middleware.WithPolicies(func(key string) *middleware.Policies { return tiers[plan(key)].policies }),
	).Wrap(okHandler)

	for _, apiKey := range []string{"key-of-ada", "key-of-bob", ""} {
		req := httptest.NewRequest(http.MethodGet, "http://api.test/", nil)
		req.Header.Set("X-Api-Key", apiKey)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Header().Get("RateLimit-Policy"))
	}
	// Output:
	// 200 "bucket";q=600;w=60
	// 200 "fixed";q=100;w=86400
	// 200 "fixed";q=100;w=86400
}

// Behind a load balancer, name it as trusted, so that the client address
// it writes into X-Forwarded-For is believed, and only then.
func ExampleKeyByIP() {
	key := middleware.KeyByIP(netip.MustParsePrefix("10.0.0.0/8"))
	for _, remote := range []string{"10.0.0.5:1234", "198.51.100.9:1234"} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = remote
		req.Header.Set("X-Forwarded-For", "203.0.113.7")
		k, _ := key(req)
		fmt.Println(k)
	}
	// Output:
	// ip:203.0.113.7
	// ip:198.51.100.9
}

// Hold requests up to a second for their slot instead of refusing them,
// for internal callers that prefer delay to errors.
func ExampleWithMaxWait() {
	limit, _ := throttle.NewTokenBucket(throttle.PerSecond(100), 1)
	h := middleware.New(limit, middleware.WithMaxWait(time.Second)).Wrap(okHandler)
	for range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		fmt.Println(rec.Code)
	}
	// Output:
	// 200
	// 200
	// 200
}
