package throttle

import (
	"context"
	"time"
)

// Deferrer is implemented by limiters that can book units no earlier than
// a given delay from now. [All] uses it to book a limiter from outside
// this package (a redislimit budget, say) at the slot common to every
// part, so that the part's own bound (a bucket's spacing) holds for the
// units as they are actually sent.
//
// ReserveAfter is [Limiter.Reserve] with the slot held back to at least
// after from now. maxWait bounds the whole delay from now, after
// included, with the same meaning as in Reserve.
type Deferrer interface {
	ReserveAfter(ctx context.Context, key string, n int, after, maxWait time.Duration) (*Reservation, error)
}

// PartsReserver is implemented by limiters made of parts, [All] and
// [Route] over it, that can book a different cost on each part, at one
// common slot, all or nothing: 1 request of a requests-per-minute limit,
// its input estimate of an input-tokens limit and its max_tokens of an
// output-tokens limit, say. Settle the Reservation with one actual cost
// per part once they are known (see [Reservation.Settle]).
//
// costs[i] goes to All's i-th argument, in the order All was given them.
// A part that is itself an All or a Route takes costs[i] on every
// limiter inside it; parts are not flattened, so len(costs) is always
// the number of All's arguments, and a Reservation's Settle takes as
// many values. A limiter found in several parts is booked once, with the
// largest of their costs. A cost of 0 takes nothing from that part and
// does not hold the slot back; a Settle with a positive actual for it is
// still charged at the slot, except on a part from outside this package,
// which is not booked at all and is charged nothing. A cost must not be
// negative, and at least one must be positive.
type PartsReserver interface {
	ReserveParts(ctx context.Context, key string, costs []int, maxWait time.Duration) (*Reservation, error)
}

// PartsDeferrer is implemented by each [PartsReserver] that can also book
// its parts no earlier than after from now, as [Deferrer] does for one
// cost: [All], and [Route] when the Limiter it picks can. A failure
// policy that switches an LLM budget to a local one (redislimit's
// Fallback) uses it to book no earlier than the slots already handed
// out on the other side.
type PartsDeferrer interface {
	ReservePartsAfter(ctx context.Context, key string, costs []int, after, maxWait time.Duration) (*Reservation, error)
}

// Inspector is implemented by limiters that can report what they hold for
// a key without taking anything: for a debug endpoint, a log line or a
// metric. Inspect is cheap and never blocks for long; on a key the
// limiter has no state for it reports a fresh budget.
type Inspector interface {
	Inspect(ctx context.Context, key string) (KeyState, error)
}

// KeyState is what a limiter holds for one key at one instant.
type KeyState struct {
	// Key is the key inspected.
	Key string
	// Remaining is how many units could be taken now.
	Remaining int
	// Next is how long from now until one unit could be booked: 0 when
	// one fits now.
	Next time.Duration
	// Ahead is how many units are booked for slots still in the future.
	// Limiters that keep only a timestamp (the buckets) report the span
	// booked past now in whole units.
	Ahead int
	// Paused is how long the key stays paused from now, or 0.
	Paused time.Duration
}
