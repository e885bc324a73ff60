// Package retryafter reads the signals an upstream sends when it wants a
// client to slow down, and decides whether and when to try a request again.
//
// Which function to reach for:
//
//   - [Parse]: how long did the server ask us to wait? It reads Retry-After,
//     retry-after-ms, the IETF RateLimit fields, and the quota headers of
//     GitHub, X, Discord, OpenAI, Anthropic and Shopify, in a fixed order of
//     precedence.
//   - [ParseValue]: one Retry-After value, delay-seconds or HTTP-date.
//   - [ParseQuota]: every quota the headers describe (limit, remaining,
//     reset), for a batch job that wants to plan, or to say when its quota
//     returns.
//   - [Throttled]: is this response throttling, or a failure? A plain 403 is
//     not throttling; a 403 with remaining=0 is.
//   - [Policy]: the retry policy. Its zero value is ready to use.
//     [Policy.Next] says whether to retry one request and how long to wait
//     first; [Policy.Pause] says how long to hold back every request that
//     shares the budget.
//
// Nothing here sleeps, does I/O or reads the clock: every decision takes
// now as an argument. With [Policy.Jitter] set, every function is pure, and
// tests can drive it without a network or a clock.
//
// # Using Throttled, Next and Pause together
//
// The egress Transport calls them on every response:
//
//	if d, ok := policy.Pause(resp, now); ok {
//		limiter.Pause(ctx, key, d) // every caller of key waits d
//	}
//	wait, retry := policy.Next(req, resp, attempt, now)
//
// The two agree. When the server gave a delay d, Pause returns d capped at
// [Policy.MaxPause], and Next returns d plus a little jitter, or no retry
// when d is over [Policy.MaxDelay]: the response goes back to the caller at
// once, while the key stays paused. When the server gave no delay, Pause
// returns false and Next backs off exponentially, for that request only.
//
// Both durations are measured from the response, so they overlap rather
// than add up: a transport that paused the key for d and then sleeps wait
// before booking its retry waits wait in all, not d plus wait.
// A 200 whose quota headers say remaining=0 pauses the key until the reset;
// one with remaining=5 does nothing.
//
// # Cost
//
// The Transport calls Pause on every response, so it is cheap: one pass
// over the header's keys, then lookups of the fields found, in canonical
// form. [Parse], [Policy.Pause], [Policy.Next] and [Throttled] do not
// allocate for a response without rate-limit fields, nor for Retry-After,
// retry-after-ms or the quota headers of the providers above; only the IETF
// RateLimit fields, a malformed Retry-After date, and keys that a header
// built by hand spells other than canonically ("x-ratelimit-remaining")
// cost allocations. [ParseQuota] allocates the slice it returns.
//
// # Safety
//
// A bad header never becomes a panic, a negative duration or an absurd one:
// every duration is in [0, [MaxDelayValue]], values longer than
// [MaxValueLen] are rejected, and malformed fields are ignored.
package retryafter
