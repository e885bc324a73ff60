package redislimit

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/throttle"
)

// TestStatedThroughTransport: two processes' Transports share a token
// budget in Redis; the upstream's headers, read by one Transport, bound
// what the other may book. Another client spent 300 of the upstream's
// 1000 tokens, which neither process can see but the headers state.
func TestStatedThroughTransport(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	a, b := newStatedProc(t, s, c), newStatedProc(t, s, c)

	var mu sync.Mutex
	still := 1000 - 300 // the other client's spend
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		c.advance(time.Second) // the call takes a second on Redis's clock
		still -= 100
		w.Header().Set("X-Ratelimit-Limit-Tokens", "1000")
		w.Header().Set("X-Ratelimit-Remaining-Tokens", strconv.Itoa(still))
		w.Header().Set("X-Ratelimit-Reset-Tokens", "18s")
		mu.Unlock()
	}))
	defer upstream.Close()

	// 1000 tokens a minute: a token refills in 60ms. The request's real
	// latency (a Transport measures it on the wall clock) moves the
	// result by a token per 60ms of it.
	perMinute := func(p *statedProc) *TokenBucket {
		l, err := NewTokenBucket(p.client.rdb, throttle.PerMinute(1000), 1000, WithClient(p.client), WithStated("tokens"))
		require.NoError(t, err)
		return l
	}
	la, lb := perMinute(a), perMinute(b)
	host := upstream.Listener.Addr().String()
	client := egress.NewClient(egress.WithLimiter(la), egress.WithCost(func(*http.Request) int { return 100 }))
	defer client.CloseIdleConnections()
	resp, err := client.Get(upstream.URL)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, 916, left(t, lb, host), "the other process, before a call carries the headers: 900, and a second's refill")

	// The next call from a's process carries them: the bucket held at
	// most 600 when the request was sent, a second ago less the latency.
	got := left(t, la, host)
	assert.GreaterOrEqual(t, got, 600)
	assert.Less(t, got, 700, "600, and a token per 60ms of the request's real latency")
	assert.Equal(t, got, left(t, lb, host), "the other process sees it")
	r := reserve(t, lb, host, 700, 0)
	assert.False(t, r.OK, "700 fit before the headers were heard")
}
