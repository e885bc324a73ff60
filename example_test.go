package egress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// An API that allows 5 requests a second, with bursts of 5: wrap the
// client once, at the published limit, with the recommended tolerance.
func ExampleNewClient() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello")
	}))
	defer api.Close()

	limit, err := throttle.NewTokenBucket(throttle.PerSecond(5), 5,
		throttle.WithTolerance(throttle.DefaultTolerance))
	if err != nil {
		fmt.Println(err)
		return
	}
	client := egress.NewClient(
		egress.WithLimiter(limit),
		egress.WithRetry(retryafter.Policy{}),
	)
	defer client.CloseIdleConnections()

	resp, err := client.Get(api.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 hello
}

// A 429 with Retry-After is retried after the server's delay, and pauses
// the key for every caller of the limiter meanwhile.
func ExampleWithRetry() {
	var calls atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, "done")
	}))
	defer api.Close()

	limit, err := throttle.NewTokenBucket(throttle.PerSecond(100), 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	tr := egress.NewTransport(nil,
		egress.WithLimiter(limit),
		egress.WithRetry(retryafter.Policy{MaxAttempts: 3}),
	)
	defer tr.CloseIdleConnections()

	resp, err := (&http.Client{Transport: tr}).Get(api.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	s := tr.Stats()
	fmt.Println(resp.StatusCode, string(body))
	fmt.Println("sent:", s.Sent, "retries:", s.Retries)
	// Output:
	// 200 done
	// sent: 2 retries: 1
}

// A request that cannot have its units within the allowed wait fails at
// once, having taken nothing, and says when to come back.
func ExampleWithMaxWait() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer api.Close()

	limit, err := throttle.NewTokenBucket(throttle.PerMinute(1), 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	client := egress.NewClient(
		egress.WithLimiter(limit),
		egress.WithMaxWait(10*time.Second),
		egress.WithKey(func(*http.Request) string { return "example" }),
	)
	defer client.CloseIdleConnections()

	for range 2 {
		resp, err := client.Get(api.URL)
		var le *throttle.LimitError
		switch {
		case errors.As(err, &le):
			fmt.Printf("refused: key %s, retry after %v\n", le.Key, le.RetryAfter.Round(time.Second))
		case err != nil:
			fmt.Println(err)
		default:
			resp.Body.Close()
			fmt.Println(resp.StatusCode)
		}
	}
	// Output:
	// 200
	// refused: key example, retry after 50s
}

// A full queue sheds load at once.
func ExampleWithQueue() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello")
	}))
	defer api.Close()

	q, err := queue.New(1, 0) // one request at a time, nobody waits
	if err != nil {
		fmt.Println(err)
		return
	}
	client := egress.NewClient(egress.WithQueue(q))
	defer client.CloseIdleConnections()

	first, err := client.Get(api.URL) // holds the slot until its body is closed
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = client.Get(api.URL)
	fmt.Println(errors.Is(err, queue.ErrFull))
	first.Body.Close()
	fmt.Printf("%+v\n", q.Stats())
	// Output:
	// true
	// {InFlight:0 Waiting:0 Rejected:1}
}

// Every API key gets its own budget, and the key never shows the secret.
func ExampleKeyByHeader() {
	key := egress.KeyByHeader("Authorization")
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/items", nil)
	req.Header.Set("Authorization", "Bearer sk-live-123")
	fmt.Println(key(req))
	// Output: Authorization#af7d7507705053d5
}

// One expensive call takes more of the budget than a cheap one.
func ExampleWithRequestCost() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer api.Close()

	limit, err := throttle.NewTokenBucket(throttle.PerMinute(10), 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	client := egress.NewClient(egress.WithLimiter(limit), egress.WithMaxWait(0))
	defer client.CloseIdleConnections()

	for _, cost := range []int{8, 1, 5} {
		ctx := egress.WithRequestCost(context.Background(), cost)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Printf("cost %d: %v\n", cost, errors.Is(err, throttle.ErrLimitExceeded))
			continue
		}
		resp.Body.Close()
		fmt.Printf("cost %d: %d\n", cost, resp.StatusCode)
	}
	// Output:
	// cost 8: 200
	// cost 1: 200
	// cost 5: true
}

// An Observer hears what the Transport does, for metrics and logs.
func ExampleObserver() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.Header().Set("X-RateLimit-Limit", "0") // absurd: a limit of 0
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer api.Close()

	limit, err := throttle.NewTokenBucket(throttle.PerSecond(10), 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	record, err := throttle.NewUpstream() // what the upstream states, per key
	if err != nil {
		fmt.Println(err)
		return
	}
	client := egress.NewClient(
		egress.WithLimiter(limit),
		egress.WithUpstream(record),
		egress.WithKey(func(*http.Request) string { return "example" }),
		egress.WithObserver(&egress.Observer{
			Paused: func(i egress.PauseInfo) {
				fmt.Printf("paused %s for %v after a %d\n", i.Key, i.Duration, i.StatusCode)
			},
			Clamped: func(i egress.ClampInfo) {
				fmt.Printf("clamped %v of a quota of %s: limit %d read as %d (unknown)\n", i.Fields, i.Key, i.Stated.Limit, i.Used.Limit)
			},
		}),
	)
	defer client.CloseIdleConnections()

	resp, err := client.Get(api.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	// Output:
	// paused example for 30s after a 429
	// clamped [Limit] of a quota of example: limit 0 read as -1 (unknown)
}
