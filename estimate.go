package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/egress-go/egress/throttle"
)

// WithEstimate makes f estimate each request's cost up front, one value
// per part of the [WithLimiter] limiter, for costs known only once the
// response is in: an LLM API that limits requests, input tokens and
// output tokens per minute is booked {1, the prompt's tokens,
// max_tokens}. The Transport books the estimate at one common slot, all
// or nothing, with [throttle.PartsReserver.ReserveParts] (the limiter is
// usually a [throttle.All] of one limiter per part, costs[i] going to its
// i-th argument), and keeps the reservation with the response, so that
// [Settle] settles it to what the call really cost once the caller has
// read the usage. A reservation never settled keeps its estimate.
//
// f returns one cost per part. A single cost also works with a limiter
// that is not a PartsReserver: it is booked with Reserve, and settled as
// one part. More than one cost for such a limiter fails the request with
// an error naming it. Costs that are all 0 (or none) book nothing; a
// negative cost, or an error from f, fails the request. A request whose
// context carries [WithRequestCost] books that one cost, as without
// WithEstimate, and has nothing to settle. f may read the request's body
// through its GetBody; it must be safe for concurrent use.
//
// With [WithUpstream], once the parts' slot has come, the record of what
// the upstream states books the request too: 1 unit of its quotas in
// requests and, of its quotas in other units (an LLM API's tokens, as
// its headers state them), the parts [WithUnits] names; when the record
// holds the key back, the request waits for it. So a stated "R tokens
// left" bounds the matching part even when another client spends from
// the same quota.
//
// Each attempt a retry makes is booked again; [Settle] settles the one
// that brought the response. NewTransport panics if WithEstimate is given
// without WithLimiter, and WithEstimate panics if f is nil.
func WithEstimate(f func(*http.Request) ([]int, error)) Option {
	if f == nil {
		panic("egress: WithEstimate given a nil func")
	}
	return optionFunc(func(t *Transport) { t.estimate = f })
}

// WithUnits tells the record of what the upstream states
// ([WithUpstream]) which parts of a [WithEstimate] estimate each of its
// quota units counts: units[u] lists the parts whose costs add up to a
// request's cost in the unit u, as the upstream's quota headers name it
// (see [throttle.Statement.Unit]). A part listed that the estimate does
// not have adds nothing. Quotas in requests always take 1 per request.
//
// Without WithUnits, parts 1 and 2 of an estimate {requests, input
// tokens, output tokens} count as Anthropic's "input-tokens" and
// "output-tokens", and both together as OpenAI's "tokens"
// (input plus max_tokens):
//
//	{"input-tokens": {1}, "output-tokens": {2}, "tokens": {1, 2}}
//
// With two parts {requests, tokens}, "tokens" is part 1. Anthropic's
// aggregate "tokens" quota, if sent, is then booked at input plus
// output, which is cautious. WithUnits panics on a nil map or a negative
// part.
func WithUnits(units map[string][]int) Option {
	if units == nil {
		panic("egress: WithUnits given a nil map")
	}
	for u, parts := range units {
		for _, i := range parts {
			if i < 0 {
				panic(fmt.Sprintf("egress: WithUnits: unit %q names part %d, want 0 or more", u, i))
			}
		}
	}
	return optionFunc(func(t *Transport) { t.units = units })
}

// units returns the call's cost in each unit of the upstream's quotas
// other than requests, from its costs per part.
func (c *call) units() map[string]int {
	m := make(map[string]int, 3)
	if c.t.units == nil {
		if len(c.costs) > 1 {
			m["input-tokens"] = c.costs[1]
			m["tokens"] = c.costs[1]
		}
		if len(c.costs) > 2 {
			m["output-tokens"] = c.costs[2]
			m["tokens"] += c.costs[2]
		}
		return m
	}
	for u, parts := range c.t.units {
		for _, i := range parts {
			if i < len(c.costs) {
				m[u] += c.costs[i]
			}
		}
	}
	return m
}

