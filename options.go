package egress

import (
	"fmt"
	"net/http"
	"time"

	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// DefaultMaxWait is how long a request may wait for its slot in the
// limiter's budget unless [WithMaxWait] says otherwise. Like
// [retryafter.DefaultMaxDelay], it fits a typical request budget: a
// request that would wait longer is refused at once with a
// *[throttle.LimitError] saying when to come back.
const DefaultMaxWait = 30 * time.Second

// An Option configures a [Transport]. Options are applied in order; a later
// one replaces an earlier one of the same kind.
type Option interface {
	apply(*Transport)
}

type optionFunc func(*Transport)

func (f optionFunc) apply(t *Transport) { f(t) }

// WithLimiter paces requests on l: each request takes its cost in units of
// its key's budget before it is sent, waiting for its slot if need be.
//
// When l learns from responses ([throttle.Learner], as
// [throttle.Adaptive] does), the Transport reports each attempt's outcome
// to it.
//
// When the Transport listens to the upstream (with [WithRetry], or when l
// implements [throttle.Pauser]), what the upstream states is booked
// beside l: in the record given with [WithUpstream], or in one of the
// Transport's own. A quota at 0 then holds new requests back until its
// reset and moves nothing already booked. A Transport with [WithEstimate]
// keeps no record of its own (give it WithUpstream), nor do two kinds of
// l: a limiter that learns its rate (a
// [throttle.Adaptive], which takes a stated quota as its budget itself,
// or redislimit's), and a budget shared by several processes (redislimit's
// budgets, which have a Stated method): there a 200 whose quota is at 0
// pauses the key for every process until the reset, unless
// redislimit.WithStated keeps the statements in Redis.
//
// When l implements [throttle.Pauser], a response in which the upstream
// asks to slow down (a 429 or 503 with Retry-After) pauses the key for
// every caller of l, for at most the retry policy's MaxPause, even
// without [WithRetry]. A pause moves every booking still ahead later by
// its length, so that no herd meets the upstream at its end.
// WithLimiter panics if l is nil.
func WithLimiter(l throttle.Limiter) Option {
	if l == nil {
		panic("egress: WithLimiter given a nil throttle.Limiter")
	}
	return optionFunc(func(t *Transport) {
		t.limiter = l
		t.pauser, _ = l.(throttle.Pauser)
	})
}

// WithUpstream makes the Transport follow what the upstream states in u:
// the quotas in every response's headers (any dialect
// [retryafter.ParseQuota] reads) are recorded in u, per key, and u becomes
// one more part of every key's budget, booked at one common slot with the
// [WithLimiter] limiter ([throttle.All]), so that the stricter of the two
// wins and a looser statement never loosens the limiter. With WithUpstream
// and [WithRetry] alone, no limiter, the headers shape the pace by
// themselves.
//
// A Transport with WithRetry, or with a limiter that pauses, keeps such a
// record of its own without WithUpstream (see [WithLimiter]); give one to
// choose its options ([throttle.WithMaxKeys], [throttle.WithFirstAnswer])
// or to read it ([throttle.Upstream.Stated]).
//
// A statement is a budget, not a pause: "nothing more before the reset"
// holds new requests back until it, without moving those already booked,
// so a 200 whose quota is at 0 pauses nothing. A 429 with Retry-After
// still pauses the key. Statements that would hold a key longer than the
// retry policy's MaxPause are clamped to it. WithUpstream panics if u is
// nil.
func WithUpstream(u *throttle.Upstream) Option {
	if u == nil {
		panic("egress: WithUpstream given a nil *throttle.Upstream")
	}
	return optionFunc(func(t *Transport) { t.upstream = u })
}

// WithQueue bounds the requests in flight with q: each request holds one of
// q's slots from the start of RoundTrip until its response body is closed,
// read to the end or fails, or its context ends. When q's wait line is
// full, RoundTrip fails at once with an error that matches
// [queue.ErrFull].
//
// q is usually a [*queue.Queue], which bounds one process; any
// [queue.Interface], such as a queue shared by several processes, works
// too. WithQueue panics if q is nil or a nil *queue.Queue.
func WithQueue(q queue.Interface) Option {
	if qq, ok := q.(*queue.Queue); q == nil || (ok && qq == nil) {
		panic("egress: WithQueue given a nil queue")
	}
	return optionFunc(func(t *Transport) { t.queue = q })
}

// WithRetry retries requests as p decides ([retryafter.Policy.Next]): a
// throttling response whose server delay is at most p.MaxDelay is retried
// after that delay, and a retryable response without a delay after a local
// backoff. Only requests whose body can be replayed are retried. The zero
// Policy means the documented defaults ([retryafter.DefaultMaxAttempts]
// and the rest).
//
// p.MaxPause also caps the pauses of [WithLimiter], and how long a quota
// statement may hold a key back. WithRetry panics if p is invalid
// ([retryafter.Policy.Validate]).
//
// The Transport follows what the upstream says with a record
// ([throttle.NewUpstream]) of its own when no [WithUpstream] gave one (see
// [WithLimiter] for the limiters that keep none). With WithRetry and no
// WithLimiter, that record is the only pace: quota headers shape the pace
// ("R more before T" holds new requests back until T, and the limit per
// window paces them after it; a bucket that states no rate is held to
// what it has refilled), and a throttling response's delay pauses every
// caller of its key, not only the request that met it. An upstream that
// states nothing (bare 429s or 503s) is not paced: use
// [throttle.NewAdaptive] for that. The Transport's own record never
// refuses a request for holding too many keys: once full
// ([throttle.DefaultMaxKeys]), it forgets the key answered longest ago
// ([throttle.WithForget]).
func WithRetry(p retryafter.Policy) Option {
	if err := p.Validate(); err != nil {
		panic(fmt.Sprintf("egress: WithRetry given an invalid Policy: %v", err))
	}
	return optionFunc(func(t *Transport) {
		t.policy = p
		t.retry = true
	})
}

// WithKey makes f choose each request's budget key. The default key is
// the request's host (req.URL.Host); [KeyByHeader] keys by an API key
// instead, and [WithRequestKey] overrides the key for one request. f must
// be safe for concurrent use. WithKey panics if f is nil.
func WithKey(f func(*http.Request) string) Option {
	if f == nil {
		panic("egress: WithKey given a nil func")
	}
	return optionFunc(func(t *Transport) { t.keyOf = f })
}

// WithCost makes f choose how many units of its key's budget each request
// takes. The default cost is 1; [WithRequestCost] overrides the cost for
// one request. A cost of 0 takes nothing from the limiter; a negative cost
// fails the request. f must be safe for concurrent use. WithCost panics if
// f is nil.
func WithCost(f func(*http.Request) int) Option {
	if f == nil {
		panic("egress: WithCost given a nil func")
	}
	return optionFunc(func(t *Transport) { t.costOf = f })
}

// WithMaxWait bounds how long a request may wait for its slot in the
// limiter's budget (default [DefaultMaxWait]). A request whose slot lies
// further away, or past its context's deadline, takes nothing and fails
// at once with a *[throttle.LimitError]. 0 means "only now", and a
// negative d means no bound other than the context's deadline.
func WithMaxWait(d time.Duration) Option {
	return optionFunc(func(t *Transport) { t.maxWait = d })
}

// WithObserver makes the Transport report waits, refusals, retries and
// pauses to o. See [Observer]. WithObserver panics if o is nil.
func WithObserver(o *Observer) Option {
	if o == nil {
		panic("egress: WithObserver given a nil *Observer")
	}
	return optionFunc(func(t *Transport) { t.observer = *o })
}
