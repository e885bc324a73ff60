package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egress-go/egress/throttle"
)

var (
	_ throttle.Settler       = (*booking)(nil)
	_ throttle.PartsReserver = (*Composite)(nil)
)

// SettleDelay bounds how long a settle waits in the process for the
// key's next script call to carry it: past it, the settle is sent on its
// own, together with the key's other settles queued by then. A settle
// therefore costs at most one round trip, and none when the key is
// called again within SettleDelay, as a busy key is. A give-back reaches
// the other processes at most this late. (Four processes of 8 workers
// sharing an LLM budget at about 12 calls a second each made 1.05 script
// calls per request with 50 ms, 1.04 with 100 ms, the goal
// being 1.05.)
const SettleDelay = 100 * time.Millisecond

// settledSuffix names a key's record of the settles applied (settle.lua).
const settledSuffix = "settled"

// settleMemory is how long Redis keeps the id of a settle it applied
// (settleMemory in settle.lua), so that a settle sent again within it is
// applied once.
const settleMemory = 60 * time.Second

// resendFor bounds how long after a settle first rides a call the
// process sends it as it is, when Redis did not answer: past it, Redis
// may have applied it and forgotten its id (settleMemory), and a second
// send would apply it twice. So past resendFor a settle keeps only its
// charges (the parts whose actual exceeds what was booked): a charge
// applied twice errs on the safe side, fewer units for the upstream,
// where a give-back applied twice would pass the limit; the give-backs
// are dropped, leaving those parts at their estimate, and reported to
// the [WithObserver] func. The margin (10 s) covers a call applied up to
// WithTimeout after it was sent, and the drift between the process's
// clock and the server's.
//
// Keeping the ids for the booking's lifetime instead (the time its state
// takes to return to fresh) would keep a day of ids for a daily window,
// millions on a busy key, and still not cover a process that resends
// for longer.
const resendFor = settleMemory - 10*time.Second

// unbooked is the token of a part that booked nothing (a cost of 0).
const unbooked = "-"

// Settle implements [throttle.Settler]: [throttle.Reservation.Settle]
// calls it once. actual holds one value for a reservation from Reserve,
// which every limit of the budget takes, or one per part of [All] for one
// from [Composite.ReserveParts].
//
// Each limit charges or gives back the difference at the booking's own
// slot and window, by the rules of package throttle (see
// [throttle.Reservation.Settle]): a token or leaky bucket gives back in
// full while no later booking relies on the units, and otherwise no more
// than the least slack of the bookings after it (at most 64 kept per
// key); a window adjusts the booking's window while it is still counted;
// the sliding log removes or adds units at the slot. It works after the
// slot has passed, and after the key was dropped: a limit whose state is
// not the one booked gives nothing back, and is charged from now.
//
// The settle is queued in the process and sent with the key's next
// script call through this limiter, or on its own after [SettleDelay];
// Settle does not wait for it. Redis applies each settle once, even when
// a call is sent again within a minute. A settle that Redis could not
// answer is kept and sent again; 50 s after it was first sent, Redis may
// have applied it and forgotten it, and it is sent on with its charges
// only, so that nothing is given back twice: its give-backs are dropped,
// leaving those parts at their estimate, and reported to the
// [WithObserver] func (see resendFor in settle.go). Close and [Client.Flush] send every settle still queued. A
// Settle once the Client is closed sends nothing and returns an error
// that wraps [ErrClosed].
//
// An actual larger than a limit could ever admit at once is charged all
// the same, and the error returned wraps [throttle.ErrExceedsCapacity].
func (b *booking) Settle(_ context.Context, actual []int) error {
	limits := b.budget.limits
	per := make([]int, len(limits))
	switch {
	case b.parts == nil && len(actual) == 1:
		for i := range per {
			per[i] = actual[0]
		}
	case b.parts == nil:
		return fmt.Errorf("redislimit: Settle needs 1 actual cost, got %d", len(actual))
	case len(actual) != len(b.parts):
		return fmt.Errorf("redislimit: Settle needs %d actual costs, one per part, got %d", len(b.parts), len(actual))
	default:
		for p, ls := range b.parts {
			for _, i := range ls {
				per[i] = max(per[i], actual[p])
			}
		}
	}
	for p, a := range actual {
		if a < 0 {
			return fmt.Errorf("redislimit: Settle's actual cost of part %d must not be negative, got %d", p, a)
		}
	}
	var sb strings.Builder
	sb.WriteString(b.budget.client.settles.id())
	for _, v := range []int64{b.epoch, b.shifted, b.slot} {
		sb.WriteByte(' ')
		sb.WriteString(strconv.FormatInt(v, 10))
	}
	var errs []error
	for i, t := range b.tokens {
		fmt.Fprintf(&sb, " %s %d %d", t, b.costs[i], per[i])
		if per[i] > limits[i].most {
			errs = append(errs, fmt.Errorf("redislimit: key %q settled at %d units on %s, charged: %w: at most %d fit",
				b.key, per[i], limits[i].suffix, throttle.ErrExceedsCapacity, limits[i].most))
		}
	}
	if err := b.budget.client.settles.add(b.budget, b.key, sb.String()); err != nil {
		return fmt.Errorf("redislimit: key %q not settled: %w", b.key, err)
	}
	return errors.Join(errs...)
}

