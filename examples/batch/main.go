// Command batch runs a batch job against a paid API with two limits: 20
// credits a second, and 500 credits a "day" (simulated: the day here
// lasts 40 seconds). Calls are priced by endpoint, 1 to 5 credits. The
// job wants more than a day's quota, so it goes as fast as the limits
// allow, shows its progress, and stops cleanly when the day's credits run
// out, saying when they come back. The API never answers 429. It exits
// non-zero if any of that is off.
//
//	go run ./examples/batch
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/internal/upstream"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

const (
	rate    = 20               // credits a second, with bursts of 20
	quota   = 500              // credits a day
	day     = 40 * time.Second // the simulated day
	items   = 250              // the job: 625 credits in all
	workers = 8
	maxWait = 5 * time.Second // longer than any wait for the rate, shorter than a day
)

// price is the API's published price list: credits per call to path.
func price(p string) int {
	switch path.Dir(p) {
	case "/search":
		return 3
	case "/reports":
		return 5
	}
	return 1
}

// job returns the path of item i.
func job(i int) string {
	switch i % 4 {
	case 1:
		return fmt.Sprintf("/search/%d", i)
	case 3:
		return fmt.Sprintf("/reports/%d", i)
	}
	return fmt.Sprintf("/items/%d", i)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "batch:", err)
		os.Exit(1)
	}
}

func run() error {
	cost := func(r *http.Request) int { return price(r.URL.Path) }
	api := upstream.New(upstream.Config{Rate: rate, Burst: rate, Quota: quota, Day: day, Cost: cost})
	defer api.Close()

	// Both limits at the API's published values, with the recommended
	// tolerance. The day's windows start when the API's do.
	tol := throttle.WithTolerance(throttle.DefaultTolerance)
	perSecond, err := throttle.NewTokenBucket(throttle.PerSecond(rate), rate, tol)
	if err != nil {
		return err
	}
	dayStart := throttle.WithWindowOffset(time.Duration(api.Start().UnixNano() % int64(day)))
	perDay, err := throttle.NewFixedWindow(quota, day, tol, dayStart)
	if err != nil {
		return err
	}
	limit := throttle.All(perSecond, perDay)
	client := egress.NewClient(
		egress.WithLimiter(limit),
		egress.WithCost(cost), // each call takes its price from both limits
		egress.WithMaxWait(maxWait),
		egress.WithRetry(retryafter.Policy{}),
	)
	defer client.CloseIdleConnections()

	var (
		done, spent atomic.Int64
		stopOnce    sync.Once
		refusal     *throttle.LimitError
	)
	// Stopping ends the feed of new work; calls already booked finish.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	jobs := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				err := upstream.Get(context.Background(), client, api.URL()+job(i))
				var le *throttle.LimitError
				switch {
				case errors.As(err, &le):
					// Out of credits for today: stop taking work.
					stopOnce.Do(func() { refusal = le; stop() })
					return
				case err != nil:
					errs <- err
					return
				}
				done.Add(1)
				spent.Add(int64(price(job(i))))
			}
		})
	}

	start := time.Now()
	progress := startProgress(&done, &spent, start)
feed:
	for i := range items {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	progress.stop()
	close(errs)
	for err := range errs {
		return err
	}

	tooMany := api.TooMany()
	fmt.Printf("done %d of %d items in %v, spending %d of the day's %d credits; the API sent %d 429s\n",
		done.Load(), items, time.Since(start).Round(10*time.Millisecond), spent.Load(), quota, tooMany)
	if refusal == nil {
		return fmt.Errorf("the job finished within a day's quota; it was meant to outrun it")
	}
	// Ask the budget when one credit is next available, taking nothing: a
	// Reserve that may not wait is refused, and its Delay says when.
	r, err := limit.Reserve(context.Background(), refusal.Key, 1, 0)
	if err != nil {
		return err
	}
	fmt.Printf("stopped: today's credits are spent; they come back in %v, at %s\n",
		r.Delay.Round(100*time.Millisecond), time.Now().Add(r.Delay).Format(time.TimeOnly))

	switch {
	case tooMany != 0:
		return fmt.Errorf("the API sent %d 429s, want 0", tooMany)
	case r.OK:
		return fmt.Errorf("the budget still had credits after the job stopped")
	case spent.Load() > quota || spent.Load() < quota-5:
		return fmt.Errorf("spent %d credits, want nearly all of %d and never more", spent.Load(), quota)
	}
	return nil
}

// progress prints a progress line every two seconds until stopped.
type progress struct {
	quit chan struct{}
	wg   sync.WaitGroup
}

func startProgress(done, spent *atomic.Int64, start time.Time) *progress {
	p := &progress{quit: make(chan struct{})}
	total := 0
	for i := range items {
		total += price(job(i))
	}
	p.wg.Go(func() {
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-tick.C:
			}
			left := total - int(spent.Load())
			eta := fmt.Sprintf("ETA %v", time.Duration(left)*time.Second/rate)
			if credits := quota - int(spent.Load()); left > credits {
				eta = fmt.Sprintf("today's credits run out in about %v", time.Duration(credits)*time.Second/rate)
			}
			fmt.Printf("%5.1fs  done %3d  remaining %3d  credits %3d/%d  %s\n",
				time.Since(start).Seconds(), done.Load(), items-int(done.Load()), spent.Load(), quota, eta)
		}
	})
	return p
}

func (p *progress) stop() {
	close(p.quit)
	p.wg.Wait()
}
