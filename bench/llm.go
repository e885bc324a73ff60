package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egress-go/egress/bench/internal/redisserver"
	"github.com/egress-go/egress/internal/llmupstream"
	"github.com/redis/go-redis/v9"
)

// llmScenario is the "LLM batch" part (issue 14): a batch of prompts
// against an API that limits requests, input tokens and output tokens per
// minute as Anthropic does (internal/llmupstream). Its minute is
// compressed to a second.
type llmScenario struct {
	limits    llmupstream.Limits
	prompts   int
	maxTokens int
	workers   int
	// The API's generation time: FirstToken, then PerToken per output
	// token.
	firstToken, perToken time.Duration
}

// llmBatch returns the scenario, small with smoke.
func llmBatch(smoke bool) llmScenario {
	sc := llmScenario{
		limits:     llmupstream.Limits{Requests: 200, InputTokens: 150_000, OutputTokens: 30_000, Period: time.Second},
		prompts:    600,
		maxTokens:  1000,
		workers:    16,
		firstToken: 5 * time.Millisecond, perToken: 50 * time.Microsecond,
	}
	if smoke {
		sc.prompts = 100
	}
	return sc
}

// llmPrompt is one prompt of the job.
type llmPrompt struct {
	tokens int
	seed   uint64
	stream bool
}

// work returns the job, the same for every contender: prompts of 500 to
// 1 500 tokens, every other one streamed. Each asks for maxTokens and
// gets 10–50% of it (llmupstream.Output of its seed).
func (sc llmScenario) work() []llmPrompt {
	rng := rand.New(rand.NewPCG(14, 14))
	ps := make([]llmPrompt, sc.prompts)
	for i := range ps {
		ps[i] = llmPrompt{tokens: 500 + rng.IntN(1001), seed: uint64(i + 1), stream: i%2 == 1}
	}
	return ps
}

// llmLimit is one of the API's limits and what the job truly uses of it.
type llmLimit struct {
	name  string
	limit int
	used  func(llmupstream.Stats) int
	total int // what the whole job uses, from the actual usage
}

// limitsUsed lists the three limits with the job's actual usage of each.
func (sc llmScenario) limitsUsed() []llmLimit {
	var in, out int
	for _, p := range sc.work() {
		in += p.tokens
		out += llmupstream.Output(sc.maxTokens, p.seed)
	}
	return []llmLimit{
		{"requests", sc.limits.Requests, func(s llmupstream.Stats) int { return s.Requests }, sc.prompts},
		{"input tokens", sc.limits.InputTokens, func(s llmupstream.Stats) int { return s.InputTokens }, in},
		{"output tokens", sc.limits.OutputTokens, func(s llmupstream.Stats) int { return s.OutputTokens }, out},
	}
}

// binding returns the limit that bounds the job's true usage, and the
// least wall time that usage allows: starting with every bucket full,
// what exceeds a limit's capacity flows at its rate, and the last call
// takes its generation time (the mean).
func (sc llmScenario) binding() (llmLimit, time.Duration) {
	ls := sc.limitsUsed()
	best, least := ls[0], time.Duration(-1)
	for _, l := range ls {
		d := time.Duration(float64(l.total-l.limit) / float64(l.limit) * float64(sc.limits.Period))
		if d > least {
			best, least = l, d
		}
	}
	mean := time.Duration(float64(ls[2].total) / float64(sc.prompts) * float64(sc.perToken))
	return best, max(least, 0) + sc.firstToken + mean
}

// llmRow is one contender's result.
type llmRow struct {
	contender  string
	skipped    string
	wall       time.Duration
	ok, fail   int
	stats      llmupstream.Stats
	roundTrips int64         // Redis round trips the clients counted
	scripts    int64         // scripts Redis ran (EVALSHA and EVAL in INFO commandstats)
	firstDone  time.Duration // when the first worker process finished its share
	others     int           // output tokens another client spent (contender's others)
	err        string
}

