package redislimit

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
)

// TestAdaptiveThroughTransport: a Transport feeds the limiter through
// Learn; the 429 rides in the retry's booking, which cuts the fleet's
// rate, and another process reads the cut rate in its next call.
func TestAdaptiveThroughTransport(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	a, b := newAdaptive(t, s, c), newAdaptive(t, s, c)

	var mu sync.Mutex
	calls := 0
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		c.advance(time.Second) // a second on Redis's clock: every slot booked so far is due
		calls++
		if calls == 1 {
			w.WriteHeader(http.StatusTooManyRequests) // bare: no Retry-After, no headers
		}
	}))
	defer upstream.Close()
	host := upstream.Listener.Addr().String()

	client := egress.NewClient(egress.WithLimiter(a), egress.WithRetry(retryafter.Policy{}))
	defer client.CloseIdleConnections()
	resp, err := client.Get(upstream.URL)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 2, calls)
	assert.Equal(t, 70.0, a.Rate(host), "the 429 rode in the retry's booking: cut by β")

	assert.Equal(t, 100.0, b.Rate(host), "b has not called yet")
	adaptiveBook(t, b, host)
	assert.Equal(t, 70.0, b.Rate(host))
}

// TestAdaptiveThroughTransportHoldsSpentQuota: a 200 stating a quota at
// 0 holds every process in the key's next call, and the Transport does
// not pause the key for it: that was a round trip of its own, and a
// whole reset for every answer of a bucket that states "r=0;t=1" on
// each.
func TestAdaptiveThroughTransportHoldsSpentQuota(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	a, b := newAdaptive(t, s, c), newAdaptive(t, s, c)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("RateLimit", `"q";r=0;t=1`)
		w.Header().Set("RateLimit-Policy", `"q";q=10;w=1`)
	}))
	defer upstream.Close()
	host := upstream.Listener.Addr().String()

	var paused atomic.Int64
	client := egress.NewClient(egress.WithLimiter(a), egress.WithRetry(retryafter.Policy{}),
		egress.WithObserver(&egress.Observer{Paused: func(egress.PauseInfo) { paused.Add(1) }}))
	defer client.CloseIdleConnections()
	resp, err := client.Get(upstream.URL)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	assert.Zero(t, paused.Load(), "the Transport paused the key")

	adaptiveBook(t, a, host) // carries the answer
	assert.GreaterOrEqual(t, adaptiveBook(t, b, host).Until(), 900*ms, "another process is held to the reset")
}