// SettleParts returns how many actual costs Settle takes, for
// [throttle.Reservation.Settle] to check before it makes its one call:
// one for a booking of Reserve, one per part of [All] for one of
// [Composite.ReserveParts].
func (b *booking) SettleParts() int {
	if b.parts == nil {
		return 1
	}
	return len(b.parts)
}

// pendingKey names the settles that may ride on a call: those of one
// limiter's bookings on one key, since a call carries its limiter's
// limits.
type pendingKey struct {
	b   *budget
	key string
}

// settles queues a Client's settles until a call on their key carries
// them, or SettleDelay passes.
type settles struct {
	c      *Client
	prefix string        // of every id this process makes
	next   atomic.Uint64 // the next id's number
	// after runs f after d, as time.AfterFunc; tests replace it.
	after func(d time.Duration, f func())

	// queued counts the settles in pending, so that calls skip mu when 0.
	// Speed only: Redis decisions/s ≥ 0.9× redis_rate (bench/micro
	// RedisDecision), whose 64 callers would meet on mu once a call.
	queued atomic.Int64

	mu      sync.Mutex
	pending map[pendingKey][]queuedSettle
	timed   map[pendingKey]bool // a flush is scheduled
	closed  bool                // Close has taken the last settles: add refuses
}

// queuedSettle is a settle waiting for a call to carry it.
type queuedSettle struct {
	rec string
	// sent is when a call first carried it (the Client's now), or 0:
	// past resendFor only its charges are sent again.
	sent    int64
	charges bool // rec keeps only its charges
}

// chargesOnly returns rec with each part that gives back set to change
// nothing (actual = n), and whether any part still charges.
func chargesOnly(rec string) (string, bool) {
	f := strings.Fields(rec)
	charges := false
	for j := 4; j+2 < len(f); j += 3 {
		n, err1 := strconv.Atoi(f[j+1])
		actual, err2 := strconv.Atoi(f[j+2])
		switch {
		case err1 != nil || err2 != nil:
			return rec, true // malformed: sent as it is, the script says so
		case actual < n:
			f[j+2] = f[j+1]
		case actual > n:
			charges = true
		}
	}
	return strings.Join(f, " "), charges
}

func (s *settles) init(c *Client) {
	s.c = c
	s.prefix = strconv.FormatUint(rand.Uint64(), 36) + "."
	s.after = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	s.pending = make(map[pendingKey][]queuedSettle)
	s.timed = make(map[pendingKey]bool)
}

