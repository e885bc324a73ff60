package middleware_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/middleware"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// TestRedisUnreachable checks that the limiter's failure policy decides,
// and that the response says so: a Redis that refuses connections, with
// each failure policy.
func TestRedisUnreachable(t *testing.T) {
	tests := []struct {
		name         string
		givePolicy   redislimit.FailurePolicy
		wantStatus   int
		wantDegraded string
		wantField    string
	}{
		{name: "fail closed", givePolicy: redislimit.FailClosed, wantStatus: 503, wantDegraded: "closed"},
		{name: "fail open", givePolicy: redislimit.FailOpen, wantStatus: 200, wantDegraded: "open", wantField: `"bucket";r=0;t=1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
			defer rdb.Close()
			var down atomic.Bool
			l, err := redislimit.NewTokenBucket(rdb, throttle.PerSecond(10), 10,
				redislimit.WithFailurePolicy(tt.givePolicy),
				redislimit.WithTimeout(100*time.Millisecond),
				redislimit.WithObserver(func(e redislimit.Event) { down.Store(!e.Recovered) }),
			)
			require.NoError(t, err)
			defer l.Close()
			h := middleware.New(l, middleware.WithDegraded(down.Load)).Wrap(okHandler)

			resp := get(h, "203.0.113.7:1")
			assert.Equal(t, tt.wantStatus, resp.StatusCode)
			assert.Equal(t, tt.wantDegraded, resp.Header.Get(middleware.HeaderDegraded))
			assert.Equal(t, tt.wantField, resp.Header.Get("RateLimit"))
			if tt.wantStatus == http.StatusServiceUnavailable {
				assert.Equal(t, "1", resp.Header.Get("Retry-After"))
			}
		})
	}
}

// TestDescribeRedis checks that redislimit's limiters are described as
// throttle's are, without this package importing go-redis.
func TestDescribeRedis(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	tests := []struct {
		name string
		give func() (throttle.Limiter, error)
		want string
	}{
		{name: "token bucket", give: func() (throttle.Limiter, error) { return redislimit.NewTokenBucket(rdb, throttle.PerSecond(50), 50) }, want: `"bucket";q=50;w=1`},
		{name: "fixed window", give: func() (throttle.Limiter, error) { return redislimit.NewFixedWindow(rdb, 100, 24*time.Hour) }, want: `"fixed";q=100;w=86400`},
		{name: "sliding window", give: func() (throttle.Limiter, error) { return redislimit.NewSlidingWindow(rdb, 10, time.Minute) }, want: `"sliding";q=10;w=60`},
		{name: "sliding window counter", give: func() (throttle.Limiter, error) { return redislimit.NewSlidingWindowCounter(rdb, 10, time.Minute) }, want: `"sliding";q=10;w=60`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := tt.give()
			require.NoError(t, err)
			defer l.(interface{ Close() error }).Close()
			assert.Equal(t, tt.want, middleware.Describe(l).String())
		})
	}
	t.Run("leaky bucket", func(t *testing.T) {
		l, err := redislimit.NewLeakyBucket(rdb, throttle.PerSecond(1), 1)
		require.NoError(t, err)
		defer l.Close()
		assert.PanicsWithValue(t, "middleware: Describe cannot describe a *redislimit.LeakyBucket: give it token buckets and windows from throttle or redislimit", func() { middleware.Describe(l) })
	})
}
