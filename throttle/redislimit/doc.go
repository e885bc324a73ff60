// Package redislimit shares one budget between every process through
// Redis: the algorithms of package throttle, with the same reservations,
// cancel and pause, their state kept in Redis and decided by one Lua
// script run per call.
//
// Which limiter to reach for is the same question as in throttle:
//
//   - [NewTokenBucket]: "N per second with a burst of B". The default.
//   - [NewLeakyBucket]: evenly spaced, no burst, with a bounded line.
//   - [NewSlidingWindow]: "at most N in any window", exactly.
//   - [NewSlidingWindowCounter]: the same, approximately, in O(1) memory.
//   - [NewFixedWindow]: quotas that reset at fixed times, such as a
//     daily quota that resets at midnight UTC.
//
// [All] books several limits on a key (20/s together with 10 000/day) at
// one common slot in one script, atomically; [throttle.All] over these
// limiters is only best effort.
//
// Each call is one round trip: the script reads the server's TIME, books
// the caller's own slot (now or later) and replies; the caller sleeps
// locally until the slot, and nobody polls. Every key of one budget
// shares a hash tag, prefix{key}:<algo>:<n>/<per> and prefix{key}:pause,
// so the limiters work on single, sentinel, ring and cluster clients
// alike, all of which are a redis.Scripter.
//
// Pause (each limiter is a [throttle.Pauser]) moves the key's schedule in
// every process. Callers already asleep hear of it through a [Listener]
// (pub/sub) and from every script reply on the key.
//
// When Redis is unreachable, slow or not ready, the [FailurePolicy]
// decides: [FailClosed] by default, [FailOpen], or [Fallback] to a local
// limiter. A circuit breaker keeps an outage from costing a timeout per
// call and lets one call probe every [ProbeInterval].
//
// Redis without persistence forgets every budget when it restarts, daily
// counts included: a restarted Redis grants a fresh quota.
package redislimit
