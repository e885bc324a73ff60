package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// Transport is an [http.RoundTripper] that waits for a turn in a bounded
// queue, paces each request on its key's budget, obeys the upstream's
// requests to slow down, and pauses every caller of a key when one of
// them is told to wait. Build one with [NewTransport], or an [http.Client]
// around one with [NewClient].
//
// Without options a Transport sends every request through its base
// unchanged, and returns what the base returns. The zero Transport does
// so through [http.DefaultTransport].
//
// Any HTTP status, an upstream 429 included, comes back as (resp, nil).
// A request that the Transport refuses to send fails with an error that
// matches [queue.ErrFull] or [throttle.ErrLimitExceeded] with errors.Is,
// also through the [*net/url.Error] that [http.Client] wraps around it; a
// limit refusal is a *[throttle.LimitError] carrying the key and when to
// come back. A retry that cannot be made is not such a refusal: the
// response it was for comes back instead. See RoundTrip for the steps.
//
// A Transport is safe for concurrent use by multiple goroutines.
type Transport struct {
	base       http.RoundTripper
	limiter    throttle.Limiter // configured and upstream, booked at one slot
	configured throttle.Limiter // WithLimiter's: booked alone while upstream has heard nothing, and WithEstimate's parts
	pauser     throttle.Pauser  // limiter, when it can pause keys
	learner    throttle.Learner // configured, when it learns
	// inMemory is set when learner is a bucket that learns its headroom
	// in memory and never blocks: it hears each outcome with the
	// request's context, not one of its own (overhead goal: ≤ 3 allocs).
	inMemory bool
	spends   bool               // configured is a throttle.Adaptive or follows statements (Stated): it takes a quota stated spent as a budget itself
	upstream *throttle.Upstream // what the upstream states, per key
	alone    bool               // upstream is the only limiter: booked from the first request (throttle/unpaced.go)
	breaker  Breaker            // configured, when it is one, for Snapshot
	queue    queue.Interface
	slots    *queue.Queue // queue, when it is one: its Slots cost no allocation
	policy   retryafter.Policy
	retry    bool // WithRetry was given
	keyOf    func(*http.Request) string
	costOf   func(*http.Request) int
	estimate func(*http.Request) ([]int, error) // WithEstimate: costs per part
	units    map[string][]int                   // WithUnits: the parts each unit of the upstream's quotas adds up, or nil for the default
	actual   func(*http.Response) ([]int, bool)
	maxWait  time.Duration
	observer Observer
	epoch    time.Time // NewTransport's: attempts' send times are read against it
	wall     atomic.Pointer[wallClock]

	sent, retries, refused, pauses atomic.Uint64
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport returns a Transport that sends requests through base,
// configured by opts. A nil base means [http.DefaultTransport]. With no
// options, the Transport behaves exactly like base.
//
// NewTransport panics if an option is nil, as each With… function panics
// on a nil argument: these are programming errors.
func NewTransport(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{base: base, maxWait: DefaultMaxWait, epoch: time.Now()}
	for i, o := range opts {
		if o == nil {
			panic(fmt.Sprintf("egress: NewTransport given a nil Option at index %d", i))
		}
		o.apply(t)
	}
	t.follow()
	t.slots, _ = t.queue.(*queue.Queue)
	if t.estimate != nil && t.configured == nil {
		panic("egress: WithEstimate needs WithLimiter: the estimate is booked on its parts")
	}
	return t
}

// follow wires the limiters that learn from responses: the record of
// what the upstream states, given with [WithUpstream] or the Transport's
// own (ownRecord), becomes one
// more part of every key's budget, booked at one common slot with the
// configured limiter; and a configured limiter that learns
// ([throttle.Learner]) hears every attempt's outcome.
func (t *Transport) follow() {
	configured := t.limiter
	t.configured = configured
	t.learner, _ = configured.(throttle.Learner)
	switch configured.(type) {
	case *throttle.TokenBucket, *throttle.LeakyBucket, *throttle.SlidingWindow, *throttle.FixedWindow:
		// A bucket learns its key's rate from refusals
		// (throttle/learnrate.go), and its headroom when it follows the
		// path; a window its key's limit (throttle/learnlimit.go).
		t.inMemory = true
	}
	// A limiter that learns its rate (throttle's Adaptive, redislimit's)
	// holds a quota stated spent itself.
	_, t.spends = configured.(interface{ Rate(key string) float64 })
	if s, ok := configured.(interface{ Stated() bool }); ok && s.Stated() {
		// A budget that follows the upstream's statements (redislimit's
		// WithStated) holds a spent quota itself, as the record does: a
		// pause would cost a round trip and, for a quota that refills,
		// hold every process for the whole refill.
		t.spends = true
	}
	t.breaker, _ = configured.(Breaker)
	if t.upstream == nil {
		t.upstream = t.ownRecord(configured)
	}
	if t.upstream == nil {
		return
	}
	if configured == nil {
		t.limiter, t.alone = t.upstream, true
	} else {
		t.limiter = throttle.All(guarded(configured), t.upstream)
	}
	t.pauser, _ = t.limiter.(throttle.Pauser)
}

// ownRecord returns the record of what the upstream states that the
// Transport keeps when [WithUpstream] gave none, or nil when it keeps
// none. A Transport that listens to the upstream ([WithRetry], or a
// limiter that pauses) books a quota statement as a budget ("R more
// before T"), never as a pause that would move the units booked after T:
//   - with WithRetry alone, the record is the key's only pace, and the
//     first request to a key goes alone;
//   - beside an in-process limiter, it is one more part of the key's
//     budget, booked at one slot with the limiter once a response has
//     stated a quota.
//
// A limiter that learns its rate (a [throttle.Adaptive], which takes a
// stated quota as its budget itself, or redislimit's) gets none, and so
// does a budget shared by several processes (a redislimit budget: it has
// a Stated method, and redislimit.WithStated keeps the statements in
// Redis): a record in one process would hold back that process alone,
// where a pause is heard by all of them. Nor does a Transport with
// [WithEstimate]: a herd of calls in flight makes a token quota's
// statements lag, and the record booked at their pace cost the LLM batch
// of examples/llm 3 points of its output limit (94.5% against 97.2%);
// give it [WithUpstream] where another client spends the same quota.
//
// The user asked for no record, so it never refuses a request for
// holding too many keys: once full, it forgets the key answered longest
// ago ([throttle.WithForget]).
func (t *Transport) ownRecord(configured throttle.Limiter) *throttle.Upstream {
	opts := []throttle.Option{throttle.WithMaxHold(t.maxPause()), throttle.WithForget()}
	_, learns := configured.(interface{ Rate(key string) float64 })
	_, shared := configured.(interface{ Stated() bool })
	switch {
	case configured == nil && !t.retry:
		return nil
	case configured == nil:
		opts = append(opts, throttle.WithFirstAnswer(throttle.DefaultFirstAnswer))
	case learns || shared || t.estimate != nil || (!t.retry && t.pauser == nil):
		return nil
	}
	u, _ := throttle.NewUpstream(opts...)
	return u
}

// maxPause is the policy's MaxPause, or its default.
func (t *Transport) maxPause() time.Duration {
	if t.policy.MaxPause > 0 {
		return t.policy.MaxPause
	}
	return retryafter.DefaultMaxPause
}

// NewClient returns an [http.Client] whose Transport is
// NewTransport(nil, opts...): requests go through [http.DefaultTransport].
// Like NewTransport, it panics if an option is nil.
func NewClient(opts ...Option) *http.Client {
	return &http.Client{Transport: NewTransport(nil, opts...)}
}

// RoundTrip implements [http.RoundTripper]. It never modifies req, and
// closes req's body on every path, as the interface requires, a panic in
// a func or Observer callback it was given included. For each
// request it:
//
//  1. finds the request's key and cost ([WithKey], [WithCost], or
//     [WithRequestKey] and [WithRequestCost] in its context), or its
//     estimated cost per part ([WithEstimate]);
//  2. takes a slot in the queue ([WithQueue]), waiting in line, or fails
//     at once with [queue.ErrFull] when the line is full;
//  3. reserves cost units of the key's budget ([WithLimiter]), or the
//     estimate's units of each part at one common slot, within
//     min(max wait, time left before the context's deadline), or fails
//     at once, having taken nothing, with a *[throttle.LimitError] whose
//     Timeout is true when the deadline was the bound;
//  4. sleeps until the reserved slot, following any pause of the key
//     learned meanwhile; if the context ends, the reservation is
//     cancelled and the context's error returned;
//  5. sends the request through the base RoundTripper; with
//     WithEstimate, the request sent carries the reservation in its
//     context, so that [Settle] finds it through the response's Request,
//     and [WithActual] may settle it from the response's headers;
//  6. reports the attempt's outcome to the limiters that learn
//     ([throttle.Learner]): the quotas the response states become one
//     more part of the key's budget, in the record of what the upstream
//     states ([WithUpstream], or the Transport's own); and when the
//     upstream asks to slow down (a throttling response with a delay, or,
//     for a limiter that keeps no record, quota headers at 0), pauses the
//     key for every caller of the limiter, for at most the policy's
//     MaxPause;
//  7. when the retry policy ([WithRetry]) allows it and the body can be
//     replayed, sets the response aside (reading at most 64 KiB of its
//     body into memory and closing it, so that its connection is freed;
//     returned after all, a longer body fails with [ErrBodyCut] after
//     those 64 KiB) and tries again
//     from step 3 after the server's delay, or after a local backoff that
//     delays this request only.
//
// A response that arrived is never turned into an error: when a retry
// cannot be made (its slot lies beyond the max wait or the deadline, the
// limiter fails, the context ends, or the retry's own attempt fails), the
// response set aside is returned, as when the policy's attempts run out.
//
// The queue slot is held until the returned response's body is closed,
// read to EOF or fails on read, or the request's context ends (as when
// [http.Client.Timeout] fires), whichever comes first, and released
// exactly once. A 101 Switching Protocols response is returned with its
// body unwrapped, since WebSocket clients type-assert it to
// [io.ReadWriteCloser]; its slot is released at once, as is the slot of a
// response that has no content (the answer to a HEAD, a 204 or a 304) or
// states an empty body (Content-Length: 0), which holds nothing in flight,
// whatever its body.
//
// A pause cannot recall requests already sent: those on the wire when the
// upstream's 429 arrived may meet 429s too.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.limiter == nil && t.queue == nil && !t.retry && t.observer.Sent == nil {
		t.sent.Add(1)
		return t.roundTripper().RoundTrip(req)
	}
	if req.URL == nil {
		closeBody(req.Body)
		return nil, errNilURL
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		closeBody(req.Body)
		return nil, err
	}
	c := call{t: t, req: req, body: req.Body, attempt: 1}
	panicking := true
	defer func() {
		if panicking {
			c.abandon()
		}
	}()
	resp, err := c.roundTrip()
	panicking = false
	return resp, err
}

