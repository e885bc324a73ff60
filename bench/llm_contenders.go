package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/internal/llmupstream"
	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
	"golang.org/x/time/rate"
)

// llmClient runs one prompt, retries included, and reads its reply to
// the end.
type llmClient interface {
	do(ctx context.Context, url string, p llmPrompt) error
	close()
}

// llmContender is one row of the LLM batch. A nil build is a placeholder
// row, skipped with why. procs above 1 runs it in that many processes,
// which share a redis-server.
type llmContender struct {
	name, how, why string
	procs          int
	build          func(llmScenario, llmEnv) (llmClient, error)
	// others is the share of the API's output limit that another client,
	// which the contender cannot see, spends during the run; 0: none.
	others float64
}

// llmEnv is where a contender's client runs.
type llmEnv struct {
	redis string // the redis-server's address, for contenders with procs > 1
	procs int    // how many processes share the API
}

// llmContenders lists the LLM batch's contenders in table order.
func llmContenders() []llmContender {
	return []llmContender{
		{
			name: "egress with settle", build: llmEgressSettle(0),
			how: "`egress.NewClient` with `throttle.All` of three token buckets at the published limits (a minute's worth of burst, `WithTolerance(DefaultTolerance)`, `WithMoveUp()`), " +
				"`egress.WithEstimate` booking {1, prompt tokens, max_tokens} (read from the request's body through GetBody) at one common slot with `ReserveParts`, " +
				"and `egress.Settle(resp, 1, usage.input_tokens, usage.output_tokens)` once the usage is read (for a stream, from its last events); `WithRetry(retryafter.Policy{})`. " +
				"No bound on the calls in flight: a call asleep for its slot moves up when an earlier one settles (throttle's \"Moving up\", `WithMoveUp`, in process only).",
		},
		{
			name: "egress with settle, 4 in flight", build: llmEgressSettle(4),
			how: "as egress with settle, plus `egress.WithQueue(queue.New(4, 16))`: at most 4 calls booked and not yet answered, the rest wait in the Transport's line before booking. " +
				"Before sleepers moved up, this bound was what met the goal in one process; through Redis, where a booking does not move up, it still is (the rows with 1 and 2 in flight per process).",
		},
		{
			name: "egress (estimate only)", build: llmEgressEstimate,
			how: "today's best: `egress.NewClient` with `throttle.All` of three token buckets at the published limits (a minute's worth of burst, `WithTolerance(DefaultTolerance)`), " +
				"each charged its part of the estimate (1, prompt tokens, max_tokens) through a small Limiter adapter that reads it from the request's context, since the Transport passes one cost; " +
				"`WithRetry(retryafter.Policy{})`. Nothing is given back when the reply uses less than max_tokens.",
		},
		{
			name: "x/time/rate WaitN(max_tokens)", build: llmXRate,
			how: "the common hand-rolled approach: three `rate.Limiter`s at the published limits with a minute's worth of burst; before each attempt `Wait(ctx)`, `WaitN(ctx, prompt tokens)`, `WaitN(ctx, max_tokens)`; " +
				"on a 429, sleep the Retry-After and try again.",
		},
		{
			name: "cookbook (75% headroom)", build: llmCookbook,
			how: "the OpenAI cookbook's `api_request_parallel_processor.py`, adapted to separate input and output limits: capacities refilled continuously, each call debits its estimate (1 request, prompt tokens, max_tokens) and never settles, " +
				"a dispatcher that polls every 1 ms, and after a 429 no call starts for 15 s (scaled with the minute: 250 ms here), then the call is retried (at most 5 attempts). " +
				"Limits set to 75% of the published ones, the lighter of the cookbook's advised 50–75% headroom.",
		},
		{
			name: "egress with settle (redislimit, 4 processes)", procs: 4, build: llmEgressSettleRedis(0, false),
			how: "as egress with settle, on one `redislimit.All` of three `redislimit.NewTokenBucket`s (`WithTolerance(DefaultTolerance)`) on one `redislimit.Client` (`WithTimeout(5 * time.Second)`: a loaded machine must not fail calls closed), shared by 4 processes that split the prompts: " +
				"`WithEstimate`'s three costs are booked in one script call with `Composite.ReserveParts`, and each `egress.Settle` is queued in the process and rides on the key's next script call, or goes on its own after `redislimit.SettleDelay` (100 ms).",
		},
		{
			name: "egress with settle (redislimit, 4 processes, 1 in flight each)", procs: 4, build: llmEgressSettleRedis(1, false),
			how: "as egress with settle (redislimit, 4 processes), plus `egress.WithQueue(queue.New(1, 16))` in each process: 4 calls booked and not yet answered in all, as in the row egress with settle, 4 in flight.",
		},
		{
			name: "egress with settle (redislimit, 4 processes, 2 in flight each)", procs: 4, build: llmEgressSettleRedis(2, false),
			how: "as egress with settle (redislimit, 4 processes), plus `egress.WithQueue(queue.New(2, 16))` in each process: 8 calls booked and not yet answered in all.",
		},
		{
			name: "egress with settle (redislimit, 4 processes, 1 in flight each), another client spends 20%", procs: 4, build: llmEgressSettleRedis(1, false), others: 0.2,
			how: "as egress with settle (redislimit, 4 processes, 1 in flight each), while another client, unseen by the budget, sends the API a call of max_tokens 1000 every 50 ms: about 20% of the output limit.",
		},
		{
			name: "egress with settle (redislimit, 4 processes, 1 in flight each, WithStated), another client spends 20%", procs: 4, build: llmEgressSettleRedis(1, true), others: 0.2,
			how: "as the row before, with the input and output buckets built with `redislimit.WithStated(\"input-tokens\")` and `WithStated(\"output-tokens\")`: the API's `anthropic-ratelimit-*-tokens-remaining` headers, read by each process's Transport, tighten the shared buckets in Redis, in the script calls the processes make anyway.",
		},
		{
			name: "egress estimate only (redislimit, 4 processes)", procs: 4, build: llmEgressRedis,
			how: "as egress (estimate only), on three `redislimit.NewTokenBucket`s with `redislimit.WithTolerance(DefaultTolerance)` and `WithTimeout(5 * time.Second)` (a loaded machine must not fail calls closed), shared by 4 processes that split the prompts; " +
				"`throttle.All` reserves the three parts one by one, one round trip each, as it does today for a limiter with one cost per call; the settle rows book all three in one script call with `redislimit.All`'s `ReserveParts`.",
		},
		{
			name: "hand-rolled settle (reference)", build: llmSettleReference,
			how: "not a library: the cookbook's tracker at 100% of the published limits, less `DefaultTolerance` (10 ms) of each rate, that settles, giving the output capacity back what max_tokens overestimated when each reply ends, as the API's own bucket does. " +
				"It shows what settling alone allows against this API, in one process.",
		},
	}
}

