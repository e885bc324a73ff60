// Command bench runs egress side by side with peer libraries against a
// strict embedded upstream (and, for issue 13, real third-party
// limiters), and writes RESULTS.md with PNG plots beside it. See
// README.md.
//
//	go run .          # full run (minutes); writes RESULTS.md and *.png here
//	go run . -smoke   # every scenario in seconds, into a temp dir; for CI
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/egress-go/egress/bench/internal/redisserver"
	"github.com/egress-go/egress/internal/upstream"
	"github.com/redis/go-redis/v9"
)

func main() {
	if raw := os.Getenv(workerEnv); raw != "" {
		os.Exit(runWorker(raw))
	}
	if raw := os.Getenv(llmWorkerEnv); raw != "" {
		os.Exit(runLLMWorker(raw))
	}
	os.Exit(run(os.Args[1:]))
}

// harness holds what every scenario shares: the upstream, the private
// redis-server, and the run's settings.
type harness struct {
	smoke bool
	out   string
	up    *upstream.Server
	redis *redisserver.Server // nil when redis-server is missing
	rdb   *redis.Client
	notes []string // printed and written to RESULTS.md
	only  map[string]bool
}

// runs reports whether part is to run.
func (h *harness) runs(part string) bool { return len(h.only) == 0 || h.only[part] }

// runsScenario reports whether sc is to run.
func (h *harness) runsScenario(sc scenario) bool {
	return h.runs(sc.id) || (sc.part != "" && h.runs(sc.part))
}

func run(args []string) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	smoke := fs.Bool("smoke", false, "run every scenario in seconds, write into a temp dir, exit non-zero if the harness breaks")
	short := fs.Bool("short", false, "same as -smoke")
	out := fs.String("out", "", "directory for RESULTS.md and the plots (default: this directory, or a temp dir with -smoke)")
	micro := fs.Bool("micro", true, "also run the micro-benchmarks (go test -bench) and add their table (full run only)")
	only := fs.String("run", "", "comma-separated parts to run, of 1,2,3,4,5,6,7 (or one scenario: 5a, 6b...),pacing,accuracy (default all); for development")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	h := &harness{smoke: *smoke || *short, out: *out, only: map[string]bool{}}
	for _, p := range strings.Split(*only, ",") {
		if p != "" {
			h.only[p] = true
		}
	}
	if h.out == "" {
		h.out = "."
		if h.smoke {
			dir, err := os.MkdirTemp("", "egress-bench-smoke-")
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
				return 1
			}
			h.out = dir
		}
	}
	if err := h.run(*micro && !h.smoke, strings.Join(os.Args, " ")); err != nil {
		fmt.Fprintln(os.Stderr, "bench: FAIL:", err)
		return 1
	}
	fmt.Println("bench: wrote", h.out+"/RESULTS.md")
	return 0
}

func (h *harness) run(micro bool, command string) error {
	ctx := context.Background()
	h.up = upstream.New(upstream.Config{})
	defer h.up.Close()
	rs, err := redisserver.Start(ctx)
	switch {
	case errors.Is(err, redisserver.ErrMissing):
		h.note("redis-server is not installed: the Redis contenders of scenario 2 are skipped")
	case err != nil:
		return err
	default:
		h.redis = rs
		defer rs.Close()
		h.rdb = redis.NewClient(&redis.Options{Addr: rs.Addr})
		defer h.rdb.Close()
	}
	rep := &report{smoke: h.smoke, command: command, started: time.Now(), load: loadAverage()}
	for _, sc := range append(scenarios(h.smoke), followScenarios(h.smoke)...) {
		if !h.runsScenario(sc) {
			continue
		}
		fmt.Printf("== scenario %s: %s\n", sc.id, sc.title)
		rows, err := h.runScenario(ctx, sc)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", sc.id, err)
		}
		rep.add(sc, rows)
		if err := h.plot(sc, rows); err != nil {
			return fmt.Errorf("scenario %s plot: %w", sc.id, err)
		}
	}
	if h.runs("pacing") {
		fmt.Println("== pacing: sustained goodput against a burst-10 server")
		pacing, err := h.runPacing(ctx)
		if err != nil {
			return fmt.Errorf("pacing: %w", err)
		}
		rep.pacing = pacing
	}
	if h.runs("accuracy") {
		fmt.Println("== waiting accuracy: 64 callers queued on one key")
		acc, err := measureAccuracy(ctx, h.smoke)
		if err != nil {
			return fmt.Errorf("accuracy: %w", err)
		}
		rep.accuracy = acc
		if err := plotLateness(h.out, acc); err != nil {
			return fmt.Errorf("accuracy plot: %w", err)
		}
	}
	if h.runs("llm") {
		fmt.Println("== LLM batch: requests, input and output tokens per minute (issue 14)")
		if err := h.runLLM(ctx); err != nil {
			return fmt.Errorf("llm: %w", err)
		}
	}
	if micro {
		fmt.Println("== micro-benchmarks: go test -bench (a few minutes)")
		m, err := runMicro(h.out)
		if err != nil {
			return fmt.Errorf("micro-benchmarks: %w", err)
		}
		rep.micro = m
	}
	rep.notes = h.notes
	return rep.write(h.out)
}

// note records something the reader must know, such as a skipped
// contender.
func (h *harness) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	fmt.Println("note:", s)
	h.notes = append(h.notes, s)
}
