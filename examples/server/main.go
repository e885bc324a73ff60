// Command server runs an API behind egress's server middleware, with three
// plan tiers keyed by API key, and then points an egress client at each
// tier. The clients have no limit of their own: they follow what the
// server's headers tell them.
//
//   - free: 100 requests a day (a fixed window, resetting at 00:00 UTC);
//   - pro: 600 requests a minute, in bursts of up to 10 (a token bucket);
//   - enterprise: 50 requests a second, in bursts of 50 (a token bucket).
//
// The free client spends its 100 and is then held back by egress itself,
// told by the server when the day resets, without sending a 101st. The
// pro and enterprise clients send as fast as they are allowed for a few
// seconds. The program exits non-zero unless every tier gets at most one
// 429 and the paid tiers use at least 95% of their limit.
//
//	go run ./examples/server                  # limits in process
//	go run ./examples/server -redis localhost:6379
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/middleware"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// plan is one tier: its limit, and the Policies that describe it.
type plan struct {
	name     string
	limit    throttle.Limiter
	policies *middleware.Policies
	rate     float64 // sustained requests per second, for the report
	burst    int
}

// accounts are the API keys the server knows, with their plan.
var accounts = map[string]string{
	"key-free-7c1e": "free",
	"key-pro-52ab":  "pro",
	"key-ent-90fd":  "enterprise",
}

func main() {
	redisAddr := flag.String("redis", "", "share the limits through the Redis server at this address")
	run := flag.Duration("d", 3*time.Second, "how long the paid tiers' clients send")
	flag.Parse()
	if err := serve(*redisAddr, *run); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

func serve(redisAddr string, run time.Duration) error {
	plans, down, closeAll, err := newPlans(redisAddr)
	if err != nil {
		return err
	}
	defer closeAll()

	// The server knows its accounts by the hash of their key only.
	keyOf := middleware.KeyByHeader("X-Api-Key")
	byKey := map[string]*plan{}
	for apiKey, name := range accounts {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("X-Api-Key", apiKey)
		hashed, _ := keyOf(req)
		byKey[hashed] = plans[name]
	}
	pick := func(key string) *plan {
		if p, ok := byKey[key]; ok {
			return p
		}
		return plans["free"] // unknown keys, and requests without one (by IP)
	}
	opts := []middleware.Option{
		middleware.WithKey(keyOf),
		middleware.WithPolicies(func(key string) *middleware.Policies { return pick(key).policies }),
	}
	if down != nil {
		opts = append(opts, middleware.WithDegraded(down.Load))
	}
	limited := middleware.New(throttle.Route(func(key string) throttle.Limiter { return pick(key).limit }), opts...)
	api := httptest.NewServer(limited.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, `{"ok":true}`)
	})))
	defer api.Close()

	var wg sync.WaitGroup
	results := map[string]*result{}
	for apiKey, name := range accounts {
		res := &result{plan: plans[name]}
		results[name] = res
		wg.Go(func() { res.err = hit(api.URL, apiKey, run, res) })
	}
	wg.Wait()

	fmt.Printf("limits %s; each client follows the server's headers, with no limit of its own\n", where(redisAddr))
	fmt.Printf("%-11s %9s %5s %8s  %s\n", "tier", "admitted", "429s", "used", "then")
	var failed []string
	for _, name := range []string{"free", "pro", "enterprise"} {
		r := results[name]
		used := r.used()
		fmt.Printf("%-11s %9d %5d %7.1f%%  %s\n", name, r.admitted, r.tooMany, 100*used, r.then)
		switch {
		case r.err != nil:
			failed = append(failed, name+": "+r.err.Error())
		case r.tooMany > 1:
			failed = append(failed, fmt.Sprintf("%s: %d 429s, want at most 1", name, r.tooMany))
		case name == "free" && r.admitted != 100:
			failed = append(failed, fmt.Sprintf("free: %d admitted, want its 100", r.admitted))
		case name != "free" && used < 0.95:
			failed = append(failed, fmt.Sprintf("%s: used %.1f%% of its limit, want at least 95%%", name, 100*used))
		}
	}
	if len(failed) > 0 {
		return errors.New(fmt.Sprint(failed))
	}
	return nil
}

func where(redisAddr string) string {
	if redisAddr == "" {
		return "in process"
	}
	return "in Redis at " + redisAddr
}

