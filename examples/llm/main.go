// Command llm runs a batch job of 400 prompts against an LLM API that
// limits requests, input tokens and output tokens per minute, the way
// Anthropic does: token buckets that refill continuously, max_tokens held
// from the start of each call and the excess given back at its end, 429
// with retry-after beyond them. The API is embedded
// (internal/llmupstream), and its minute is compressed to a second so
// that the job takes seconds: every "per minute" below is per second of
// real time.
//
// Each prompt asks for up to 1 000 output tokens and gets 10–50% of that;
// half of the replies are streamed, with the usage in the last events.
// The job prints a progress line every "minute" (done, tokens per minute
// used against each limit, ETA) and exits non-zero if its claim fails:
// every prompt answered, at most 0.5% of calls refused with 429, the
// usage it counted equal to the API's, and at least 95% of the binding
// token limit used.
//
// The Transport books each call's estimate, {1 request, the prompt's
// tokens, max_tokens}, on three token buckets at one common slot
// (egress.WithEstimate), and the job settles it to the reply's usage
// (egress.Settle): the output budget that max_tokens overbooked comes
// back, so the job uses nearly all of the output limit, not the 30% that
// booking max_tokens alone allows. The three places to read are
// newLimiter, estimate and settle; and the queue in run, which bounds the
// calls holding an estimate at once (see the comment there).
//
// With -redis, the three buckets live in Redis (package redislimit), so
// that every process running the job shares one budget: the estimate is
// booked in one script call, and each settle rides on the next one (or
// goes on its own within redislimit.SettleDelay). The job and its claim
// are the same.
//
//	go run ./examples/llm
//	go run ./examples/llm -redis 127.0.0.1:6379
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/internal/llmupstream"
	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
	"github.com/redis/go-redis/v9"
)

// The API's published limits, per "minute".
var limits = llmupstream.Limits{
	Requests:     200,
	InputTokens:  150_000,
	OutputTokens: 30_000,
	Period:       time.Second, // a minute, compressed 60×
}

const (
	prompts   = 400
	maxTokens = 1000 // every prompt's max_tokens
	workers   = 16
	// inFlightCalls bounds the calls booked and not yet answered.
	inFlightCalls = 4
)

// prompt is one item of the job.
type prompt struct {
	tokens int    // the prompt's length in tokens
	seed   uint64 // makes the API's answer, and its length, repeatable
	stream bool
}

// work returns the job: prompts of 500 to 1 500 tokens, every other one
// streamed.
func work() []prompt {
	rng := rand.New(rand.NewPCG(14, 14))
	ps := make([]prompt, prompts)
	for i := range ps {
		ps[i] = prompt{tokens: 500 + rng.IntN(1001), seed: uint64(i + 1), stream: i%2 == 1}
	}
	return ps
}

func main() {
	addr := flag.String("redis", "", "address of a Redis to keep the budget in, shared by every process (default: in this process)")
	flag.Parse()
	if err := run(*addr); err != nil {
		fmt.Fprintln(os.Stderr, "llm:", err)
		os.Exit(1)
	}
}

func run(redisAddr string) error {
	api, err := llmupstream.New(llmupstream.Config{
		Limits: limits, FirstToken: 5 * time.Millisecond, PerToken: 50 * time.Microsecond,
	})
	if err != nil {
		return err
	}
	srv := httptest.NewServer(api)
	defer srv.Close()

	var limiter throttle.Limiter
	if redisAddr == "" {
		limiter, err = newLimiter()
	} else {
		var done func() error
		limiter, done, err = newRedisLimiter(redisAddr)
		if err == nil {
			defer done() // sends the settles still queued
		}
	}
	if err != nil {
		return err
	}
	// Every call in flight or waiting for its slot holds its estimate
	// until it settles. In process, a call asleep for its slot moves up
	// when an earlier one settles (WithMoveUp in newLimiter); a Redis
	// booking does not, so what max_tokens overestimates comes back only
	// to calls booked after the settle: bounding the calls bounds what the
	// job's last calls leave unused. Replies take tens of milliseconds, so
	// a few suffice.
	inFlight, err := queue.New(inFlightCalls, workers)
	if err != nil {
		return err
	}
	client := egress.NewClient(
		egress.WithLimiter(limiter),
		egress.WithQueue(inFlight),
		egress.WithEstimate(estimate),         // books {1, prompt tokens, max_tokens} per call
		egress.WithRetry(retryafter.Policy{}), // a 429 pauses every call, then retries
	)
	defer client.CloseIdleConnections()

	ps := work()
	var used counters
	jobs := make(chan prompt)
	errs := make(chan error, workers)
	start := time.Now()
	progress := startProgress(&used, start)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for p := range jobs {
				if err := send(client, srv.URL, p, &used); err != nil {
					errs <- err
					return
				}
			}
		})
	}
