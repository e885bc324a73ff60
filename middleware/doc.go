// Package middleware is the server side of egress: an [http.Handler]
// middleware that enforces the same budgets as egress's client, with any
// [throttle.Limiter], in process or shared through Redis, and tells each
// client exactly what is left of its budget.
//
// Which function to reach for:
//
//   - [New] with a limiter and [Middleware.Wrap] around your handler: by
//     default each client IP gets its own budget, and a request over it is
//     refused at once with 429 and Retry-After.
//   - [WithKey] to key by something else: [KeyByHeader] for API keys
//     (hashed, so secrets never reach the limiter or Redis), [KeyByUser]
//     for an authenticated user, [KeyByIP] with your proxies listed as
//     trusted when the server sits behind them. A request without a usable
//     key goes to the fallback key ([WithFallback]), never through
//     unlimited.
//   - [throttle.Route] for plan tiers, with [WithPolicies] and [Describe]
//     so that the headers state each tier's limits.
//   - [WithMaxWait] to hold requests until their slot instead of refusing
//     them, for internal callers that prefer delay to errors.
//   - [WithXRateLimit] for clients that only read X-RateLimit-*.
//   - [WithDegraded] to flag responses admitted while Redis is down.
//
// # What the headers say, and why it is true
//
// Every response, refusals included, carries the IETF RateLimit and
// RateLimit-Policy fields (draft-ietf-httpapi-ratelimit-headers-10,
// Structured Fields), one item per limit:
//
//	RateLimit-Policy: "bucket";q=50;w=1
//	RateLimit: "bucket";r=49;t=1
//
// r is how many more requests the key may send right away, and t, in
// whole seconds rounded up, how long until the limit is full again. A
// client that sends r more requests before t passes is never refused, and
// one that is refused and waits exactly Retry-After (whole seconds,
// rounded up) is admitted, provided nobody else spends the same key
// meanwhile. egress's client reads these fields
// ([github.com/egress-go/egress/retryafter.ParseQuota])
// and pauses on r=0 for t, so an egress client with no limit of its own
// follows the server's. [Describe] tells what each algorithm's q, w, r
// and t mean.
//
// The headers describe the key's limits, which the middleware can see
// when the limiter is one of throttle's or redislimit's token buckets and
// windows, and otherwise only through [WithPolicies]; with neither, it
// states nothing but Retry-After.
package middleware
