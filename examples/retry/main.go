// Command retry shows a 429 pausing every caller. Eight goroutines share
// one budget at the API's limit; the API answers one request with 429 and
// Retry-After: 2. That pauses the key for all eight, those asleep to
// their slots included: nothing sent after the 429 reaches the API during
// the pause, the throttled request is retried after it, and every request
// succeeds. It exits non-zero if any of that is off.
//
//	go run ./examples/retry
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/internal/upstream"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

const (
	rate       = 10 // the API allows 10 requests a second,
	burst      = 10 // with bursts of 10
	workers    = 8
	perWorker  = 6
	throttleAt = 20              // the API throttles its 20th request,
	pauseFor   = 2 * time.Second // with Retry-After: 2

	// reportLag is how long after the 429 is reported a call that was
	// already answered may still reach its worker: on a busy machine the
	// goroutine that reads it may not run at once. It is far shorter than
	// the pause: without the pause, every worker would finish about two
	// calls between reportLag and the pause's end.
	reportLag = 250 * time.Millisecond
)

// call is one request as a worker saw it.
type call struct {
	start, end time.Time
	err        error
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "retry:", err)
		os.Exit(1)
	}
}

func run() error {
	api := upstream.New(upstream.Config{Rate: rate, Burst: burst, ThrottleAt: throttleAt, ThrottleFor: pauseFor})
	defer api.Close()

	limit, err := throttle.NewTokenBucket(throttle.PerSecond(rate), burst,
		throttle.WithTolerance(throttle.DefaultTolerance))
	if err != nil {
		return err
	}
	var (
		mu       sync.Mutex
		pausedAt time.Time // when the 429 reached us
		paused   time.Duration
	)
	tr := egress.NewTransport(
		upstream.Stamp(nil), // tells the API when each attempt was sent
		egress.WithLimiter(limit),
		egress.WithRetry(retryafter.Policy{}),
		egress.WithObserver(&egress.Observer{
			Paused: func(i egress.PauseInfo) {
				mu.Lock()
				defer mu.Unlock()
				pausedAt, paused = time.Now(), i.Duration
			},
		}),
	)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	start := time.Now()
	calls := make([][]call, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range perWorker {
				c := call{start: time.Now()}
				c.err = upstream.Get(context.Background(), client, api.URL())
				c.end = time.Now()
				calls[w] = append(calls[w], c)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	if pausedAt.IsZero() {
		return fmt.Errorf("the API's 429 paused nothing")
	}
	pauseEnd := pausedAt.Add(paused)
	intoPause := 0
	for _, a := range api.Arrivals() {
		if a.SentAt.After(pausedAt) && a.At.Before(pauseEnd) {
			intoPause++
		}
	}
	held, succeeded := 0, 0
	for _, cs := range calls {
		progressed := false
		for _, c := range cs {
			if c.err == nil {
				succeeded++
			}
			// A call that ended well inside the pause went through it.
			progressed = progressed || (c.end.After(pausedAt.Add(reportLag)) && c.end.Before(pauseEnd))
		}
		if !progressed {
			held++
		}
	}
	tooMany := api.TooMany()

	fmt.Printf("429 received after %v: the key paused for %v\n", pausedAt.Sub(start).Round(10*time.Millisecond), paused)
	fmt.Printf("goroutines that got nothing through:  %d of %d\n", held, workers)
	fmt.Printf("sent after the 429, arrived in it:   %d\n", intoPause)
	fmt.Printf("succeeded:                           %d of %d (%d retried)\n", succeeded, workers*perWorker, tr.Stats().Retries)
	fmt.Printf("429s the API sent:                   %d\n", tooMany)
	fmt.Printf("took:                                %v\n", elapsed.Round(10*time.Millisecond))

	for _, cs := range calls {
		for _, c := range cs {
			if c.err != nil {
				return c.err
			}
		}
	}
	switch {
	case tooMany != 1:
		return fmt.Errorf("the API sent %d 429s, want 1", tooMany)
	case paused != pauseFor:
		return fmt.Errorf("paused for %v, want %v", paused, pauseFor)
	case held != workers:
		return fmt.Errorf("%d of %d goroutines were held through the pause", held, workers)
	case intoPause != 0:
		return fmt.Errorf("%d requests sent after the 429 reached the API during the pause", intoPause)
	}
	return nil
}