// roundTrip is RoundTrip's work once the request is checked: it prices,
// queues and runs the call.
func (c *call) roundTrip() (*http.Response, error) {
	t, req, ctx := c.t, c.req, c.req.Context()
	c.key, c.cost = t.keyAndCost(req)
	if err := c.price(); err != nil {
		closeBody(c.body)
		return nil, err
	}
	if t.queue == nil {
		return c.run()
	}
	slot, err := c.acquire()
	if err != nil {
		closeBody(c.body)
		return nil, err
	}
	resp, err := c.runHolding(slot)
	if err != nil {
		slot.Release()
		return nil, err
	}
	holdSlot(ctx, req.Method, resp, slot)
	return resp, nil
}

// abandon closes what a call that panics holds and will never hand on:
// the body of the next attempt, not yet given to the base RoundTripper
// (which closes it from then on), the response in hand, and the one set
// aside. A panic in a WithKey, WithCost or WithEstimate func or an Observer
// callback (Refused, Waited, Sent, Retrying, Paused) unwound past them:
// the request's body was never closed, against the RoundTripper contract,
// and a response's body held its connection.
//
// An estimate booked for an attempt not yet sent ([WithEstimate]) is
// given back, as when the gate stops the attempt: a panic in
// Observer.Waited left it booked for good, with no response to settle.
func (c *call) abandon() {
	if c.unsent {
		c.unbook(c.req.Context())
	}
	closeBody(c.body)
	c.body = nil
	for _, resp := range [...]*http.Response{c.open, c.last} {
		if resp != nil && resp.Body != nil {
			_ = resp.Body.Close()
		}
	}
	c.open, c.last = nil, nil
}