// price sets the call's cost, and with WithEstimate its costs per part,
// and checks them. With WithEstimate, c.cost is 1 when something is to be
// booked (the unit the upstream's record takes) and 0 when nothing is.
func (c *call) price() error {
	if c.cost < 0 {
		return fmt.Errorf("egress: cost of a request to key %q must not be negative, got %d", c.key, c.cost)
	}
	t := c.t
	if t.estimate == nil {
		return nil
	}
	if _, ok := c.req.Context().Value(requestCost{}).(int); ok {
		return nil // WithRequestCost: one cost, as without WithEstimate
	}
	costs, err := t.estimate(c.req)
	if err != nil {
		return fmt.Errorf("egress: estimating the cost of a request to key %q: %w", c.key, err)
	}
	c.cost = 0
	for i, n := range costs {
		if n < 0 {
			return fmt.Errorf("egress: estimated cost of part %d of a request to key %q must not be negative, got %d", i, c.key, n)
		}
		if n > 0 {
			c.cost = 1
		}
	}
	if c.cost > 0 {
		c.costs = costs
	}
	return nil
}

// reserve books the call's units for one attempt: its cost on the
// limiter l (the configured one alone, or beside the upstream record),
// or with WithEstimate its costs per part on the configured limiter.
func (c *call) reserve(ctx context.Context, l throttle.Limiter, maxWait time.Duration) (*throttle.Reservation, error) {
	if c.costs == nil {
		return l.Reserve(ctx, c.key, c.cost, maxWait)
	}
	r, err := c.reserveParts(ctx, maxWait)
	c.booked, c.unsent = r, r != nil
	return r, err
}

// gate books, once the parts' slot has come, the call's units on the
// upstream's record: 1 request, and its cost in each unit the record
// states quotas in ([WithUnits]), and waits if the record holds the key
// back. It books at the moment of sending, so that the freshest
// statement decides, not the one known when the parts were booked: a
// booking made a second ahead would not see what another client spends
// meanwhile. Without WithEstimate, the record is booked with the
// configured limiter, at one slot. The record's slot must lie within
// maxWait (negative: no bound), what is left of the call's max wait or
// deadline (byDeadline), or the call is refused; an attempt the gate
// stops gives its parts back (the caller unbooks).
func (c *call) gate(ctx context.Context, maxWait time.Duration, byDeadline bool) error {
	t := c.t
	if c.costs == nil || t.upstream == nil || !t.upstream.Heard() {
		return nil
	}
	g, err := t.upstream.ReserveUnits(ctx, c.key, 1, c.units(), 0, maxWait)
	switch {
	case err != nil:
		return err
	case !g.OK:
		return c.refuse(&throttle.LimitError{Key: c.key, RetryAfter: g.Delay, Deadline: byDeadline})
	}
	c.recorded = true
	if g.Delay <= 0 || (c.t.observer.Waited == nil && c.t.observer.Refused == nil) {
		return c.wait(ctx, g)
	}
	// The record holds the attempt back: a wait for its slot in the
	// budget, which Observer.Waited reports (it had gone unreported when
	// the configured limiter let the attempt go at once).
	start := time.Since(c.t.epoch)
	c.waiting(start)
	err = c.wait(ctx, g)
	c.gated = time.Since(c.t.epoch) - start
	return err
}

// neverSent reports whether err, from the base RoundTripper, says the
// request never left: its connection could not be made. Any other failure
// may have come after the upstream took the call, and keeps its estimate.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// unbook gives back the parts' units of an attempt that will not be
// sent. Their Wait has returned, after which Cancel gives nothing back,
// so they are settled at 0: without it, every call its context ended in
// the gate kept its whole estimate (a request never sent, with no
// response to Settle).
func (c *call) unbook(ctx context.Context) {
	if c.booked == nil {
		return
	}
	ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), throttle.CancelTimeout)
	defer stop()
	_ = c.booked.Settle(ctx, make([]int, len(c.costs))...)
	c.booked, c.unsent = nil, false
}

// reserveParts books c.costs on the configured limiter.
func (c *call) reserveParts(ctx context.Context, maxWait time.Duration) (*throttle.Reservation, error) {
	l := c.t.configured
	if p, ok := l.(throttle.PartsReserver); ok {
		return p.ReserveParts(ctx, c.key, c.costs, maxWait)
	}
	if len(c.costs) != 1 {
		return nil, fmt.Errorf("egress: WithEstimate gave %d costs for a request to key %q, but the limiter, a %T, is not a throttle.PartsReserver and books one", len(c.costs), c.key, l)
	}
	return l.Reserve(ctx, c.key, c.costs[0], maxWait)
}
