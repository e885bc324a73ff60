// Package throttle paces work against per-key budgets, in process.
//
// Every limiter here hands out reservations: each caller is given its own
// slot in time, now or later, sleeps once until it, and never polls or
// competes for a token on waking. Slots never decrease (except that a
// bucket built [WithMoveUp] moves a sleeper up when earlier bookings give
// units back), and cancelling a reservation never lets a later caller
// exceed the limit. No limiter
// refuses a caller whose slot lies within its maxWait, except with
// [ErrExceedsCapacity] for a cost that can never fit.
//
// Which limiter to reach for:
//
//   - [NewTokenBucket]: "N per second with a burst of B". The default.
//   - [NewLeakyBucket]: an upstream that is itself a leaky bucket (nginx
//     limit_req rate=R burst=B): evenly spaced after a burst of B.
//   - [NewSlidingWindow]: "at most N in any window", exactly.
//   - [NewSlidingWindowCounter]: the same, approximately, in O(1) memory.
//   - [NewFixedWindow]: quotas that reset at a fixed time, such as a
//     daily quota that resets at midnight UTC.
//
// [All] combines limits that must all hold (20/s and 10 000/day), and
// [Route] picks a limit per key (plan tiers). [Wait] and [Allow] are the
// blocking and non-blocking ways to take units; [Limiter.Reserve] is the
// primitive both are built on. Reserve costs one allocation (the
// Reservation); [Allow] costs none.
//
// When the limit is an upstream's published limit, add
// WithTolerance(DefaultTolerance), so that jitter on the way does not
// push requests over it. To share a budget between processes, use the
// same algorithms from package redislimit.
//
// # Costs known after the call
//
// Some costs are known only once the response is in: an LLM API counts
// requests, input tokens and output tokens per minute, and the output is
// known at the end of the body. Book the estimate, then settle:
//
//	budget := throttle.All(rpm, itpm, otpm).(throttle.PartsReserver) // buckets built WithMoveUp
//	r, err := budget.ReserveParts(ctx, key, []int{1, inputEstimate, maxTokens}, maxWait)
//	// ... r.Wait, send, read the usage ...
//	err = r.Settle(ctx, 1, usage.InputTokens, usage.OutputTokens)
//
// [PartsReserver.ReserveParts] books a cost of its own on each of All's
// arguments, at one common slot, all or nothing; [Reservation.Settle]
// gives back what the call did not use, or charges what it used beyond
// the estimate, at the booking's own slot and window. A give-back never
// lets any interval exceed the bound over what was really used, so a
// bucket may keep some of it (see Settle); a reservation never settled
// keeps its estimate. Reserve and Settle with one value cover the
// single-cost case. In the engine, keyState.settle finds where the claim
// is due now and hands the difference to algorithm.settle.
//
// # Moving up
//
// With [WithMoveUp], a caller asleep in [Reservation.Wait] on a
// [TokenBucket] or [LeakyBucket] (alone, or as every part of an [All] of
// them, each built WithMoveUp) moves up
// when a booking before it gives units back, by Settle with a smaller
// actual or by Cancel: its slot moves to the earliest the bucket would
// have given it had that booking cost its actual from the start, and
// never later than it was. So the calls already asleep gain from a
// give-back, not only those booked after it, and an LLM job needs no
// bound on its calls in flight to use its output limit (bench/LLM.md).
// It is off by default: sending sooner leaves less room to a client the
// budget cannot see that spends the same quota (an upstream's record,
// WithUpstream in package egress, then meets more 429s).
//
// It keeps every bound the bucket keeps. The give-back's goroutine takes
// the key's latest bookings whose callers sleep in Wait, gives them back
// in full (newest first, as Cancel gives back a latest booking), applies
// the give-back, and books them again in their order, all under the
// key's lock: the schedule is one the bucket could have handed out,
// spacing and burst included. A caller booked on several keys moves on
// all of them, to one common slot, or on none. Only sleepers move: a
// booking whose caller is not in Wait (it may time the slot itself), or
// one made before such a booking, keeps its slot, and so do the callers
// after it. [Reservation.Delay] keeps the delay at booking; Wait follows
// the slot. Windows (FixedWindow, SlidingWindow, SlidingWindowCounter),
// an All with such a part or a part from another package, and redislimit
// do not move sleepers (moveup.go).
//
// # How a request travels
//
// Each limiter type (say [TokenBucket]) wraps one engine, which holds the
// state of every key in a map behind a lock, and one algorithm, the
// per-key arithmetic (gcra.go, fixedwindow.go, slidingwindow.go,
// slidingwindowcounter.go):
//
//	TokenBucket.Reserve(ctx, key, n, maxWait)
//	  engine.reserve:   find key's state and lock it (engine.lock; a new key may need a sweep, see WithMaxKeys)
//	  algorithm.earliest: the first slot with room for n, no earlier than now or the pause's end
//	  refused if that slot lies past maxWait: Delay says when the same call would fit
//	  keyState.book:    algorithm.book counts the units; a claim records slot, n and the key's pause shift
//	  Reservation:      holds the claim as its Booking
//	Reservation.Wait:   sleeps until claim.Until() is 0, asking again each time it wakes (and when it moved up)
//	Reservation.Cancel: claim.Cancel gives back what is safe (algorithm.give)
//	Reservation.Settle: claim.Settle charges or gives back the difference at the slot (algorithm.settle)
//
// [All] locks the key's state in each built-in part, in a fixed order,
// and books them all at one slot; limiters from other packages are booked
// around that (see All). Limiters outside this package build their
// Reservations with [NewReservation] over their own [Booking].
//
// # How a pause travels
//
// Pause(key, d) starts a pause on the key (pause.go): until, the pause's
// end, moves to now+d unless it is already later (pauses never
// compound), and shifted, the total the key's schedule has moved, grows
// by by, how much later the end now lies. The algorithm's shift moves
// every unit still ahead of now later by by, so new bookings go after
// them and no earlier than until. A caller already asleep follows: when
// it wakes, its claim works out where its units lie now from the shift
// since it booked (units already due when the pause began stay put), and
// it sleeps again if need be. The fixed window alone also moves units
// further, into a later window, when a pause would carry too many across
// a reset (see [FixedWindow]). redislimit keeps the same fields under the
// same names in its scripts.
//
// # Learned rates
//
// A [TokenBucket] or [LeakyBucket] told of refusals ([Learner]: an
// egress Transport tells it of every answer) takes them as a sign that
// its rate is too high for the upstream, per key (learnrate.go): over a
// run of answers to units sent at the key's rate, an upstream bucket of
// at most the configured burst B that admitted n units in T and refused
// the next has a rate below (n+1−B)/T. The key's interval grows to at
// least that bound's, by at most 30% a refusal, for a minute after the
// refusal that set it. A run whose sends fell behind the
// rate starts again, and its lag is taken off T: a lone refusal of units
// sent at the rate (jitter) says nothing. A burst configured larger than
// the upstream's makes the bound too strict, and the key stays under the
// upstream's rate. The redislimit buckets do not learn rates.
//
// # Learned limits
//
// A [SlidingWindow] or [FixedWindow] told of refusals that state no
// quota (a bare 429 or 503, or one with only Retry-After) takes them as a
// sign that its limit is too high for the upstream, per key
// (learnlimit.go): the units the key booked in the upstream's window that
// holds a refused unit, less the units refused there, bound the
// upstream's limit. The key's limit falls to that bound, by at most 30% a
// refusal and to no less than one unit a window, for a minute after the
// last refusal. A fixed window that booked less than 70% of its limit
// before a refusal counts the window before it too: the upstream's
// window is not where the key's is. A refusal that states a quota is the
// [Upstream] record's to follow. A [SlidingWindowCounter] and the
// redislimit windows do not learn limits.
package throttle
