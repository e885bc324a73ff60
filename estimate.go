package egress

import (
	"context"
	"fmt"
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
// With [WithUpstream], the record of what the upstream states takes one
// unit per request (its quotas count requests) before the parts are
// booked; when it holds the key back, the parts are booked once the hold
// is over, so that they pace what is sent after it.
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
// or with WithEstimate its costs per part.
func (c *call) reserve(ctx context.Context, l throttle.Limiter, maxWait time.Duration) (*throttle.Reservation, error) {
	if c.costs == nil {
		return l.Reserve(ctx, c.key, c.cost, maxWait)
	}
	t := c.t
	var gate *throttle.Reservation // the upstream record's unit
	if t.upstream != nil && t.upstream.Heard() {
		var err error
		gate, err = t.upstream.Reserve(ctx, c.key, 1, maxWait)
		if err != nil || !gate.OK {
			return gate, err
		}
		if gate.Delay > 0 {
			// The upstream stated a hold: book the parts after it, so that
			// they pace what is sent then, rather than release a herd.
			if err := sleep(ctx, gate.Delay); err != nil {
				cancelDetached(ctx, gate)
				return nil, err
			}
			if maxWait >= 0 {
				maxWait = max(maxWait-gate.Delay, 0)
			}
		}
	}
	r, err := c.reserveParts(ctx, maxWait)
	if gate != nil && (err != nil || r == nil || !r.OK) {
		cancelDetached(ctx, gate)
	}
	c.booked = r
	return r, err
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

// cancelDetached cancels r under a context that outlives ctx.
func cancelDetached(ctx context.Context, r *throttle.Reservation) {
	ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), throttle.CancelTimeout)
	defer stop()
	_ = r.Cancel(ctx)
}