// llmHTTP is the HTTP client below every LLM contender.
func llmHTTP(rt func(http.RoundTripper) http.RoundTripper) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	var base http.RoundTripper = t
	if rt != nil {
		base = rt(t)
	}
	return &http.Client{Transport: base}
}

// llmPost sends one attempt of p and reads the reply to its end. It
// returns the status, and the Retry-After of a 429 (1 s when missing).
// settle, when not nil, is given a successful reply's usage once its
// body has been read to the end.
func llmPost(ctx context.Context, hc *http.Client, url string, p llmPrompt, maxTokens int, settle func(*http.Response, llmupstream.Usage)) (int, time.Duration, error) {
	body, err := json.Marshal(llmupstream.Request{PromptTokens: p.tokens, MaxTokens: maxTokens, Seed: p.seed, Stream: p.stream})
	if err != nil {
		return 0, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		u, err := llmupstream.ReadUsage(resp.Body, p.stream)
		if err == nil && settle != nil {
			settle(resp, u)
		}
		return resp.StatusCode, 0, err
	case http.StatusTooManyRequests:
		_, _ = io.Copy(io.Discard, resp.Body)
		wait := time.Second
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n >= 0 {
			wait = time.Duration(n) * time.Second
		}
		return resp.StatusCode, wait, nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, 0, fmt.Errorf("%s: %s", resp.Status, msg)
}

// --- egress with settle ---

// llmEgressSettle returns the build of an egress client that settles,
// with at most inFlight calls booked and not yet answered (0: no bound).
func llmEgressSettle(inFlight int) func(llmScenario, llmEnv) (llmClient, error) {
	return func(sc llmScenario, env llmEnv) (llmClient, error) {
		opts := []egress.Option{egress.WithEstimate(llmEstimateOf), egress.WithRetry(retryafter.Policy{})}
		if inFlight > 0 {
			q, err := queue.New(inFlight, sc.workers)
			if err != nil {
				return nil, err
			}
			opts = append(opts, egress.WithQueue(q))
		}
		return newLLMSettleClient(sc, opts)
	}
}

func newLLMSettleClient(sc llmScenario, opts []egress.Option) (llmClient, error) {
	tol := throttle.WithTolerance(throttle.DefaultTolerance)
	var parts []throttle.Limiter
	for _, limit := range []int{sc.limits.Requests, sc.limits.InputTokens, sc.limits.OutputTokens} {
		tb, err := throttle.NewTokenBucket(throttle.Rate{N: limit, Per: sc.limits.Period}, limit, tol, throttle.WithMoveUp())
		if err != nil {
			return nil, err
		}
		parts = append(parts, tb)
	}
	hc := llmHTTP(func(base http.RoundTripper) http.RoundTripper {
		return egress.NewTransport(base, append([]egress.Option{egress.WithLimiter(throttle.All(parts...))}, opts...)...)
	})
	return &llmSettleClient{hc: hc, maxTokens: sc.maxTokens}, nil
}

// llmEstimateOf books a call at 1 request, its prompt's tokens and its
// max_tokens, read from the request's body.
func llmEstimateOf(req *http.Request) ([]int, error) {
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	defer body.Close()
	var r llmupstream.Request
	if err := json.NewDecoder(body).Decode(&r); err != nil {
		return nil, err
	}
	return []int{1, r.PromptTokens, r.MaxTokens}, nil
}

type llmSettleClient struct {
	hc        *http.Client
	maxTokens int
}

func (c *llmSettleClient) do(ctx context.Context, url string, p llmPrompt) error {
	var settleErr error
	status, _, err := llmPost(ctx, c.hc, url, p, c.maxTokens, func(resp *http.Response, u llmupstream.Usage) {
		settleErr = egress.Settle(resp, 1, u.InputTokens, u.OutputTokens)
	})
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("status %d after egress's retries", status)
	}
	if err == nil {
		err = settleErr
	}
	return err
}