// runHolding runs the call while it holds slot, which it releases if the
// call panics (in the base RoundTripper, a WithActual func or an Observer
// callback): net/http's server recovers a handler's panic, and each one
// had kept a slot for good, until a server calling through the Transport
// refused everything.
func (c *call) runHolding(slot held) (*http.Response, error) {
	panicking := true
	defer func() {
		if panicking {
			slot.Release()
		}
	}()
	resp, err := c.run()
	panicking = false
	return resp, err
}

// held is the queue slot a call holds: a [queue.Slot] of a *queue.Queue,
// which costs no allocation (goal: ≤ 3 allocs overhead per request,
// bench/micro), or the release func of another [queue.Interface].
type held struct {
	slot    queue.Slot
	release func()
}

// Release gives the slot back; only the first call has an effect.
func (h held) Release() {
	if h.release != nil {
		h.release()
		return
	}
	h.slot.Release()
}

// call is the state of one RoundTrip.
type call struct {
	t      *Transport
	req    *http.Request
	key    string
	cost   int
	costs  []int                 // WithEstimate's costs per part, or nil
	booked *throttle.Reservation // this attempt's, with costs, for Settle
	// unsent is set while booked is this attempt's and the attempt has
	// not been handed to the base RoundTripper: a panic then gives its
	// units back (abandon).
	unsent bool
	// recorded is set when this attempt's units were booked on the
	// upstream's record: only then does its answer take them off.
	recorded bool
	// unheard is set when this attempt was booked on the configured
	// limiter alone, because the record had heard nothing yet.
	unheard bool
	attempt int
	// gated is how long this attempt waited in the gate of the
	// upstream's record (WithEstimate with WithUpstream), when measured.
	gated time.Duration
	// arrived is when the latest response arrived, as time since the
	// Transport's epoch, when timed.
	arrived time.Duration
	// due is this attempt's booked slot as time since the Transport's
	// epoch, when a learner hears its lateness; late is how long after
	// it the attempt was sent (Outcome.Late).
	due, late time.Duration
	body      io.ReadCloser // the body of the next attempt, until it is sent
	fresh     bool          // body came from GetBody, not from req
	queued    time.Duration // time spent in the queue's line
	// open is the response in hand, from its arrival until it is
	// returned or set aside; last is the response set aside while its
	// retry is tried. A panic closes both (abandon).
	open, last *http.Response
	// began is when the call first waited (in line, for its slot, or on
	// the wire), as time since the Transport's epoch, if begun: a
	// refusal's Elapsed counts from it.
	began time.Duration
	begun bool
}