// runLLM runs every contender through the LLM batch, prints a line each,
// and writes LLM.md into the output directory.
func (h *harness) runLLM(ctx context.Context) error {
	sc := llmBatch(h.smoke)
	var rows []llmRow
	for _, c := range llmContenders() {
		if only := os.Getenv("BENCH_LLM_ONLY"); only != "" && !strings.Contains(c.name, only) {
			continue // for development: BENCH_LLM_ONLY=<part of a contender's name>
		}
		r, err := h.runLLMOnce(ctx, sc, c)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		if r.skipped != "" {
			h.note("LLM batch: %s skipped: %s", c.name, r.skipped)
		} else {
			fmt.Printf("   %-28s %s\n", c.name, llmLine(sc, r))
		}
		rows = append(rows, r)
	}
	h.note("LLM batch (issue 14): results in LLM.md beside this file")
	return writeLLM(h.out, h.smoke, sc, rows)
}

// runLLMOnce runs one contender against a fresh API: in this process,
// or, when it asks for several, in that many worker processes sharing the
// API and the redis-server.
func (h *harness) runLLMOnce(ctx context.Context, sc llmScenario, c llmContender) (llmRow, error) {
	r := llmRow{contender: c.name}
	switch {
	case c.build == nil:
		r.skipped = c.why
		return r, nil
	case c.procs > 1 && h.redis == nil:
		r.skipped = "redis-server is not installed"
		return r, nil
	}
	api, err := llmupstream.New(llmupstream.Config{Limits: sc.limits, FirstToken: sc.firstToken, PerToken: sc.perToken})
	if err != nil {
		return r, err
	}
	srv := httptest.NewServer(api)
	defer srv.Close()
	url := srv.URL + llmupstream.Path
	if c.others > 0 {
		stop := spendOthers(api, sc, c.others, &r.others)
		defer stop()
	}
	if c.procs > 1 {
		err = h.runLLMProcs(ctx, sc, c, url, &r)
	} else {
		err = runLLMHere(ctx, sc, c, url, &r)
	}
	if err != nil {
		return r, err
	}
	r.stats = api.Stats()
	if c.others > 0 {
		h.note("LLM batch: %s: the other client spent %d output tokens; the batch used %.1f%% of what it left", c.name, r.others, 100*sc.leftUsed(r))
	}
	switch {
	case r.ok+r.fail != sc.prompts:
		return r, fmt.Errorf("finished %d prompts, want %d (first error: %s)", r.ok+r.fail, sc.prompts, r.err)
	case r.stats.Requests == 0:
		return r, fmt.Errorf("the API admitted nothing (first error: %s)", r.err)
	}
	return r, nil
}

// runLLMHere runs every prompt from this process.
func runLLMHere(ctx context.Context, sc llmScenario, c llmContender, url string, r *llmRow) error {
	cl, err := c.build(sc, llmEnv{procs: 1})
	if err != nil {
		return err
	}
	defer cl.close()
	start := time.Now()
	var next atomic.Int64
	out := runPrompts(ctx, cl, url, sc.work(), sc.workers, func() (int64, error) { return next.Add(1) - 1, nil })
	r.wall = time.Since(start)
	r.ok, r.fail, r.err = out.OK, out.Failed, out.Err
	return nil
}

// llmOutcome is what a run of prompts reports.
type llmOutcome struct {
	OK         int    `json:"ok"`
	Failed     int    `json:"failed"`
	Err        string `json:"err,omitempty"`
	End        int64  `json:"end"` // Unix ns when the last prompt finished
	RoundTrips int64  `json:"round_trips"`
}