// id returns a name for a settle, unique to this process's Client.
func (s *settles) id() string {
	return s.prefix + strconv.FormatUint(s.next.Add(1), 36)
}

// add queues the new settle rec, and schedules its flush. It returns
// ErrClosed, queuing nothing, once the Client is closed: nothing would
// send it.
func (s *settles) add(b *budget, key string, rec string) error {
	return s.queue(b, key, []queuedSettle{{rec: rec}})
}

// requeue queues again the settles of a call that Redis did not answer,
// or drops them, reporting it to the [WithObserver] func, once the
// Client is closed.
func (s *settles) requeue(b *budget, key string, qs []queuedSettle, cause error) {
	if err := s.queue(b, key, qs); err != nil {
		s.dropped(key, len(qs), "dropped, unanswered when the client closed", cause)
	}
}

// dropped reports what happened to n settles of key that Redis did not
// answer.
func (s *settles) dropped(key string, n int, what string, cause error) {
	if s.c.breaker.observer == nil {
		return
	}
	err := fmt.Errorf("redislimit: %d settles of key %q %s", n, key, what)
	if cause != nil {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	s.c.breaker.observer(Event{Err: err, Settles: n})
}

// queue queues qs for b's calls on key, and schedules their flush.
func (s *settles) queue(b *budget, key string, qs []queuedSettle) error {
	k := pendingKey{b: b, key: key}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.pending[k] = append(s.pending[k], qs...)
	s.queued.Add(int64(len(qs)))
	schedule := !s.timed[k]
	s.timed[k] = true
	s.mu.Unlock()
	if schedule {
		s.after(SettleDelay, func() { s.flush(k) })
	}
	return nil
}

// take returns the settles queued for b's calls on key, which the
// caller sends, and puts back with requeue if the call goes unanswered.
// It drops those first sent resendFor ago or more: Redis may have
// applied them and forgotten it.
func (s *settles) take(b *budget, key string) []queuedSettle {
	if s.queued.Load() == 0 {
		return nil
	}
	k := pendingKey{b: b, key: key}
	now := s.c.now()
	s.mu.Lock()
	qs := s.pending[k]
	delete(s.pending, k)
	s.queued.Add(-int64(len(qs)))
	s.mu.Unlock()
	keep, trimmed := qs[:0], 0
	for _, q := range qs {
		switch {
		case q.sent == 0:
			q.sent = now
		case !q.charges && time.Duration(now-q.sent) >= resendFor:
			rec, charges := chargesOnly(q.rec)
			if rec != q.rec {
				trimmed++
			}
			q.rec, q.charges = rec, true
			if !charges {
				continue
			}
		}
		keep = append(keep, q)
	}
	if trimmed > 0 {
		s.dropped(key, trimmed, fmt.Sprintf("unanswered for %v: their give-backs dropped, their charges sent on", resendFor), nil)
	}
	return keep
}

// flush sends the settles queued for k on their own.
func (s *settles) flush(k pendingKey) {
	s.mu.Lock()
	delete(s.timed, k)
	s.mu.Unlock()
	if s.c.closed.Load() {
		return
	}
	ctx, stop := context.WithTimeout(context.Background(), s.c.timeout)
	defer stop()
	_ = k.b.flush(ctx, k.key)
}

// flush sends the settles queued for key on their own, in one script
// call; a failed call queues them again.
func (b *budget) flush(ctx context.Context, key string) error {
	ks, err := b.keys(key)
	if err != nil {
		return err
	}
	if qs := b.client.settles.take(b, key); len(qs) > 0 {
		_, err = b.send(ctx, key, ks, append(b.args("settle", 1), b.client.channelArg), qs)
	}
	return err
}

// call runs the script for b on key, carrying the settles queued for it.
func (b *budget) call(ctx context.Context, key string, ks []string, args []any) (any, error) {
	return b.send(ctx, key, ks, args, b.client.settles.take(b, key))
}

// send runs the script with the settles recs placed before the channel,
// the last argument, and the key's settled record as the last key. When
// Redis could not answer they are queued again (Redis applies each
// once); any other failure (the script's, say) would fail again, so they
// are dropped, leaving their reservations at the estimate, and reported
// to the [WithObserver] func.
func (b *budget) send(ctx context.Context, key string, ks []string, args []any, recs []queuedSettle) (any, error) {
	var hs []heard
	if b.follow != nil {
		ks, args, hs = b.follow.carry(b.client, key, ks, args) // stated.go
	}
	if len(recs) == 0 {
		v, err := b.client.run(ctx, ks, args)
		if err != nil && unanswered(err) {
			b.follow.requeue(key, hs)
		}
		return v, err
	}
	channel := args[len(args)-1]
	args = args[:len(args)-1]
	for _, r := range recs {
		args = append(args, r.rec)
	}
	args = append(args, channel)
	ks = append(ks[:len(ks):len(ks)], b.client.prefix+"{"+key+"}:"+settledSuffix)
	v, err := b.client.run(ctx, ks, args)
	switch {
	case err == nil:
	case unanswered(err):
		b.client.settles.requeue(b, key, recs, err)
		b.follow.requeue(key, hs)
	case b.client.breaker.observer != nil:
		b.client.breaker.observer(Event{Err: fmt.Errorf("redislimit: %d settles of key %q dropped: %w", len(recs), key, err), Settles: len(recs)})
	}
	return v, err
}

// unanswered reports whether err is a call Redis did not answer: what
// it carried is sent again with the key's next call.
func unanswered(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// Flush sends every settle still queued in the process, each key's in
// one script call, and returns the errors of the calls that failed; the
// settles of those stay queued. Close flushes too.
func (c *Client) Flush(ctx context.Context) error {
	c.settles.mu.Lock()
	keys := make([]pendingKey, 0, len(c.settles.pending))
	for k := range c.settles.pending {
		keys = append(keys, k)
	}
	c.settles.mu.Unlock()
	var errs []error
	for _, k := range keys {
		if err := k.b.flush(ctx, k.key); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ReserveParts implements [throttle.PartsReserver]: costs[i] units of
// All's i-th part, every part at one common slot, all or nothing, in one
// script call. A part of cost 0 books nothing and does not hold the slot
// back; settled with a positive actual, it is charged at the slot. A
// limit found in several parts takes the largest of their costs, and
// settles to the largest of their actual costs.
//
// Reserve with one n stays the way to book the same units on every part.
func (c *Composite) ReserveParts(ctx context.Context, key string, costs []int, maxWait time.Duration) (*throttle.Reservation, error) {
	if len(costs) != len(c.partLimits) {
		return nil, fmt.Errorf("redislimit: ReserveParts needs %d costs, one per part, got %d", len(c.partLimits), len(costs))
	}
	per := make([]int, len(c.limits))
	most := 0
	for p, n := range costs {
		if n < 0 {
			return nil, fmt.Errorf("redislimit: ReserveParts' cost of part %d must not be negative, got %d", p, n)
		}
		for _, i := range c.partLimits[p] {
			per[i] = max(per[i], n)
		}
		most = max(most, n)
	}
	if most == 0 {
		return nil, fmt.Errorf("redislimit: ReserveParts needs a positive cost on some part, got %v", costs)
	}
	for i, n := range per {
		if n > c.limits[i].most {
			return nil, fmt.Errorf("%w: part cost %d on %s, at most %d fit", throttle.ErrExceedsCapacity, n, c.limits[i].suffix, c.limits[i].most)
		}
	}
	r, bk, err := c.reserveCosts(ctx, key, 1, per, costs, 0, maxWait, true)
	if bk != nil {
		bk.parts = c.partLimits
	}
	return r, err
}
