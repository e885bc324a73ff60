// Package throttle paces work against per-key budgets, in process.
//
// Every limiter here hands out reservations: each caller is given its own
// slot in time, now or later, sleeps once until it, and never polls or
// competes for a token on waking. Slots never decrease, and cancelling a
// reservation never lets a later caller exceed the limit.
//
// Which limiter to reach for:
//
//   - [NewTokenBucket]: "N per second with a burst of B". The default.
//   - [NewLeakyBucket]: evenly spaced, no burst, with a bounded line.
//   - [NewSlidingWindow]: "at most N in any window", exactly.
//   - [NewSlidingWindowCounter]: the same, approximately, in O(1) memory.
//   - [NewFixedWindow]: quotas that reset at a fixed time, such as a
//     daily quota that resets at midnight UTC.
//
// [All] combines limits that must all hold (20/s and 10 000/day), and
// [Route] picks a limit per key (plan tiers). [Wait] and [Allow] are the
// blocking and non-blocking ways to take units; [Limiter.Reserve] is the
// primitive both are built on.
//
// Reserve on a limiter of this package, called on its own type (say a
// *TokenBucket), is small enough to inline, so a Reservation that does
// not outlive its caller stays on the caller's stack and costs no
// allocation, as with x/time/rate. Through the Limiter interface it costs
// one. [Allow] allocates nothing either way.
//
// When the limit is an upstream's published limit, add
// WithTolerance(DefaultTolerance), so that jitter on the way does not
// push requests over it. To share a budget between processes, use the
// same algorithms from package redislimit.
package throttle