feed:
	for _, p := range ps {
		select {
		case jobs <- p:
		case err := <-errs:
			errs <- err
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	wall := time.Since(start)
	progress.stop()
	close(errs)
	for err := range errs {
		return err
	}
	return report(ps, api.Stats(), &used, wall)
}

// newLimiter mirrors the API's three limits on the client, each a token
// bucket with the recommended tolerance for jitter on the way, whose
// callers asleep for their slot move up when an earlier call settles
// (WithMoveUp). Their All books a call's three costs at one common slot,
// all or nothing.
func newLimiter() (throttle.Limiter, error) {
	tol := throttle.WithTolerance(throttle.DefaultTolerance)
	var parts []throttle.Limiter
	for _, limit := range []int{limits.Requests, limits.InputTokens, limits.OutputTokens} {
		tb, err := throttle.NewTokenBucket(throttle.Rate{N: limit, Per: limits.Period}, limit, tol, throttle.WithMoveUp())
		if err != nil {
			return nil, err
		}
		parts = append(parts, tb)
	}
	return throttle.All(parts...), nil
}

// newRedisLimiter is newLimiter with the buckets in Redis at addr: the
// budget every process of the job shares. redislimit.All books the three
// costs in one script call, and settles ride on the key's next call.
// done closes the Client, which first sends the settles still queued.
func newRedisLimiter(addr string) (l throttle.Limiter, done func() error, err error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	client, err := redislimit.NewClient(rdb, redislimit.WithPrefix("egress-example-llm:"))
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	done = func() error { return errors.Join(client.Close(), rdb.Close()) }
	var parts []redislimit.Part
	for _, limit := range []int{limits.Requests, limits.InputTokens, limits.OutputTokens} {
		tb, err := redislimit.NewTokenBucket(rdb, throttle.Rate{N: limit, Per: limits.Period}, limit,
			redislimit.WithClient(client), redislimit.WithTolerance(throttle.DefaultTolerance))
		if err != nil {
			_ = done()
			return nil, nil, err
		}
		parts = append(parts, tb)
	}
	all, err := redislimit.All(parts...)
	if err != nil {
		_ = done()
		return nil, nil, err
	}
	return all, done, nil
}

// estimate is what a call is booked at before it is sent, one cost per
// part of newLimiter's All: one request, its prompt's tokens, and
// max_tokens of output, since the output is not known until the reply
// ends. It reads them from the request's body.
func estimate(req *http.Request) ([]int, error) {
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	defer body.Close()
	var r llmupstream.Request
	if err := json.NewDecoder(body).Decode(&r); err != nil {
		return nil, fmt.Errorf("estimate: %w", err)
	}
	return []int{1, r.PromptTokens, r.MaxTokens}, nil
}

// settle is called with a reply's actual usage, once it is known: for a
// stream, on the event that states it, just before the body ends. It
// settles the call's booking to the usage, so that the output budget
// max_tokens overbooked comes back, and counts it.
func settle(resp *http.Response, u llmupstream.Usage, used *counters) error {
	used.requests.Add(1)
	used.input.Add(int64(u.InputTokens))
	used.output.Add(int64(u.OutputTokens))
	return egress.Settle(resp, 1, u.InputTokens, u.OutputTokens)
}

// send runs one prompt: book, call, read the reply, settle.
func send(client *http.Client, base string, p prompt, used *counters) error {
	body, err := json.Marshal(llmupstream.Request{PromptTokens: p.tokens, MaxTokens: maxTokens, Seed: p.seed, Stream: p.stream})
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, base+llmupstream.Path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("prompt %d: %s: %s", p.seed, resp.Status, msg)
	}
	u, err := llmupstream.ReadUsage(resp.Body, p.stream)
	if err != nil {
		return fmt.Errorf("prompt %d: %w", p.seed, err)
	}
	return settle(resp, u, used)
}

// counters is what the job has used, from the usage in the replies.
type counters struct{ requests, input, output atomic.Int64 }

