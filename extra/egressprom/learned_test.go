package egressprom_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/extra/egressprom"
	"github.com/egress-go/egress/internal/metriclabel/metrictest"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// TestLearnedRate sends requests through an Adaptive limiter to an
// upstream that throttles one key, and scrapes the rate it learned.
func TestLearnedRate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/throttled" {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	a, err := throttle.NewAdaptive(throttle.PerSecond(1000))
	require.NoError(t, err)
	m := egressprom.New(egressprom.WithLearnedRate(a), egressprom.WithMaxKeys(2))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	tr := egress.NewTransport(nil, egress.WithLimiter(a), egress.WithObserver(m.Observer(nil)))
	client := &http.Client{Transport: m.Instrument(tr)}
	defer client.CloseIdleConnections()
	for _, c := range []struct{ key, path string }{{"calm", "/"}, {"throttled", "/throttled"}, {"third", "/"}} {
		req, err := http.NewRequestWithContext(egress.WithRequestKey(context.Background(), c.key), http.MethodGet, srv.URL+c.path, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
	}

	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "egress_learned_rate" {
			continue
		}
		for _, s := range mf.GetMetric() {
			got[s.GetLabel()[0].GetValue()] = s.GetGauge().GetValue()
		}
	}
	assert.Equal(t, map[string]float64{"calm": a.Rate("calm"), "throttled": a.Rate("throttled")}, got,
		"one series per key within the cap of 2, none for the third")
	assert.Equal(t, 1000.0, got["calm"])
	assert.Less(t, got["throttled"], 1000.0, "a 429 cut the rate")
}

// TestRedisRoundTrips sends requests through a Redis token bucket whose
// client has the hook, and counts the round trips scraped against a hook
// of the test's own.
func TestRedisRoundTrips(t *testing.T) {
	srv := upstream(t)
	m := egressprom.New()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	rdb := redis.NewClient(metrictest.StartRedis(t))
	defer rdb.Close()
	var trips metrictest.Counting
	rdb.AddHook(m.RedisHook())
	rdb.AddHook(&trips)
	limiter, err := redislimit.NewTokenBucket(rdb, throttle.PerSecond(1000), 100, redislimit.WithObserver(m.RedisObserver(nil)))
	require.NoError(t, err)
	defer limiter.Close()
	client := &http.Client{Transport: m.Instrument(egress.NewTransport(nil, egress.WithLimiter(limiter), egress.WithObserver(m.Observer(nil))))}
	defer client.CloseIdleConnections()
	for range 5 {
		resp, err := client.Get(srv.URL + "/ok")
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
	}

	n, sum := histogram(t, reg, "egress_redis_round_trip_duration_seconds", map[string]string{"error_type": ""})
	assert.GreaterOrEqual(t, n, uint64(5), "one script call per request at least")
	assert.Equal(t, uint64(trips.N.Load()), n, "every round trip the client made")
	assert.Greater(t, sum, 0.0)

	// A client whose server is gone: its round trip fails.
	gone := redis.NewClient(&redis.Options{Network: "unix", Addr: t.TempDir() + "/none.sock", MaxRetries: -1})
	defer gone.Close()
	gone.AddHook(m.RedisHook())
	require.Error(t, gone.Ping(context.Background()).Err())
	failed, _ := histogram(t, reg, "egress_redis_round_trip_duration_seconds", map[string]string{"error_type": "_OTHER"})
	assert.Equal(t, uint64(1), failed)
}
