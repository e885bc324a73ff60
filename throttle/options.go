package throttle

import (
	"fmt"
	"time"
)

// DefaultMaxKeys is how many keys a limiter tracks unless [WithMaxKeys]
// says otherwise.
const DefaultMaxKeys = 100_000

// DefaultTolerance is the most headroom against network and scheduling
// jitter that [WithTolerance] recommends when a limiter is set to an
// upstream's published limit: requests admitted at exact spacing can
// reach the upstream up to this much closer together than they left.
// A bucket whose burst cannot spare it keeps it only while the upstream
// shows it needs it (see [WithTolerance]).
const DefaultTolerance = 10 * time.Millisecond

// An Option configures a limiter built by this package.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	now       func() time.Time
	maxKeys   int
	offset    time.Duration
	tolerance time.Duration
	moveUp    bool
}

// newConfig applies opts. A nil Option is a programmer error and panics,
// as in every package of this module.
func newConfig(opts []Option) config {
	c := config{maxKeys: DefaultMaxKeys}
	for i, o := range opts {
		if o == nil {
			panic(fmt.Sprintf("throttle: nil Option (argument %d)", i))
		}
		o.apply(&c)
	}
	return c
}

// validate checks the values the options set, which may come from data.
func (c config) validate() error {
	switch {
	case c.maxKeys < 1:
		return fmt.Errorf("throttle: WithMaxKeys must be at least 1, got %d", c.maxKeys)
	case c.tolerance < 0:
		return fmt.Errorf("throttle: WithTolerance must not be negative, got %v", c.tolerance)
	}
	return nil
}

// WithClock makes the limiter read time from now instead of [time.Now].
// A nil now panics. It may be called from several goroutines at once
// ([Upstream.Learn] reads it before it locks the record, to date a
// send), and a reading older than one already seen is treated as that
// newer one: a clock that jumps backwards never mints units. Tests use it
// to move time by hand. Under [testing/synctest], build the limiter
// inside the bubble that uses it: one built outside read the real clock
// first, and the bubble's clock, which starts in 2000, reads as a clock
// that went back: no time passes for the limiter, and a Wait never
// reaches its slot.
func WithClock(now func() time.Time) Option {
	if now == nil {
		panic("throttle: WithClock given a nil func")
	}
	return optionFunc(func(c *config) { c.now = now })
}

// WithMaxKeys bounds how many keys the limiter tracks (default
// [DefaultMaxKeys]). A key whose state is fresh (nothing booked, budget
// full, not paused) is dropped when room is needed, which loses nothing.
// When every tracked key is live, Reserve on a new key fails with
// [ErrTooManyKeys]: live state is never dropped.
func WithMaxKeys(n int) Option {
	return optionFunc(func(c *config) { c.maxKeys = n })
}

// WithWindowOffset moves the boundaries of [FixedWindow] windows, which
// are otherwise aligned to the Unix epoch (a 24h window resets at 00:00
// UTC). An API whose daily quota resets at midnight Pacific time wants
// WithWindowOffset(8 * time.Hour) in winter. Other limiters ignore it.
func WithWindowOffset(d time.Duration) Option {
	return optionFunc(func(c *config) { c.offset = d })
}

// WithTolerance keeps enough of the budget in reserve that requests
// admitted at exact spacing still respect the limit after each is delayed
// by up to d on its way (see [DefaultTolerance]). Without it limiters are
// literal: a burst of 5 admits 5 at once.
//
// A token bucket keeps d out of its burst's span: the last unit of a full
// burst waits d, so its sustained rate is untouched and the tolerance is
// paid once. A burst too small for that (d longer than all of the burst
// but one unit: a burst of 1) pays it on every interval instead: the
// interval grows by up to d. There the tolerance is the most headroom the
// bucket keeps, and it follows what the upstream shows when the bucket is
// given to a Transport (it implements [Learner]): it starts at d, falls
// by half every 100 ms of answers without a refusal (to nothing until the
// upstream first refuses an attempt the bucket admitted, then towards the
// jitter measured on the path: a decaying maximum of how late attempts
// left after their slot plus their latency above the least seen lately),
// and returns to d at each such refusal. A leaky bucket does the same with
// its capacity. A bucket no Transport reports to keeps d.
//
// The sliding windows treat their window as d longer. A fixed window
// counts a unit booked in the last d of a window against the next window
// too (it still books there). The redislimit buckets keep d, as whole
// units of the burst (see redislimit.WithTolerance).
func WithTolerance(d time.Duration) Option {
	return optionFunc(func(c *config) { c.tolerance = d })
}

// WithMoveUp lets a caller asleep in [Reservation.Wait] on a
// [TokenBucket] or [LeakyBucket] move up when an earlier booking gives
// units back (Settle with a smaller actual, or Cancel): see "Moving up"
// in the package doc. Give it to every bucket of an [All] whose
// reservations are settled, such as the LLM recipe's three. Other
// limiters ignore it.
//
// It is off by default: a budget that settles sends sooner with it, and
// leaves less room to a client it cannot see that spends the same quota.
func WithMoveUp() Option {
	return optionFunc(func(c *config) { c.moveUp = true })
}
