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