func (c *llmSettleClient) close() { c.hc.CloseIdleConnections() }

// --- egress, estimate only ---

// llmEstimate is a prompt's estimate, carried in its request's context.
type llmEstimate struct{ requests, input, output int }

type llmEstimateKey struct{}

// llmPart is one limit, charged its share of the estimate in the
// request's context, because the Transport passes one cost to its
// limiter. Issue 14's per-part costs replace it.
type llmPart struct {
	l  throttle.Limiter
	of func(llmEstimate) int
}

func (p llmPart) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*throttle.Reservation, error) {
	if e, ok := ctx.Value(llmEstimateKey{}).(llmEstimate); ok {
		n = p.of(e)
	}
	return p.l.Reserve(ctx, key, n, maxWait)
}

func (p llmPart) Pause(ctx context.Context, key string, d time.Duration) error {
	if pl, ok := p.l.(throttle.Pauser); ok {
		return pl.Pause(ctx, key, d)
	}
	return nil
}

// llmShares lists the three limits of sc with the share of an estimate
// each is charged.
func llmShares(sc llmScenario) []struct {
	limit int
	of    func(llmEstimate) int
} {
	return []struct {
		limit int
		of    func(llmEstimate) int
	}{
		{sc.limits.Requests, func(e llmEstimate) int { return e.requests }},
		{sc.limits.InputTokens, func(e llmEstimate) int { return e.input }},
		{sc.limits.OutputTokens, func(e llmEstimate) int { return e.output }},
	}
}

