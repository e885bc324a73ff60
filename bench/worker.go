package main

import (
	"github.com/egress-go/egress/internal/upstream"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// workerEnv carries a worker's spec, as JSON, from the harness to a copy
// of the bench binary that it starts as a separate OS process.
const workerEnv = "EGRESS_BENCH_WORKER"

// spec is one worker's share of a scenario.
type spec struct {
	Contender  string        `json:"contender"`
	URL        string        `json:"url"`
	Redis      string        `json:"redis,omitempty"`
	Requests   int           `json:"requests"`
	Goroutines int           `json:"goroutines"`
	StartAt    int64         `json:"start_at"` // Unix nanoseconds; every worker of a run starts then
	Rate       float64       `json:"rate"`     // the upstream's published rate, per second
	Burst      int           `json:"burst"`
	Limit      int           `json:"limit,omitempty"` // a windowed limit: Limit per Window
	Window     time.Duration `json:"window,omitempty"`
	Procs      int           `json:"procs"` // how many processes share the quota
	// Algorithm is how the upstream documents its limit, for contenders
	// that pick theirs from it.
	Algorithm upstream.Algorithm `json:"algorithm"`
	// Deadline, in Unix nanoseconds, ends every request still going.
	Deadline int64 `json:"deadline,omitempty"`
}

// outcome is what a worker reports back on its stdout.
type outcome struct {
	End int64 `json:"end"` // Unix nanoseconds when its last request finished
	// RoundTrips counts the commands the contender sent to Redis, when it
	// uses Redis.
	RoundTrips int64  `json:"round_trips"`
	OK         int    `json:"ok"`
	Failed     int    `json:"failed"`
	Err        string `json:"err,omitempty"`
	// Learned is the rate a learning contender held, per second, sampled
	// every 100 ms from the start (see learner).
	Learned []float64 `json:"learned,omitempty"`
}

// result is a worker's outcome plus what the harness measured of it.
type result struct {
	outcome
	CPU time.Duration
}

// client does one logical request to the upstream, retries included, and
// returns the final status.
type client interface {
	do(ctx context.Context, url string) (int, error)
	close()
}

// runWorker is the worker process's main: build the contender, wait for
// the common start, send s.Requests from s.Goroutines goroutines.
func runWorker(raw string) int {
	var s spec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		fmt.Fprintln(os.Stderr, "bench worker: bad spec:", err)
		return 2
	}
	out := work(s)
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		return 2
	}
	return 0
}

func work(s spec) outcome {
	build, ok := contenders()[s.Contender]
	if !ok {
		return outcome{Err: "unknown contender " + s.Contender}
	}
	c, err := build(s)
	if err != nil {
		return outcome{Err: err.Error()}
	}
	defer c.close()
	time.Sleep(time.Until(time.Unix(0, s.StartAt)))
	ctx := context.Background()
	if s.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.Unix(0, s.Deadline))
		defer cancel()
	}
	var next, okN, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range s.Goroutines {
		wg.Go(func() {
			for next.Add(1) <= int64(s.Requests) {
				status, err := c.do(ctx, s.URL)
				switch {
				case err != nil:
					firstErr.CompareAndSwap(nil, err.Error())
					failed.Add(1)
				case status != http.StatusOK:
					failed.Add(1)
				default:
					okN.Add(1)
				}
			}
		})
	}
	wg.Wait()
	o := outcome{End: time.Now().UnixNano(), OK: int(okN.Load()), Failed: int(failed.Load())}
	if rc, ok := c.(interface{ redisRoundTrips() int64 }); ok {
		o.RoundTrips = rc.redisRoundTrips()
	}
	if l, ok := c.(learner); ok {
		o.Learned = l.learned()
	}
	if e, ok := firstErr.Load().(string); ok {
		o.Err = e
	}
	return o
}

// spawn runs one worker process per spec and waits for all of them. It
// fails only when a worker cannot be run or reports nothing; errors a
// contender met while sending are in each result's Err.
func spawn(specs []spec) ([]result, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	results := make([]result, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		raw, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		wg.Go(func() {
			cmd := exec.Command(self)
			cmd.Env = append(os.Environ(), workerEnv+"="+string(raw))
			cmd.Stderr = os.Stderr
			var stdout strings.Builder
			cmd.Stdout = &stdout
			runErr := cmd.Run()
			if cmd.ProcessState != nil {
				results[i].CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			}
			if err := json.Unmarshal([]byte(stdout.String()), &results[i].outcome); err != nil {
				errs[i] = fmt.Errorf("worker %s: %v (output %q, exit %v)", s.Contender, err, stdout.String(), runErr)
			}
		})
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// drain reads and closes a response body so its connection is reused.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	_ = resp.Body.Close()
}
