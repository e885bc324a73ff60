// Package redislimit shares one budget between every process through
// Redis: the algorithms of package throttle, with the same reservations,
// cancel and pause, their state kept in Redis and decided by one Lua
// script run per call.
//
// Which limiter to reach for is the same question as in throttle:
//
//   - [NewTokenBucket]: "N per second with a burst of B". The default.
//   - [NewLeakyBucket]: evenly spaced, with nginx's burst: an upstream
//     behind limit_req rate=R burst=B is NewLeakyBucket(rdb, R, B).
//   - [NewSlidingWindow]: "at most N in any window", exactly.
//   - [NewSlidingWindowCounter]: the same, approximately, in O(1) memory.
//   - [NewFixedWindow]: quotas that reset at fixed times, such as a
//     daily quota that resets at midnight UTC.
//
// [All] books several limits on a key (20/s together with 10 000/day) at
// one common slot in one script, atomically.
//
// # Costs known after the call
//
// [Composite.ReserveParts] books a cost of its own on each part of an
// [All] (1 request, the input estimate and max_tokens of an LLM API's
// three limits), at one common slot, all or nothing, in one script call;
// a part of cost 0 books nothing. [throttle.Reservation.Settle] then
// charges or gives back the difference on each part, at the booking's
// own slot and window, by the same rules as package throttle, once, even
// when a call is sent again. A settle waits in the process for the key's
// next script call and rides on it, or goes on its own after
// [SettleDelay] (100 ms): at most one round trip, usually none. Close and
// [Client.Flush] send the settles still waiting.
//
// # What the upstream states
//
// A limit built with [WithStated] follows what the upstream's headers
// say about its quotas in a unit (requests, or an LLM API's tokens): a
// Transport hands each response's statements to the limiter
// ([throttle.Learner]), the key's next script call carries them, and
// Redis applies them in that call, for every process. A refilling quota's
// remaining tightens a bucket; a window's "R more before T" bounds
// bookings until T. A statement only ever tightens the configured limit.
//
// For a limit on concurrency rather than rate ("at most 8 requests in
// flight per account"), reach for [NewQueue]: [queue.Queue]'s bounded,
// first-in first-out queue, shared by every process, with permits that
// come back when their holder dies.
//
// # One Client per Redis client
//
// A [Client] holds what the limiters on one Redis client share: the
// script, a circuit breaker, the observer and one pub/sub subscription
// for pauses. Build it once and hand it to every limiter:
//
//	client, _ := redislimit.NewClient(rdb)
//	defer client.Close()
//	perSecond, _ := redislimit.NewTokenBucket(rdb, throttle.PerSecond(20), 20, redislimit.WithClient(client))
//
// A limiter built without [WithClient] builds a Client of its own.
//
// # One round trip per decision
//
// Each call runs the script once, on the caller's goroutine, bounded by
// [WithTimeout]: EVALSHA, and EVAL when Redis lacks the script. The
// script reads the server's TIME, books the caller's own slot (now or
// later) and replies; the caller sleeps locally until the slot, and
// nobody polls. Every key of one budget shares a hash tag,
// prefix{key}:<algo>:<n>/<per> and prefix{key}:pause, so the limiters
// work on single, sentinel, ring and cluster clients alike, all of which
// are a redis.Scripter.
//
// Pause (each limiter is a [throttle.Pauser]) moves the key's schedule in
// every process. Callers already asleep hear of it through the Client's
// subscription and from every script reply on the key.
//
// When Redis is unreachable, slow or cannot serve (a replica after a
// failover, say), the [FailurePolicy] decides: [FailClosed] by default,
// [FailOpen], [Fallback] to a local limiter, or, for a leasing bucket,
// [FailShare]. The circuit breaker keeps
// an outage from costing a timeout per call and lets one call probe
// every [ProbeInterval]; on a Redis Cluster client there is one per
// master node, so that a dead node turns away only its own slots' keys.
//
// # Leases, for a hot budget
//
// One budget lives on one key, on one Redis thread, and each decision
// waits a round trip. [WithSlotLease] has a bucket lease each process a
// block of booked slots sized by its demand, handed out locally and
// renewed in the background: a few round trips per hundred decisions,
// still exact, and [FailShare] keeps a process to its share while Redis
// is away (bench/leases).
//
// Redis without persistence forgets every budget when it restarts, daily
// counts included: a restarted Redis grants a fresh quota.
//
// # Reading a budget
//
// Inspect (each limiter is a [throttle.Inspector]) reports a key's
// remaining units, next free slot, units booked ahead and pause. With
// redis-cli, a bucket or window keeps its numbers packed in one string;
// the token bucket's, for instance, are its booking sequence (counted
// from the server's time when the state was made), the booking that may
// still be cancelled, the pause epoch and shift it has applied, and its
// theoretical arrival time (microseconds of the server's TIME, rounded
// up), then the offset of the next unread byte, which struct.unpack adds:
//
//	EVAL "return {struct.unpack('<i8i8i8i8i8', redis.call('GET', KEYS[1]))}" 1 'egress:{api.example.com}:tb:20/s'
//	HGETALL 'egress:{api.example.com}:pause'
//	HGETALL 'egress:{api.example.com}:stated'
//	ZRANGE 'egress:{api.example.com}:sl:100/10s' 0 -1 WITHSCORES
//
// A token bucket's string goes on with the fields settles need (the
// seq its state started at, cut and gone), then owe, the nanoseconds its
// arrival time lies past the exact one, then two numbers per slack entry
// (see gcra.lua). A fixed window packs eight numbers (the same
// four, then its window index, count, spill and latest slot) followed by
// three per booking still ahead; a sliding counter packs nine ('<i8'
// nine times). A key's settles applied in the last minute are kept by
// id in prefix{key}:settled, and its pause marks in the pause hash. A
// limit given [WithStated] keeps what the upstream stated in
// prefix{key}:stated, a hash of named fields (stated.lua). The
// .lua files beside this package's Go files say what each field means.
package redislimit