func llmEgressEstimate(sc llmScenario, _ llmEnv) (llmClient, error) {
	tol := throttle.WithTolerance(throttle.DefaultTolerance)
	var parts []throttle.Limiter
	for _, l := range llmShares(sc) {
		tb, err := throttle.NewTokenBucket(throttle.Rate{N: l.limit, Per: sc.limits.Period}, l.limit, tol)
		if err != nil {
			return nil, err
		}
		parts = append(parts, llmPart{l: tb, of: l.of})
	}
	return newLLMEgressClient(sc, throttle.All(parts...)), nil
}

func newLLMEgressClient(sc llmScenario, l throttle.Limiter) *llmEgressClient {
	hc := llmHTTP(func(base http.RoundTripper) http.RoundTripper {
		return egress.NewTransport(base, egress.WithLimiter(l), egress.WithRetry(retryafter.Policy{}))
	})
	return &llmEgressClient{hc: hc, maxTokens: sc.maxTokens}
}

// llmEgressRedis is llmEgressEstimate with its buckets in Redis.
func llmEgressRedis(sc llmScenario, env llmEnv) (llmClient, error) {
	rt := &roundTrips{}
	rdb := countingClient(env.redis, 4*sc.workers, rt)
	closers := []func() error{rdb.Close}
	var parts []throttle.Limiter
	for _, l := range llmShares(sc) {
		// Redis gets 5 s before failing closed, so that a loaded machine
		// does not turn slow replies into refused prompts.
		tb, err := redislimit.NewTokenBucket(rdb, throttle.Rate{N: l.limit, Per: sc.limits.Period}, l.limit,
			redislimit.WithTolerance(throttle.DefaultTolerance), redislimit.WithTimeout(5*time.Second))
		if err != nil {
			for _, f := range closers {
				_ = f()
			}
			return nil, err
		}
		closers = append([]func() error{tb.Close}, closers...)
		parts = append(parts, llmPart{l: tb, of: l.of})
	}
	c := newLLMEgressClient(sc, throttle.All(parts...))
	c.rt, c.closers = rt, closers
	return c, nil
}

type llmEgressClient struct {
	hc        *http.Client
	maxTokens int
	rt        *roundTrips    // nil unless in Redis
	closers   []func() error // run by close, in order
}

func (c *llmEgressClient) redisRoundTrips() int64 {
	if c.rt == nil {
		return 0
	}
	return c.rt.n.Load()
}

func (c *llmEgressClient) do(ctx context.Context, url string, p llmPrompt) error {
	ctx = context.WithValue(ctx, llmEstimateKey{}, llmEstimate{requests: 1, input: p.tokens, output: c.maxTokens})
	status, _, err := llmPost(ctx, c.hc, url, p, c.maxTokens, nil)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("status %d after egress's retries", status)
	}
	return err
}

func (c *llmEgressClient) close() {
	c.hc.CloseIdleConnections()
	for _, f := range c.closers {
		_ = f()
	}
}

// --- x/time/rate ---

func llmXRate(sc llmScenario, _ llmEnv) (llmClient, error) {
	lim := func(n int) *rate.Limiter {
		return rate.NewLimiter(rate.Limit(float64(n)/sc.limits.Period.Seconds()), n)
	}
	return &llmXRateClient{
		hc: llmHTTP(nil), maxTokens: sc.maxTokens,
		requests: lim(sc.limits.Requests), input: lim(sc.limits.InputTokens), output: lim(sc.limits.OutputTokens),
	}, nil
}

type llmXRateClient struct {
	hc                      *http.Client
	maxTokens               int
	requests, input, output *rate.Limiter
}