// waiting notes that the call begins to wait at at (time since the
// Transport's epoch), if it had not waited before.
func (c *call) waiting(at time.Duration) {
	if !c.begun {
		c.began, c.begun = at, true
	}
}

// acquire takes a queue slot for the call: a free one at once, or else
// by waiting in line.
func (c *call) acquire() (held, error) {
	q, slots := c.t.queue, c.t.slots
	reporter, reports := q.(waitReporter)
	switch {
	case slots != nil:
		if s, ok := slots.TryAcquireSlot(); ok {
			return held{slot: s}, nil
		}
	case !reports:
		if release, ok := q.TryAcquire(); ok {
			return held{release: release}, nil
		}
	}
	var start time.Duration
	timed := c.t.observer.Waited != nil || c.t.observer.Refused != nil
	if timed {
		start = time.Since(c.t.epoch)
	}
	var h held
	var err error
	waited := true
	switch {
	case slots != nil:
		h.slot, err = slots.AcquireSlot(c.req.Context())
	case reports:
		h.release, waited, err = reporter.AcquireWaited(c.req.Context())
	default:
		h.release, err = q.Acquire(c.req.Context())
	}
	if timed && (waited || err != nil) {
		c.waiting(start)
	}
	if errors.Is(err, queue.ErrFull) {
		return held{}, c.refuse(&notSentError{key: c.key, err: err})
	}
	if err != nil {
		return held{}, err
	}
	if timed && waited {
		c.queued = time.Since(c.t.epoch) - start
	}
	return h, nil
}