// runPrompts runs ps from workers goroutines on cl, each taking the
// index of its next prompt from next until it runs past ps.
func runPrompts(ctx context.Context, cl llmClient, url string, ps []llmPrompt, workers int, next func() (int64, error)) llmOutcome {
	var (
		ok, fail atomic.Int64
		firstErr atomic.Value
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				i, err := next()
				if err != nil {
					firstErr.CompareAndSwap(nil, err.Error())
					return
				}
				if i >= int64(len(ps)) {
					return
				}
				if err := cl.do(ctx, url, ps[i]); err != nil {
					firstErr.CompareAndSwap(nil, err.Error())
					fail.Add(1)
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	out := llmOutcome{OK: int(ok.Load()), Failed: int(fail.Load()), End: time.Now().UnixNano()}
	if e, isStr := firstErr.Load().(string); isStr {
		out.Err = e
	}
	if rc, isRedis := cl.(interface{ redisRoundTrips() int64 }); isRedis {
		out.RoundTrips = rc.redisRoundTrips()
	}
	return out
}

// llmWorkerEnv carries an LLM worker's job, as JSON, to a copy of the
// bench binary started as a separate process.
const llmWorkerEnv = "EGRESS_BENCH_LLM_WORKER"

// llmJob is one worker process's part in the LLM batch.
type llmJob struct {
	Contender string `json:"contender"`
	URL       string `json:"url"`
	Redis     string `json:"redis"`
	Smoke     bool   `json:"smoke"`
	Procs     int    `json:"procs"`
	StartAt   int64  `json:"start_at"` // Unix ns; every worker starts then
}

// llmNextKey is the Redis counter from which the worker processes take
// the index of their next prompt, as the workers of a job share its work
// queue: a process slowed by a busy machine leaves its prompts to the
// others instead of ending the job late. Its INCR runs on a client of its
// own, out of the round trips counted, and is no script.
const llmNextKey = "bench:llm:next"

// runLLMProcs runs the prompts from c.procs worker processes that start
// together and share the job's prompts.
func (h *harness) runLLMProcs(ctx context.Context, sc llmScenario, c llmContender, url string, r *llmRow) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := redisserver.ResetStats(ctx, h.rdb); err != nil { // and a fresh budget and work queue
		return err
	}
	start := time.Now().Add(700 * time.Millisecond)
	outs := make([]llmOutcome, c.procs)
	errs := make([]error, c.procs)
	var wg sync.WaitGroup
	for i := range c.procs {
		job := llmJob{
			Contender: c.name, URL: url, Redis: h.redis.Addr, Smoke: h.smoke, Procs: c.procs, StartAt: start.UnixNano(),
		}
		raw, err := json.Marshal(job)
		if err != nil {
			return err
		}
		wg.Go(func() {
			cmd := exec.Command(self)
			cmd.Env = append(os.Environ(), llmWorkerEnv+"="+string(raw))
			cmd.Stderr = os.Stderr
			var stdout strings.Builder
			cmd.Stdout = &stdout
			runErr := cmd.Run()
			if err := json.Unmarshal([]byte(stdout.String()), &outs[i]); err != nil {
				errs[i] = fmt.Errorf("LLM worker %d: %v (output %q, exit %v)", i, err, stdout.String(), runErr)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	calls, err := redisserver.Calls(ctx, h.rdb) // the workers closed their Clients: every settle was sent
	if err != nil {
		return err
	}
	r.scripts = calls["evalsha"] + calls["eval"]
	for _, o := range outs {
		r.ok += o.OK
		r.fail += o.Failed
		r.roundTrips += o.RoundTrips
		r.wall = max(r.wall, time.Unix(0, o.End).Sub(start))
		if d := time.Unix(0, o.End).Sub(start); r.firstDone == 0 || d < r.firstDone {
			r.firstDone = d
		}
		if r.err == "" {
			r.err = o.Err
		}
	}
	return nil
}

// runLLMWorker is an LLM worker process's main.
func runLLMWorker(raw string) int {
	var job llmJob
	if err := json.Unmarshal([]byte(raw), &job); err != nil {
		fmt.Fprintln(os.Stderr, "bench LLM worker: bad job:", err)
		return 2
	}
	out := func() llmOutcome {
		sc := llmBatch(job.Smoke)
		for _, c := range llmContenders() {
			if c.name != job.Contender || c.build == nil {
				continue
			}
			cl, err := c.build(sc, llmEnv{redis: job.Redis, procs: job.Procs})
			if err != nil {
				return llmOutcome{Err: err.Error()}
			}
			defer cl.close()
			work := redis.NewClient(&redis.Options{Addr: job.Redis})
			defer work.Close()
			ctx := context.Background()
			next := func() (int64, error) { // INCR counts from 1
				n, err := work.Incr(ctx, llmNextKey).Result()
				return n - 1, err
			}
			time.Sleep(time.Until(time.Unix(0, job.StartAt)))
			return runPrompts(ctx, cl, job.URL, sc.work(), max(sc.workers/job.Procs, 1), next)
		}
		return llmOutcome{Err: "unknown contender " + job.Contender}
	}()
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		return 2
	}
	return 0
}

// share is the share of the binding limit r used: what the API counted
// of it over what it would have admitted in r's wall time to a client
// that started with the bucket full.
func (sc llmScenario) share(r llmRow) float64 {
	b, _ := sc.binding()
	capacity := float64(b.limit) * (1 + r.wall.Seconds()/sc.limits.Period.Seconds())
	return float64(b.used(r.stats)) / capacity
}

// spendOthers starts another client that spends share of the API's
// output limit, unseen by the contender: a call of max_tokens 1000 (which
// uses 30% of it on average) at the pace that makes share, straight to
// the API. It counts the output tokens it got into spent; stop ends it
// and waits.
func spendOthers(api *llmupstream.API, sc llmScenario, share float64, spent *int) (stop func()) {
	const maxTokens = 1000
	every := time.Duration(float64(sc.limits.Period) * maxTokens * 0.3 / (share * float64(sc.limits.OutputTokens)))
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for seed := uint64(1 << 32); ; seed++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			wg.Go(func() {
				body, _ := json.Marshal(llmupstream.Request{PromptTokens: 200, MaxTokens: maxTokens, Seed: seed})
				rec := httptest.NewRecorder()
				api.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, llmupstream.Path, bytes.NewReader(body)))
				if rec.Code != http.StatusOK {
					return
				}
				if u, err := llmupstream.ReadUsage(rec.Body, false); err == nil {
					mu.Lock()
					*spent += u.OutputTokens
					mu.Unlock()
				}
			})
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// leftUsed is the share of what another client left of the output limit
// that the batch used, over r's wall time.
func (sc llmScenario) leftUsed(r llmRow) float64 {
	capacity := float64(sc.limits.OutputTokens) * (1 + r.wall.Seconds()/sc.limits.Period.Seconds())
	return float64(r.stats.OutputTokens-r.others) / (capacity - float64(r.others))
}

func llmLine(sc llmScenario, r llmRow) string {
	_, least := sc.binding()
	s := fmt.Sprintf("wall %7.3fs (%.2f× the least %.3fs)  429s/request %.4f  binding limit used %5.1f%%  ok %d  failed %d",
		r.wall.Seconds(), r.wall.Seconds()/least.Seconds(), least.Seconds(), float64(r.stats.TooMany)/float64(sc.prompts), 100*sc.share(r), r.ok, r.fail)
	if r.roundTrips > 0 {
		s += fmt.Sprintf("  Redis scripts/request %.3f  round trips/request %.2f", float64(r.scripts)/float64(sc.prompts), float64(r.roundTrips)/float64(sc.prompts))
	}
	if r.firstDone > 0 {
		s += fmt.Sprintf("  first process done at %.3fs", r.firstDone.Seconds())
	}
	if r.others > 0 {
		s += fmt.Sprintf("  another client spent %d output tokens; the batch used %.1f%% of what was left", r.others, 100*sc.leftUsed(r))
	}
	if r.err != "" {
		s += "  first error: " + r.err
	}
	return s
}

// writeLLM writes LLM.md.
func writeLLM(dir string, smoke bool, sc llmScenario, rows []llmRow) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	bind, least := sc.binding()
	p("# LLM batch (issue 14)\n\n")
	if smoke {
		p("**Smoke run**: scaled down to seconds. These numbers only show that the harness works.\n\n")
	}
	p("Generated by `cd bench && %s` on %s, Go %s, %d cores, load average at the end %s.\n\n", strings.Join(append([]string{"go run ."}, os.Args[1:]...), " "),
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.Version(), runtime.NumCPU(), loadAverage())
	p("%d prompts of 500–1 500 input tokens, each with max_tokens %d, every other one streamed, from %d goroutines in all (in one process, or split evenly between the processes of the Redis rows, which start together, share the API, and take their next prompt from one counter in Redis, as the workers of a job share its work queue), ", sc.prompts, sc.maxTokens, sc.workers)
	p("against `internal/llmupstream`: %d requests, %d input tokens and %d output tokens per minute, the minute compressed to %v. ",
		sc.limits.Requests, sc.limits.InputTokens, sc.limits.OutputTokens, sc.limits.Period)
	p("Each limit is a token bucket that holds a minute's worth and refills continuously; a call is admitted only if all three hold what it asks for, max_tokens for the output, ")
	p("and the output bucket gets back what max_tokens overestimated when the reply ends, as Anthropic documents. Replies take %v plus %v per output token; ", sc.firstToken, sc.perToken)
	p("outputs are 10–50%% of max_tokens (30%% on average), the same for every contender. Each contender gets a fresh API.\n\n")
	p("The true usage binds on **%s**: it allows a least wall time of %.3f s (every bucket full at the start, the excess at the limit's rate, plus one reply's mean generation time).\n\n", bind.name, least.Seconds())
	p("| contender | wall | vs least | 429s per request | %s limit used | Redis scripts per request | Redis round trips per request | ok / failed |\n|---|---:|---:|---:|---:|---:|---:|---:|\n", bind.name)
	for _, r := range rows {
		if r.skipped != "" {
			p("| %s | skipped: %s | | | | | | |\n", r.contender, r.skipped)
			continue
		}
		scripts, rt := "–", "–"
		if r.roundTrips > 0 {
			scripts = fmt.Sprintf("%.3f", float64(r.scripts)/float64(sc.prompts))
			rt = fmt.Sprintf("%.2f", float64(r.roundTrips)/float64(sc.prompts))
		}
		p("| %s | %.3f s | %.2f× | %.4f | %.1f%% | %s | %s | %d / %d |\n", r.contender, r.wall.Seconds(), r.wall.Seconds()/least.Seconds(),
			float64(r.stats.TooMany)/float64(sc.prompts), 100*sc.share(r), scripts, rt, r.ok, r.fail)
	}
	p("\n**%s limit used**: the %s the API counted over what it would have admitted in the same wall time to a client that started with the bucket full (a minute's worth, then the rate). ", bind.name, bind.name)
	p("**vs least**: wall over the least wall time above. **Redis scripts**: the scripts Redis ran (EVALSHA and EVAL calls in `INFO commandstats`, reset before the row, with the data) per prompt, settles included: the workers close their Clients, which send the settles still queued, before the count is read; this is the issue's \"≤ 1.05 Redis round trips per request\". **Redis round trips**: commands and pipelines the clients sent to Redis (a go-redis hook), connection handshakes and the pause subscription included, per prompt; calls made while another is on the wire share one pipeline. The issue's goals for egress with settle: ≥ 95%% of the binding limit, ≤ 0.5%% 429s, ≤ 1.05× the least; with 4 processes through Redis, also ≤ 1.05 Redis round trips per request.\n\n")
	for _, r := range rows {
		if r.others > 0 {
			p("**%s**: another client spent %d output tokens (%.1f%% of what the limit allowed in the row's wall time); the batch used %.1f%% of what it left. The issue's goal (issue 13): ≤ 0.5%% 429s, ≥ 95%% of what is left used.\n\n",
				r.contender, r.others, 100*float64(r.others)/(float64(sc.limits.OutputTokens)*(1+r.wall.Seconds()/sc.limits.Period.Seconds())), 100*sc.leftUsed(r))
		}
	}
	p("Replies use %.1f%% of max_tokens on average, so a client that books max_tokens and never gives the rest back can use at most about that share of the output limit, however well it paces; ",
		100*float64(sc.limitsUsed()[2].total)/float64(sc.prompts*sc.maxTokens))
	p("the reference row shows what settling allows against this API.\n\n")
	p("How each contender was configured:\n\n")
	for _, c := range llmContenders() {
		p("- **%s**: %s\n", c.name, c.how)
	}
	p("\n")
	return os.WriteFile(filepath.Join(dir, "LLM.md"), []byte(b.String()), 0o644)
}

// errRetries is a prompt that got 429s on every attempt a client makes.
var errRetries = errors.New("bench: retries exhausted")
