package metrictest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// Instrument attaches an adapter's metrics to a Transport built with
// opts plus the adapter's Observer, and returns what to send through.
type Instrument func(opts ...egress.Option) http.RoundTripper

// LearnRates sends one request per key to a server that answers 429 to
// the key "throttled" and 200 to the others, through a Transport with
// limiter a, attached by instrument: "calm", "throttled", then "third".
func LearnRates(t *testing.T, a *throttle.Adaptive, instrument Instrument) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/throttled" {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	client := &http.Client{Transport: instrument(egress.WithLimiter(a))}
	defer client.CloseIdleConnections()
	for _, key := range []string{"calm", "throttled", "third"} {
		get(t, client, egress.WithRequestKey(context.Background(), key), srv.URL+"/"+key)
	}
}

// RedisRoundTrips sends n requests to a server of its own through a
// Transport whose limiter is a token bucket in a Redis of its own (see
// [StartRedis]), attached by instrument, on a client with hook and with
// observer for [redislimit.WithObserver]. It returns how many round
// trips a hook of its own counted.
func RedisRoundTrips(t *testing.T, n int, hook redis.Hook, observer func(redislimit.Event), instrument Instrument) int64 {
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
	client := &http.Client{Transport: instrument(egress.WithLimiter(limiter))}
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

func get(t *testing.T, client *http.Client, ctx context.Context, url string) {
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
}
