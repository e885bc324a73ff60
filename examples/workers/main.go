// Command workers runs N copies of itself as separate processes (4 by
// default) that share one budget in Redis, against an API that strictly
// allows 100 requests a second with bursts of 10 and answers 429 beyond
// that. Every worker is configured at that published limit, with the
// recommended tolerance, and sends as fast as the shared budget allows
// for a few seconds. It prints each worker's count, the total next to
// the most the API could accept, and the API's 429 count, which must be
// 0: it exits non-zero otherwise, or when Redis cannot be reached.
//
//	go run ./examples/workers -redis 127.0.0.1:6379
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/internal/upstream"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

const (
	rate    = 100 // the API's published limit: 100 requests a second,
	burst   = 10  // with bursts of 10
	senders = 8   // goroutines per worker
)

func main() {
	addr := flag.String("redis", "127.0.0.1:6379", "address of the Redis that holds the shared budget")
	n := flag.Int("workers", 4, "how many worker processes to start")
	length := flag.Duration("for", 5*time.Second, "how long the workers send")
	api := flag.String("worker", "", "internal: run as a worker against this API URL")
	prefix := flag.String("prefix", "", "internal: the workers' Redis key prefix")
	flag.Parse()
	// go-redis logs dial failures on its own; this program says what
	// went wrong in one line instead.
	redis.SetLogger(quiet{})

	var err error
	if *api != "" {
		err = work(*addr, *api, *prefix, *length)
	} else {
		err = run(*addr, *n, *length)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "workers:", err)
		os.Exit(1)
	}
}

// run is the parent: it checks Redis, starts the API and the workers, and
// reports.
func run(addr string, n int, length time.Duration) error {
	if n < 1 {
		return fmt.Errorf("-workers must be at least 1, got %d", n)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err := rdb.Ping(ctx).Err()
	cancel()
	rdb.Close()
	if err != nil {
		return fmt.Errorf("cannot reach Redis at %s (set -redis): %v", addr, err)
	}

	api := upstream.New(upstream.Config{Rate: rate, Burst: burst})
	defer api.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// A prefix of this run's own, so that budgets left by earlier runs
	// do not count.
	prefix := fmt.Sprintf("egress-workers:%d:%d:", os.Getpid(), time.Now().UnixNano())
	start := time.Now()
	counts := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		cmd := exec.Command(self, "-redis", addr, "-worker", api.URL(), "-prefix", prefix, "-for", length.String())
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		wg.Go(func() {
			counts[i], errs[i] = result(out)
			if err := cmd.Wait(); err != nil && errs[i] == nil {
				errs[i] = fmt.Errorf("worker %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	total := 0
	for i, c := range counts {
		fmt.Printf("worker %d: %d requests\n", i, c)
		total += c
	}
	most := burst + int(elapsed.Seconds()*rate)
	fmt.Printf("total: %d requests in %v (the API accepts at most %d in that time)\n", total, elapsed.Round(time.Millisecond), most)
	fmt.Printf("429s from the API: %d\n", api.TooMany())
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if api.TooMany() != 0 {
		return fmt.Errorf("the API answered 429 %d times", api.TooMany())
	}
	if total == 0 {
		return errors.New("no request succeeded")
	}
	return nil
}

// result reads a worker's "ok N" line.
func result(r io.Reader) (int, error) {
	lines := bufio.NewScanner(r)
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "ok "); ok {
			return strconv.Atoi(rest)
		}
	}
	return 0, errors.New("a worker exited without a count")
}

// work is one worker process: senders goroutines send to the API through
// egress, on the budget shared in Redis, for length.
func work(addr, api, prefix string, length time.Duration) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	limit, err := redislimit.NewTokenBucket(rdb, throttle.PerSecond(rate), burst,
		redislimit.WithPrefix(prefix),
		redislimit.WithTolerance(throttle.DefaultTolerance))
	if err != nil {
		return err
	}
	defer limit.Close()
	client := &http.Client{Transport: egress.NewTransport(upstream.Stamp(nil), egress.WithLimiter(limit))}
	defer client.CloseIdleConnections()

	ctx, stop := context.WithTimeout(context.Background(), length)
	defer stop()
	var sent atomic.Int64
	errs := make(chan error, senders)
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for ctx.Err() == nil {
				err := upstream.Get(ctx, client, api)
				var le *throttle.LimitError
				switch {
				case ctx.Err() != nil, errors.As(err, &le) && le.Timeout():
					return // time is up; a call cut short does not count
				case err != nil:
					errs <- err
					return
				}
				sent.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Printf("ok %d\n", sent.Load())
	return nil
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