// waitReporter is a [queue.Interface] whose Acquire also says whether the
// caller waited in line, as the queue redislimit shares through Redis
// does: the Transport calls it alone, where TryAcquire and then Acquire
// cost such a queue a round trip more for each request that waits (three
// with the release, where the shared queue's goal is two).
type waitReporter interface {
	AcquireWaited(ctx context.Context) (release func(), waited bool, err error)
}

// run books, sends and retries until it has a response to return. It
// closes c.body on every error it returns before the body is sent. Once a
// response has arrived, it returns a response: the latest one, if a retry
// fails.
func (c *call) run() (*http.Response, error) {
	ctx := c.req.Context()
	for {
		if err := c.book(ctx); err != nil {
			closeBody(c.body)
			return orLast(c.last, err)
		}
		if c.unheard {
			c.t.upstream.SendUnbookedKey(c.key) // sent, and answered (learn) or failed: learn takes it off
		}
		resp, took, now, err := c.send()
		if err != nil {
			c.learn(nil, 0, now)
			if neverSent(err) {
				c.unbook(ctx) // nothing reached the upstream: no response will settle it
			}
			return orLast(c.last, err)
		}
		c.settleFrom(resp)
		discard(c.last)
		c.last = nil

		// Pause first: a pause shifts what is booked, and a throttling
		// response's own statement (429, r=0, t beyond MaxPause) must not
		// be shifted too, or the key waits MaxPause twice.
		c.pause(resp, now)
		c.learn(resp, took, now)
		delay, ok := c.retryAfter(resp, now)
		if !ok {
			return resp, nil
		}
		body, fresh, err := rewind(c.req)
		if err != nil {
			return resp, nil // this response is the best answer left
		}
		c.body, c.fresh = body, fresh
		c.t.retries.Add(1)
		if f := c.t.observer.Retrying; f != nil {
			f(RetryInfo{Key: c.key, Attempt: c.attempt, StatusCode: resp.StatusCode, Delay: delay})
		}
		c.last, c.open = setAside(resp), nil
		// The delay is slept out before the retry books: booked at once
		// for a slot that far ahead, it held back every caller booked
		// after it on a limiter that never hands out an earlier slot
		// after a later one, where a local backoff delays this request
		// only, and a Retry-After above MaxPause held the key past it.
		if err := sleep(ctx, delay); err != nil {
			closeBody(c.body)
			return orLast(c.last, err)
		}
		c.attempt++
	}
}

// book reserves the call's units and waits for their slot.
func (c *call) book(ctx context.Context) error {
	l := c.t.limiter
	c.recorded, c.unheard = false, false
	c.due, c.late, c.gated = 0, 0, 0
	if c.t.upstream != nil && !c.t.alone && !c.t.upstream.Heard() {
		// Nothing stated yet: the record would admit at once. Overhead
		// goal (≤ 1 µs, ≤ 3 allocs a request) fails booking both. Alone,
		// the record is booked from the first request: it holds the
		// others until the first answer.
		l = c.t.configured
		c.unheard = c.costs == nil
	}
	if l == nil || c.cost == 0 {
		c.waited(0)
		return nil
	}
	maxWait, byDeadline := c.t.maxWait, false
	if deadline, ok := ctx.Deadline(); ok {
		if left := max(time.Until(deadline), 0); maxWait < 0 || left < maxWait {
			maxWait, byDeadline = left, true
		}
	}
	r, err := c.reserve(ctx, l, maxWait)
	var held time.Duration
	for err == nil && r != nil && r.Held() {
		// The record cannot place the units until answers on their way
		// are in: nothing was booked; book again after the hold.
		if maxWait == 0 || (maxWait > 0 && r.Delay > maxWait) {
			// A hold past what is left of the wait ends it, as a slot
			// past it does: a limiter that held on (one of the user's,
			// holding at any max wait) kept the call in this loop past
			// its max wait, forever without a deadline.
			return c.refuse(&throttle.LimitError{Key: c.key, RetryAfter: r.Delay, Deadline: byDeadline})
		}
		held += r.Delay
		if maxWait >= 0 {
			maxWait = max(maxWait-r.Delay, 0) // the holds count against the wait
		}
		if err = sleep(ctx, r.Delay); err == nil {
			r, err = c.reserve(ctx, l, maxWait)
		}
	}
	switch {
	case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return err
	case err != nil:
		return c.refuse(&notSentError{key: c.key, err: err})
	case r == nil:
		return c.refuse(&notSentError{key: c.key, err: errNilReservation})
	case !r.OK:
		return c.refuse(&throttle.LimitError{Key: c.key, RetryAfter: r.Delay, Deadline: byDeadline})
	}
	c.recorded = c.costs == nil && c.t.upstream != nil && l == c.t.limiter
	if c.t.learner != nil && r.Delay > 0 {
		// A unit due at once is sent as soon as it is booked: its
		// lateness (0) needs no clock read (goal: ≤ 1µs overhead per
		// request, bench/micro).
		c.due = time.Since(c.t.epoch) + r.Delay
	}
	var start time.Duration
	timed := (c.t.observer.Waited != nil || c.t.observer.Refused != nil) && (r.Delay > 0 || held > 0)
	if timed {
		start = time.Since(c.t.epoch)
		c.waiting(start - held)
	}
	if err := c.wait(ctx, r); err != nil {
		return err
	}
	gateWait := maxWait
	if maxWait >= 0 {
		gateWait = max(maxWait-r.Delay-held, 0) // what the parts' slot left of it
	}
	if err := c.gate(ctx, gateWait, byDeadline); err != nil {
		c.unbook(ctx)
		return err
	}
	waited := c.gated
	if timed {
		waited = time.Since(c.t.epoch) - start + held // the gate's wait included
	}
	c.waited(waited)
	return nil
}

