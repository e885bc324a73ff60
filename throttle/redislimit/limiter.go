package redislimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/egress-go/egress/throttle"
)

var (
	_ throttle.Limiter = (*TokenBucket)(nil)
	_ throttle.Pauser  = (*LeakyBucket)(nil)
	_ throttle.Allower = (*SlidingWindow)(nil)
	_ throttle.Limiter = (*SlidingWindowCounter)(nil)
	_ throttle.Pauser  = (*FixedWindow)(nil)
	_ throttle.Allower = (*Composite)(nil)
)

// limiter runs one or more limits on a key in one script. It implements
// throttle.Limiter, throttle.Pauser and throttle.Allower.
type limiter struct {
	c     *core
	specs []spec
	most  int   // the most units one call can get: the least of the parts'
	head  []any // a reservation's arguments before its own two
}

func newLimiter(c *core, specs ...spec) *limiter {
	l := &limiter{c: c, specs: specs, most: specs[0].most, head: c.args("r", specs, 0)}
	for _, s := range specs[1:] {
		l.most = min(l.most, s.most)
	}
	return l
}

// reserveArgs returns the script's arguments for a reservation of n
// units that waits at most wait microseconds (-1: any time): the
// arguments every reservation shares are built once, in newLimiter.
func (l *limiter) reserveArgs(n int, wait int64) []any {
	a := make([]any, len(l.head), len(l.head)+2)
	copy(a, l.head)
	if l.c.cfg.shift != nil {
		a[1] = l.c.shift()
	}
	if wait < 0 {
		return append(a, n, int64(-1)) // a constant: not allocated
	}
	return append(a, n, wait)
}

var errNilContext = errors.New("redislimit: nil context")

func (l *limiter) check(ctx context.Context, key string, n int) ([]string, error) {
	switch {
	case ctx == nil:
		return nil, errNilContext
	case n <= 0:
		return nil, fmt.Errorf("redislimit: n must be positive, got %d", n)
	case n > l.most:
		return nil, fmt.Errorf("%w: n is %d, at most %d fit", throttle.ErrExceedsCapacity, n, l.most)
	}
	return keys(l.c.cfg.prefix, key, l.specs)
}

// Reserve implements [throttle.Limiter]. One call is one script run: the
// units are booked in Redis at the earliest slot every part allows, and
// the returned Reservation's Wait sleeps locally until it, following any
// pause the process learns of meanwhile. When Redis cannot decide, the
// [FailurePolicy] does.
func (l *limiter) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*throttle.Reservation, error) {
	return l.reserve(ctx, key, n, maxWait, true)
}

// AllowN implements [throttle.Allower]: it takes n units only if they are
// available now.
func (l *limiter) AllowN(ctx context.Context, key string, n int) (bool, error) {
	r, err := l.reserve(ctx, key, n, 0, false)
	if err != nil {
		return false, err
	}
	return r.OK, nil
}

func (l *limiter) reserve(ctx context.Context, key string, n int, maxWait time.Duration, track bool) (*throttle.Reservation, error) {
	r, _, err := l.book(ctx, key, n, maxWait, track)
	return r, err
}

// book is reserve, also returning the booking of an OK reservation made
// in Redis.
func (l *limiter) book(ctx context.Context, key string, n int, maxWait time.Duration, track bool) (*throttle.Reservation, *booking, error) {
	ks, err := l.check(ctx, key, n)
	if err != nil {
		return nil, nil, err
	}
	wait := int64(-1)
	if maxWait >= 0 {
		wait = int64(maxWait / time.Microsecond)
	}
	v, err := l.c.run(ctx, ks, l.reserveArgs(n, wait))
	if err != nil {
		r, err := l.fail(ctx, key, n, maxWait, err)
		return r, nil, err
	}
	arrived := l.c.lis.pauses.now()
	a, err := array(v, 6, "reserve")
	if err != nil {
		return nil, nil, err
	}
	var f [6]int64
	for i, what := range []string{"ok", "delay", "remaining", "epoch", "shift", "slot"} {
		if f[i], err = integer(a[i], what); err != nil {
			return nil, nil, err
		}
	}
	ok, delay, left, epoch, moved, slot := f[0], f[1], f[2], f[3], f[4], f[5]
	if ok == 0 {
		l.c.lis.pauses.learn(ks[0], epoch, moved, false)
		return throttle.Refused(time.Duration(delay)*time.Microsecond, int(left)), nil, nil
	}
	if len(a) != 6+len(l.specs) {
		return nil, nil, fmt.Errorf("redislimit: unexpected reply to reserve: %d values, want %d", len(a), 6+len(l.specs))
	}
	b := &booking{l: l, key: key, n: n, epoch: epoch, moved: moved, slot: slot}
	b.tokens = b.one[:]
	if len(l.specs) > 1 {
		b.tokens = make([]string, len(l.specs))
	}
	for i := range l.specs {
		if b.tokens[i], err = text(a[6+i], "token"); err != nil {
			return nil, nil, err
		}
	}
	d := time.Duration(delay) * time.Microsecond
	b.line = l.c.lis.pauses.learn(ks[0], epoch, moved, track)
	if b.line != nil {
		b.base = arrived + int64(d) - moved*int64(time.Microsecond)
		b.line.hold(b.base)
	}
	return throttle.NewReservation(b, d, int(left)), b, nil
}

