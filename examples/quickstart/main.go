// Command quickstart sends 40 requests from 8 goroutines, through egress,
// to an API that strictly allows 5 requests a second with bursts of 5 and
// answers 429 beyond that. It prints how many succeeded, how many 429s the
// API sent (none), and how long it took next to the theoretical minimum,
// and exits non-zero if any of that is off.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/internal/upstream"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

const (
	rate     = 5 // the API's published limit: 5 requests a second,
	burst    = 5 // with bursts of 5
	requests = 40
	workers  = 8
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run() error {
	api := upstream.New(upstream.Config{Rate: rate, Burst: burst})
	defer api.Close()

	// Configure egress at the API's published limit, with the recommended
	// tolerance for jitter between here and the API.
	limit, err := throttle.NewTokenBucket(throttle.PerSecond(rate), burst,
		throttle.WithTolerance(throttle.DefaultTolerance))
	if err != nil {
		return err
	}
	client := egress.NewClient(
		egress.WithLimiter(limit),
		egress.WithRetry(retryafter.Policy{}),
	)
	defer client.CloseIdleConnections()

	start := time.Now()
	var succeeded atomic.Int64
	jobs := make(chan int)
	errs := make(chan error, requests)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				if err := upstream.Get(context.Background(), client, fmt.Sprintf("%s/items/%d", api.URL(), i)); err != nil {
					errs <- err
					continue
				}
				succeeded.Add(1)
			}
		})
	}
	for i := range requests {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)

	// The burst goes at once; the rest at the rate.
	minimum := time.Duration(requests-burst) * time.Second / rate
	tooMany := api.TooMany()
	fmt.Printf("succeeded:         %d of %d\n", succeeded.Load(), requests)
	fmt.Printf("429s the API sent: %d\n", tooMany)
	fmt.Printf("took:              %v (theoretical minimum %v)\n", elapsed.Round(10*time.Millisecond), minimum)

	for err := range errs {
		return err
	}
	switch {
	case succeeded.Load() != requests:
		return fmt.Errorf("%d of %d requests succeeded", succeeded.Load(), requests)
	case tooMany != 0:
		return fmt.Errorf("the API sent %d 429s, want 0", tooMany)
	case elapsed > minimum*5/4:
		return fmt.Errorf("took %v, more than 1.25× the minimum %v", elapsed, minimum)
	}
	return nil
}