// wait sleeps until r's slot. A slot past the context's deadline is a
// refusal of this call, reported as one.
func (c *call) wait(ctx context.Context, r *throttle.Reservation) error {
	err := r.Wait(ctx)
	if err == nil {
		return nil // before errors.As, whose target escapes: an allocation a request (overhead goal: ≤ 3 allocs)
	}
	var le *throttle.LimitError
	if errors.As(err, &le) {
		return c.refuse(&throttle.LimitError{Key: c.key, RetryAfter: le.RetryAfter, Deadline: le.Deadline})
	}
	return err
}

// waited reports the call's waits to the observer, if it waited.
func (c *call) waited(limiter time.Duration) {
	queued := c.queued
	c.queued = 0 // later attempts keep the slot
	if f := c.t.observer.Waited; f != nil && (queued > 0 || limiter > 0) {
		f(WaitInfo{Key: c.key, Attempt: c.attempt, Queue: queued, Limiter: limiter})
	}
}

// refuse counts and reports a refusal, and returns err.
func (c *call) refuse(err error) error {
	c.t.refused.Add(1)
	if f := c.t.observer.Refused; f != nil {
		var elapsed time.Duration
		if c.begun {
			elapsed = time.Since(c.t.epoch) - c.began
		}
		f(RefusalInfo{Key: c.key, Attempt: c.attempt, Request: c.req, Err: err, Elapsed: elapsed})
	}
	return err
}

// send hands this attempt to the base RoundTripper, which closes the body
// from here on. It returns a response or an error, never both, with how
// long the base took and the time it answered, each read only when
// something uses it (zero otherwise).
func (c *call) send() (resp *http.Response, took time.Duration, now time.Time, err error) {
	out := c.outgoing()
	c.body, c.unsent = nil, false
	c.t.sent.Add(1)
	// One read of the monotonic clock at each end, shared by
	// Observer.Sent, the learners' latency and the response's handling.
	timed := c.t.observer.Sent != nil || c.t.learner != nil || c.t.upstream != nil ||
		c.t.retry && c.t.observer.Refused != nil // a retry's refusal counts from here
	var start time.Duration
	if timed {
		start = time.Since(c.t.epoch)
		c.waiting(start)
		if c.due > 0 {
			c.late = max(start-c.due, 0)
		}
	}
	resp, err = c.t.roundTripper().RoundTrip(out)
	c.open = resp
	if timed || c.t.pauser != nil || c.t.retry {
		end := time.Since(c.t.epoch)
		now, c.arrived = c.t.now(end), end
		if timed {
			took = end - start
		}
	}
	if f := c.t.observer.Sent; f != nil {
		c.sent(f, out, resp, err, took)
	}
	switch {
	case err != nil:
		discard(resp)
		c.open = nil
		return nil, took, now, err
	case resp == nil:
		return nil, took, now, errNilResponse
	case c.booked != nil && resp.Request == nil:
		resp.Request = out // for Settle
	case c.booked != nil && resp.Request.Context().Value(booking{}) == nil:
		// A base that answers with a request of its own (a cache, a
		// mock): Settle finds the booking in its context too.
		resp.Request = resp.Request.WithContext(context.WithValue(resp.Request.Context(), booking{}, c.booked))
	}
	return resp, took, now, nil
}