func (c *llmXRateClient) do(ctx context.Context, url string, p llmPrompt) error {
	for range 20 {
		if err := c.requests.Wait(ctx); err != nil {
			return err
		}
		if err := c.input.WaitN(ctx, p.tokens); err != nil {
			return err
		}
		if err := c.output.WaitN(ctx, c.maxTokens); err != nil {
			return err
		}
		status, wait, err := llmPost(ctx, c.hc, url, p, c.maxTokens, nil)
		if err != nil || status == http.StatusOK {
			return err
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
	return errRetries
}

func (c *llmXRateClient) close() { c.hc.CloseIdleConnections() }

// --- the cookbook ---

// cookbookHeadroom is the share of each published limit the cookbook
// client is set to.
const cookbookHeadroom = 0.75

func llmCookbook(sc llmScenario, _ llmEnv) (llmClient, error) {
	return newTracker(sc, cookbookHeadroom, false), nil
}

// llmSettleReference is the cookbook's tracker at the full published
// limits that settles: when a reply ends, the output capacity gets back
// what max_tokens overestimated, as the API's own bucket does. It is not
// a library; it shows what settling alone allows against this API.
//
// It keeps DefaultTolerance's worth of each rate out of the capacities,
// as egress's WithTolerance does: a mirror of a full bucket refills while
// its first calls are on the way, and the API's, still full, does not, so
// without it the mirror runs ahead of the API by that much and gets 429s.
func llmSettleReference(sc llmScenario, _ llmEnv) (llmClient, error) {
	return newTracker(sc, 1, true), nil
}

func newTracker(sc llmScenario, headroom float64, settle bool) *llmCookbookClient {
	scale := sc.limits.Period.Seconds() / 60
	c := &llmCookbookClient{
		hc: llmHTTP(nil), maxTokens: sc.maxTokens,
		pause:   time.Duration(15 * scale * float64(time.Second)),
		updated: time.Now(),
	}
	if settle {
		c.settle = c.giveBack
	}
	for i, n := range []int{sc.limits.Requests, sc.limits.InputTokens, sc.limits.OutputTokens} {
		c.max[i] = headroom * float64(n)
		if settle {
			c.max[i] -= throttle.DefaultTolerance.Seconds() * float64(n) / sc.limits.Period.Seconds()
		}
		c.available[i] = c.max[i]
		c.perSecond[i] = c.max[i] / sc.limits.Period.Seconds()
	}
	return c
}

// giveBack returns to the output capacity what max_tokens overestimated.
func (c *llmCookbookClient) giveBack(_ *http.Response, u llmupstream.Usage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.available[2] = min(c.available[2]+float64(c.maxTokens-u.OutputTokens), c.max[2])

}

// llmCookbookClient is the cookbook's status tracker and capacity
// accounting, shared by every goroutine.
type llmCookbookClient struct {
	hc        *http.Client
	maxTokens int
	pause     time.Duration
	settle    func(*http.Response, llmupstream.Usage) // nil: never settles

	mu          sync.Mutex
	max         [3]float64 // requests, input, output
	perSecond   [3]float64
	available   [3]float64
	updated     time.Time
	lastLimited time.Time
}

// take debits need from the capacities if they hold it and no 429 came
// in the last pause, as the cookbook's main loop does.
func (c *llmCookbookClient) take(need [3]float64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if now.Sub(c.lastLimited) < c.pause {
		return false
	}
	elapsed := now.Sub(c.updated).Seconds()
	c.updated = now
	for i := range c.available {
		c.available[i] = min(c.available[i]+c.perSecond[i]*elapsed, c.max[i])
	}
	for i := range need {
		if c.available[i] < need[i] {
			return false
		}
	}
	for i := range need {
		c.available[i] -= need[i]
	}
	return true
}

func (c *llmCookbookClient) do(ctx context.Context, url string, p llmPrompt) error {
	need := [3]float64{1, float64(p.tokens), float64(c.maxTokens)}
	for range 5 { // the cookbook's max_attempts
		for !c.take(need) {
			if err := sleep(ctx, time.Millisecond); err != nil {
				return err
			}
		}
		status, _, err := llmPost(ctx, c.hc, url, p, c.maxTokens, c.settle)
		if err != nil || status == http.StatusOK {
			return err
		}
		c.mu.Lock()
		c.lastLimited = time.Now()
		c.mu.Unlock()
	}
	return errRetries
}

func (c *llmCookbookClient) close() { c.hc.CloseIdleConnections() }