// fail applies the failure policy to err.
func (l *limiter) fail(ctx context.Context, key string, n int, maxWait time.Duration, err error) (*throttle.Reservation, error) {
	if !errors.Is(err, ErrUnavailable) {
		return nil, err
	}
	switch p := l.c.cfg.policy.(type) {
	case FailMode:
		if p == FailOpen {
			return &throttle.Reservation{OK: true}, nil
		}
	case fallback:
		return p.local.Reserve(ctx, key, n, maxWait)
	}
	return nil, err
}

// Pause implements [throttle.Pauser]: every slot of key still in the
// future, in every process, and every new booking move later, so that
// nothing is due for d from the server's now. Pauses do not compound.
// Callers asleep in other processes hear of it through pub/sub (see
// [Listener]); requests already sent cannot be recalled.
//
// When Redis cannot be reached, FailClosed returns the error, FailOpen
// nothing, and Fallback pauses the local limiter.
func (l *limiter) Pause(ctx context.Context, key string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("redislimit: pause must not be negative, got %v", d)
	}
	ks, err := l.check(ctx, key, 1)
	if err != nil {
		return err
	}
	args := append(l.c.args("p", l.specs, 2), micros(d), l.c.lis.channel)
	v, err := l.c.run(ctx, ks, args)
	if err != nil {
		return l.failPause(ctx, key, d, err)
	}
	a, err := array(v, 3, "pause")
	if err != nil {
		return err
	}
	var f [3]int64
	for i, what := range []string{"changed", "epoch", "shift"} {
		if f[i], err = integer(a[i], what); err != nil {
			return err
		}
	}
	l.c.lis.pauses.learn(ks[0], f[1], f[2], false)
	return nil
}

func (l *limiter) failPause(ctx context.Context, key string, d time.Duration, err error) error {
	if !errors.Is(err, ErrUnavailable) {
		return err
	}
	switch p := l.c.cfg.policy.(type) {
	case FailMode:
		if p == FailOpen {
			return nil
		}
	case fallback:
		if local, ok := p.local.(throttle.Pauser); ok {
			return local.Pause(ctx, key, d)
		}
		return nil
	}
	return err
}

// Close stops the limiter's own pause [Listener], if it has one, and
// waits for calls still running against Redis. Reservations already
// handed out keep their slots.
func (l *limiter) Close() error { return l.c.close() }

// booking is the throttle.Booking of a reservation made in Redis.
type booking struct {
	l      *limiter
	key    string
	n      int
	epoch  int64 // the key's pause epoch and shift when booked
	moved  int64
	slot   int64 // server microseconds
	tokens []string
	one    [1]string // tokens of a single part
	line   *line
	base   int64 // local due time in ns, less the shift when booked
}

// Until implements [throttle.Booking]: local, no I/O. The slot is
// measured from when the reply arrived, plus every shift learned since.
func (b *booking) Until() time.Duration {
	if b.line == nil {
		return 0
	}
	return time.Duration(b.base + b.line.shift() - b.l.c.lis.pauses.now())
}

// Cancel implements [throttle.Booking]. The script gives the units back
// only while the booking is the key's latest one still standing on each
// part (the sliding log gives back any future units), and only once:
// it compares the booking's identity with the part's state, so a resent
// command does nothing the second time.
func (b *booking) Cancel(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	ks, err := keys(b.l.c.cfg.prefix, b.key, b.l.specs)
	if err != nil {
		return err
	}
	args := append(b.l.c.args("c", b.l.specs, 4+len(b.tokens)), b.n, b.epoch, b.moved, b.slot)
	for _, t := range b.tokens {
		args = append(args, t)
	}
	v, err := b.l.c.run(ctx, ks, args)
	if err != nil {
		return err
	}
	_, err = integer(v, "cancel")
	return err
}