// wallClock is the wall clock read at one reading of the monotonic clock.
type wallClock struct {
	t  time.Time     // time.Now's, with its monotonic reading
	at time.Duration // t less the Transport's epoch
}

// now returns the time at the monotonic reading at (time since t.epoch):
// the wall clock read at most a second of monotonic time before,
// advanced by the monotonic clock, as throttle's windows are, so that a
// step of the wall clock shows within a second. It saves time.Now's
// second clock read on every response (goal: ≤ 1µs overhead per request
// with metrics attached, bench/micro).
func (t *Transport) now(at time.Duration) time.Time {
	w := t.wall.Load()
	if w == nil || at-w.at >= time.Second {
		n := time.Now()
		w = &wallClock{t: n, at: n.Sub(t.epoch)}
		t.wall.Store(w)
	}
	return w.t.Add(at - w.at)
}

// sent reports an attempt's outcome to the observer's Sent.
func (c *call) sent(f func(SentInfo), out *http.Request, resp *http.Response, err error, d time.Duration) {
	info := SentInfo{Key: c.key, Attempt: c.attempt, Request: out, Err: err, Duration: d}
	switch {
	case err == nil && resp == nil:
		info.Err = errNilResponse
	case err == nil:
		info.StatusCode = resp.StatusCode
	}
	f(info)
}

// outgoing returns the request to send for this attempt: req itself, or,
// when a retry needs a fresh body or the attempt has a reservation to
// settle, a shallow copy carrying them.
func (c *call) outgoing() *http.Request {
	var out *http.Request
	switch {
	case c.booked != nil:
		out = c.req.WithContext(context.WithValue(c.req.Context(), booking{}, c.booked))
	case c.fresh:
		out = new(http.Request)
		*out = *c.req
	default:
		return c.req
	}
	out.Body = c.body
	return out
}

// learn tells the limiters that learn what became of the attempt that
// took latency: resp, arrived at now, or no response when resp is nil.
//
// The record of what the upstream states hears nothing until a response
// states a quota or pauses the key ([throttle.Upstream.Heard]): until
// then nothing was booked on it.
func (c *call) learn(resp *http.Response, latency time.Duration, now time.Time) {
	unheard := c.unheard
	c.unheard = false
	if c.t.learner == nil && c.t.upstream == nil {
		return
	}
	o := throttle.Outcome{Failed: resp == nil, Latency: latency, Late: c.late}
	if c.cost > 0 {
		o.N = c.cost
	}
	if resp != nil {
		o.Throttled = throttling(resp)
		o.Statements = c.statements(resp, now)
	}
	upstream := c.t.upstream != nil && (len(o.Statements) > 0 || c.t.upstream.Heard() || c.recorded)
	if unheard && !upstream {
		c.t.upstream.AnsweredUnbookedKey(c.key)
	}
	if c.t.learner == nil && !upstream {
		return
	}
	if c.t.inMemory && !upstream {
		_ = c.t.learner.Learn(c.req.Context(), c.key, o) // never blocks
		return
	}
	ctx, stop := context.WithTimeout(context.WithoutCancel(c.req.Context()), throttle.CancelTimeout)
	defer stop()
	if c.t.learner != nil {
		_ = c.t.learner.Learn(ctx, c.key, o)
	}
	if upstream {
		if !c.recorded {
			o.N = 0 // booked before the record heard anything: nothing of it is in flight there
		}
		o.SentUnbooked = unheard // the record takes it off its count as it learns this answer
		if latency > 0 {
			// The record dates the send from when it learns: the time
			// since the response arrived (settling, pausing, the
			// limiter's Learn) would date it that much late.
			o.Latency = latency + max(time.Since(c.t.epoch)-c.arrived, 0)
		}
		_ = c.t.upstream.Learn(ctx, c.key, o)
	}
}