// report prints the outcome and checks the claim.
func report(ps []prompt, st llmupstream.Stats, used *counters, wall time.Duration) error {
	// What the job books up front, and what it really uses: requests,
	// input tokens, output tokens.
	booked := totals{requests: len(ps)}
	for _, p := range ps {
		booked.input += p.tokens
		booked.output += maxTokens
	}
	actual := totals{requests: st.Requests, input: st.InputTokens, output: st.OutputTokens}
	limit, share := binding(actual, wall)
	perMinute := func(n int) float64 { return float64(n) / (wall.Seconds() / limits.Period.Seconds()) }

	fmt.Printf("done %d prompts in %v; the API sent %d 429s\n", used.requests.Load(), wall.Round(10*time.Millisecond), st.TooMany)
	fmt.Printf("per minute: %.0f requests of %d, %.0f input tokens of %d, %.0f output tokens of %d\n",
		perMinute(st.Requests), limits.Requests, perMinute(st.InputTokens), limits.InputTokens,
		perMinute(st.OutputTokens), limits.OutputTokens)
	fmt.Printf("the usage binds on %s: %.1f%% of that limit used; this run took %.2f× the least wall time for what was used (%v; %v had max_tokens stayed booked)\n",
		limit, 100*share, wall.Seconds()/least(actual).Seconds(), least(actual).Round(10*time.Millisecond), least(booked).Round(10*time.Millisecond))

	switch {
	case int(used.requests.Load()) != len(ps):
		return fmt.Errorf("answered %d prompts, want %d", used.requests.Load(), len(ps))
	case float64(st.TooMany) > 0.005*float64(st.Requests):
		return fmt.Errorf("the API sent %d 429s for %d calls, want at most 0.5%%", st.TooMany, st.Requests)
	case st.Requests != len(ps) || int64(st.InputTokens) != used.input.Load() || int64(st.OutputTokens) != used.output.Load():
		return fmt.Errorf("the API counted %d calls, %d input and %d output tokens; the replies said %d, %d and %d",
			st.Requests, st.InputTokens, st.OutputTokens, used.requests.Load(), used.input.Load(), used.output.Load())
	case share < 0.95:
		return fmt.Errorf("used %.1f%% of the %s limit, want at least 95%%", 100*share, limit)
	}
	return nil
}

// totals is what a job books or uses of each limit.
type totals struct{ requests, input, output int }

// perLimit lists t against each limit.
func (t totals) perLimit() []struct {
	name         string
	total, limit int
} {
	return []struct {
		name         string
		total, limit int
	}{
		{"requests", t.requests, limits.Requests},
		{"input tokens", t.input, limits.InputTokens},
		{"output tokens", t.output, limits.OutputTokens},
	}
}

// least is the shortest time in which the API admits t, starting with
// every bucket full: for each limit, what exceeds its capacity flows at
// its rate.
func least(t totals) time.Duration {
	var d time.Duration
	for _, l := range t.perLimit() {
		d = max(d, time.Duration(float64(l.total-l.limit)/float64(l.limit)*float64(limits.Period)))
	}
	return d
}

// binding returns the limit that bounds the usage t, and the share of it
// used in wall: what was used over what the API would have admitted in
// that time to a client that started with the bucket full.
func binding(t totals, wall time.Duration) (string, float64) {
	name, share := "", 0.0
	for _, l := range t.perLimit() {
		capacity := float64(l.limit) * (1 + wall.Seconds()/limits.Period.Seconds())
		if s := float64(l.total) / capacity; s > share {
			name, share = l.name, s
		}
	}
	return name, share
}

// progress prints a progress line every period until stopped.
type progress struct {
	quit chan struct{}
	wg   sync.WaitGroup
}

func startProgress(used *counters, start time.Time) *progress {
	p := &progress{quit: make(chan struct{})}
	p.wg.Go(func() {
		tick := time.NewTicker(limits.Period)
		defer tick.Stop()
		var last [3]int64
		for {
			select {
			case <-p.quit:
				return
			case <-tick.C:
			}
			now := [3]int64{used.requests.Load(), used.input.Load(), used.output.Load()}
			elapsed := time.Since(start)
			// The ETA assumes the last minute's pace holds.
			eta := "ETA -"
			if n := now[0] - last[0]; n > 0 {
				eta = fmt.Sprintf("ETA %v", (time.Duration(prompts-now[0]) * limits.Period / time.Duration(n)).Round(100*time.Millisecond))
			}
			// The last tick's usage is the last minute's.
			fmt.Printf("%5.1fs  done %3d/%d  last minute: requests %3d/%d  input %6d/%d  output %5d/%d  %s\n",
				elapsed.Seconds(), now[0], prompts, now[0]-last[0], limits.Requests,
				now[1]-last[1], limits.InputTokens, now[2]-last[2], limits.OutputTokens, eta)
			last = now
		}
	})
	return p
}

func (p *progress) stop() {
	close(p.quit)
	p.wg.Wait()
}