// newPlans builds the three tiers, in process or in Redis. down reports a
// Redis outage, for the middleware's degraded header; nil in process.
func newPlans(redisAddr string) (plans map[string]*plan, down *atomic.Bool, closeAll func(), err error) {
	type bucket struct {
		rate  throttle.Rate
		burst int
	}
	pro := bucket{throttle.PerMinute(600), 10}
	ent := bucket{throttle.PerSecond(50), 50}
	var free, proL, entL throttle.Limiter
	closeAll = func() {}
	if redisAddr == "" {
		free, err = throttle.NewFixedWindow(100, 24*time.Hour)
		if err == nil {
			proL, err = throttle.NewTokenBucket(pro.rate, pro.burst)
		}
		if err == nil {
			entL, err = throttle.NewTokenBucket(ent.rate, ent.burst)
		}
	} else {
		rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
		closeAll = func() { _ = rdb.Close() }
		down = new(atomic.Bool)
		// A fresh prefix per run, so that a run never inherits the free
		// tier's day from the last one.
		ropts := []redislimit.Option{
			redislimit.WithPrefix("egress-example-" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"),
			redislimit.WithObserver(func(e redislimit.Event) {
				if e.Settles == 0 { // the breaker's news, not a drop of settles
					down.Store(!e.Recovered)
				}
			}),
		}
		free, err = redislimit.NewFixedWindow(rdb, 100, 24*time.Hour, ropts...)
		if err == nil {
			proL, err = redislimit.NewTokenBucket(rdb, pro.rate, pro.burst, ropts...)
		}
		if err == nil {
			entL, err = redislimit.NewTokenBucket(rdb, ent.rate, ent.burst, ropts...)
		}
	}
	if err != nil {
		closeAll()
		return nil, nil, nil, err
	}
	perSec := func(r throttle.Rate) float64 { return float64(r.N) / r.Per.Seconds() }
	return map[string]*plan{
		"free":       {name: "free", limit: free, policies: middleware.Describe(free)},
		"pro":        {name: "pro", limit: proL, policies: middleware.Describe(proL), rate: perSec(pro.rate), burst: pro.burst},
		"enterprise": {name: "enterprise", limit: entL, policies: middleware.Describe(entL), rate: perSec(ent.rate), burst: ent.burst},
	}, down, closeAll, nil
}

// result is what one client saw.
type result struct {
	plan        *plan
	admitted    int
	tooMany     int
	first, last time.Time // the first and last admitted response
	then        string
	err         error
}

// used is the share of the paid tier's limit the client used: admitted
// against what a token bucket allows between its first and last admitted
// request (its burst, then its rate).
func (r *result) used() float64 {
	if r.plan.rate == 0 {
		return float64(r.admitted) / 100
	}
	allowed := float64(r.plan.burst) + r.plan.rate*r.last.Sub(r.first).Seconds()
	return float64(r.admitted) / allowed
}

// hit sends requests with apiKey, one at a time, through an egress client
// that has no limit of its own: its limiter is far above any tier, there
// only so that the Transport can pause the key when the server says
// nothing is left. The free tier's client stops at its first local
// refusal; the others send for run.
func hit(url, apiKey string, run time.Duration, res *result) error {
	follow, err := throttle.NewTokenBucket(throttle.PerSecond(1_000_000), 1_000_000)
	if err != nil {
		return err
	}
	tr := egress.NewTransport(nil,
		egress.WithLimiter(follow),
		egress.WithRetry(retryafter.Policy{MaxPause: 25 * time.Hour}),
	)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	end := time.Now().Add(run)
	for time.Now().Before(end) {
		ctx, cancel := context.WithDeadline(context.Background(), end)
		status, err := get(ctx, client, url, apiKey)
		cancel()
		var le *throttle.LimitError
		switch {
		case errors.As(err, &le):
			// egress held the request back itself, as the headers said.
			if res.plan.rate == 0 {
				res.then = fmt.Sprintf("held back by the client: the day resets in %v", le.RetryAfter.Round(time.Minute))
				return nil
			}
			continue // the run's end came during a pause
		case errors.Is(err, context.DeadlineExceeded):
			continue
		case err != nil:
			return err
		case status == http.StatusTooManyRequests:
			res.tooMany++
		case status == http.StatusOK:
			now := time.Now()
			if res.admitted == 0 {
				res.first = now
			}
			res.admitted++
			res.last = now
		default:
			return fmt.Errorf("status %d", status)
		}
	}
	res.then = fmt.Sprintf("sent for %v", run)
	if res.plan.rate == 0 {
		return fmt.Errorf("the free client was never held back")
	}
	return nil
}

func get(ctx context.Context, client *http.Client, url, apiKey string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Api-Key", apiKey)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