// throttling reports whether resp refused the attempt to slow the client
// down: a 429, a 503 (with or without Retry-After: a headerless upstream
// may answer a bare 503), a 529, or a throttling 403.
func throttling(resp *http.Response) bool {
	return resp.StatusCode == http.StatusServiceUnavailable || retryafter.Throttled(resp)
}

// statements returns the quotas resp states, with absurd values clamped
// and reported to the observer.
func (c *call) statements(resp *http.Response, now time.Time) []throttle.Statement {
	qs := retryafter.ParseQuota(resp.Header, now)
	if len(qs) == 0 {
		return nil
	}
	ss := make([]throttle.Statement, len(qs))
	for i, q := range qs {
		s := throttle.Statement{Name: q.Name, Unit: unitOf(q.Name), Limit: q.Limit, Remaining: q.Remaining, Reset: q.Reset, Window: q.Window, Absolute: q.Absolute, Refills: q.Refills, ResetAt: q.ResetAt, Precision: q.Precision}
		clamped, fields := s.Clamp(c.t.maxPause())
		if f := c.t.observer.Clamped; f != nil && len(fields) > 0 {
			f(ClampInfo{Key: c.key, StatusCode: resp.StatusCode, Stated: s, Used: clamped, Fields: fields})
		}
		ss[i] = clamped
	}
	return ss
}

// unitOf returns what a quota of the given name counts: tokens for the
// LLM providers' token quotas, requests for everything else.
func unitOf(name string) string {
	switch name {
	case "tokens", "tokens_usage_based", "input-tokens", "output-tokens":
		return name
	}
	return throttle.UnitRequests
}

// pause pauses the call's key when resp asks every caller to wait.
func (c *call) pause(resp *http.Response, now time.Time) {
	if c.t.pauser == nil {
		return
	}
	if (c.t.upstream != nil || c.t.spends) && !retryafter.Throttled(resp) {
		// The record holds a spent quota back without moving the
		// schedule. The Adaptive holds it itself, except in a sliding
		// window, which drains all the time: a 200 at remaining 0 from
		// httprate paused it until the reset (5d: 0.4–1.4 s a time).
		return
	}
	d, ok := c.t.policy.Pause(resp, now)
	if !ok {
		return
	}
	// The pause is for everyone, so one caller's cancel must not cut it.
	ctx, stop := context.WithTimeout(context.WithoutCancel(c.req.Context()), throttle.CancelTimeout)
	err := c.t.pauser.Pause(ctx, c.key, d)
	stop()
	if err == nil {
		c.t.pauses.Add(1) // a pause the limiter failed to record paused nothing
	}
	if f := c.t.observer.Paused; f != nil {
		f(PauseInfo{Key: c.key, StatusCode: resp.StatusCode, Duration: d, Err: err})
	}
}

// retryAfter reports whether to retry after resp, and after how long: the
// policy must allow it, and the context's deadline leave time for it.
func (c *call) retryAfter(resp *http.Response, now time.Time) (time.Duration, bool) {
	if !c.t.retry {
		return 0, false
	}
	delay, ok := c.t.policy.Next(c.req, resp, c.attempt, now)
	return delay, ok && leavesTime(c.req.Context(), delay)
}

// leavesTime reports whether ctx leaves at least d before its deadline.
func leavesTime(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) >= d
}

// rewind returns the body for another attempt of req: req's own when it
// has none, or a fresh copy from GetBody.
func rewind(req *http.Request) (body io.ReadCloser, fresh bool, err error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req.Body, false, nil
	}
	if req.GetBody == nil {
		return nil, false, errNotReplayable
	}
	body, err = req.GetBody()
	return body, err == nil, err
}

// orLast returns last when a response has arrived, and err otherwise: a
// response that was sent and received never turns into a local error.
func orLast(last *http.Response, err error) (*http.Response, error) {
	if last != nil {
		return last, nil
	}
	return nil, err
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CloseIdleConnections closes the idle connections of the base
// RoundTripper, if it has such a method, as [http.Transport] does.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.roundTripper().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *Transport) roundTripper() http.RoundTripper {
	if t.base == nil {
		return http.DefaultTransport
	}
	return t.base
}
