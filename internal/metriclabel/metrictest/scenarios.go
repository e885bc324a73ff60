package metrictest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// LearnRates sends one request per key to a server that answers 429 to
// the key "throttled" and 200 to the others, through a Transport with
// limiter a, attached by attach: "calm", "throttled", then "third".
func LearnRates(t *testing.T, a *throttle.Adaptive, attach AttachTo) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/throttled" {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	_, rt := attach(nil, egress.WithLimiter(a))
	client := &http.Client{Transport: rt}
	defer client.CloseIdleConnections()
	for _, key := range []string{"calm", "throttled", "third"} {
		get(t, client, egress.WithRequestKey(context.Background(), key), srv.URL+"/"+key)
	}
}

// RedisRoundTrips sends n requests to a server of its own through a
// Transport whose limiter is a token bucket in a Redis of its own (see
// [StartRedis]), attached by attach, on a client with hook and with
// observer for [redislimit.WithObserver]. It returns how many round
// trips a hook of its own counted.
func RedisRoundTrips(t *testing.T, n int, hook redis.Hook, observer func(redislimit.Event), attach AttachTo) int64 {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	rdb := redis.NewClient(StartRedis(t))
	defer rdb.Close()
	var trips Counting
	rdb.AddHook(hook)
	rdb.AddHook(&trips)
	limiter, err := redislimit.NewTokenBucket(rdb, throttle.PerSecond(1000), 100, redislimit.WithObserver(observer))
	if err != nil {
		t.Fatal(err)
	}
	defer limiter.Close()
	_, rt := attach(nil, egress.WithLimiter(limiter))
	client := &http.Client{Transport: rt}
	defer client.CloseIdleConnections()
	for range n {
		get(t, client, context.Background(), srv.URL)
	}
	return trips.N.Load()
}

// FailRoundTrip makes one round trip, which fails, on a client with hook
// whose server does not exist.
func FailRoundTrip(t *testing.T, hook redis.Hook) {
	t.Helper()
	gone := redis.NewClient(&redis.Options{Network: "unix", Addr: t.TempDir() + "/none.sock", MaxRetries: -1})
	defer gone.Close()
	gone.AddHook(hook)
	if err := gone.Ping(context.Background()).Err(); err == nil {
		t.Fatal("a Redis that does not exist answered")
	}
}

// Get sends a GET for url through rt, reads the body and checks that the
// status is want.
func Get(t *testing.T, rt http.RoundTripper, url string, want int) {
	t.Helper()
	client := &http.Client{Transport: rt}
	defer client.CloseIdleConnections()
	require.Equal(t, want, get(t, client, context.Background(), url))
}

// get sends a GET for url and returns its status, having read the body.
func get(t *testing.T, client *http.Client, ctx context.Context, url string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}

// AttachTo attaches an adapter's metrics to a Transport over the network
// built with opts, with the adapter's Observer passing events on to next,
// and returns the Transport and what to send through.
type AttachTo func(next *egress.Observer, opts ...egress.Option) (*egress.Transport, http.RoundTripper)

// Upstream answers 200, except that its first answer on /slow-down is a
// 429 asking to wait 20ms, and its first answer on /retry-now a 429
// asking to retry at once.
func Upstream(t *testing.T) *httptest.Server {
	t.Helper()
	var slowed, retried atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/slow-down" && slowed.CompareAndSwap(false, true):
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Retry-After-Ms", "20")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		case r.URL.Path == "/retry-now" && retried.CompareAndSwap(false, true):
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// NoJitter is a retry policy that waits exactly what the server asks.
var NoJitter = retryafter.Policy{Jitter: func(time.Duration) time.Duration { return 0 }}

// RealRequests sends to srv (an [Upstream]), through a Transport with a
// queue of one slot and one place in line, a [StepLimiter] of 5ms and
// retries, attached by attach:
//
//   - A, which holds the only queue slot; B, which waits in line (then
//     whileWaiting is called); C, which finds the line full;
//   - a 429 on /slow-down that pauses the key and is retried;
//   - a request for the key "refuse", which the limiter refuses;
//   - a request whose context was cancelled before it started.
//
// It returns how many pauses the Observer given as next heard of.
func RealRequests(t *testing.T, srv *httptest.Server, attach AttachTo, whileWaiting func()) int32 {
	t.Helper()
	q, err := queue.New(1, 1)
	require.NoError(t, err)
	var paused atomic.Int32
	tr, rt := attach(&egress.Observer{Paused: func(egress.PauseInfo) { paused.Add(1) }},
		egress.WithLimiter(StepLimiter{Wait: 5 * time.Millisecond}), egress.WithQueue(q), egress.WithRetry(NoJitter))
	client := &http.Client{Transport: rt}
	defer client.CloseIdleConnections()
	send := func(ctx context.Context, path string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		if err != nil {
			return nil, err
		}
		return client.Do(req)
	}
	ctx := context.Background()

	a, err := send(ctx, "/ok")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Go(func() {
		b, err := send(ctx, "/ok")
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, b.Body)
		_ = b.Body.Close()
	})
	require.Eventually(t, func() bool { return tr.Stats().Waiting == 1 }, 10*time.Second, time.Millisecond)
	whileWaiting()
	_, err = send(ctx, "/ok")
	require.ErrorIs(t, err, queue.ErrFull)
	require.NoError(t, a.Body.Close())
	wg.Wait()

	require.Equal(t, http.StatusOK, get(t, client, ctx, srv.URL+"/slow-down"), "the retry's answer")

	_, err = send(egress.WithRequestKey(ctx, "refuse"), "/ok")
	require.ErrorIs(t, err, throttle.ErrLimitExceeded)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = send(cancelled, "/ok")
	require.ErrorIs(t, err, context.Canceled)
	return paused.Load()
}

// ManyKeys reports, for each of n keys key-0, key-1, …, a refusal, a
// wait, a pause and a retry to o.
func ManyKeys(o *egress.Observer, n int) {
	for i := range n {
		key := fmt.Sprintf("key-%d", i)
		o.Refused(egress.RefusalInfo{Key: key, Attempt: 1, Err: queue.ErrFull})
		o.Waited(egress.WaitInfo{Key: key, Attempt: 1, Limiter: time.Millisecond})
		o.Paused(egress.PauseInfo{Key: key, StatusCode: 429, Duration: time.Second})
		o.Retrying(egress.RetryInfo{Key: key, Attempt: 1, StatusCode: 429})
	}
}
