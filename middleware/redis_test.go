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
