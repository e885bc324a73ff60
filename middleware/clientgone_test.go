package middleware_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress/middleware"
	"github.com/egress-go/egress/throttle"
)

// TestClientGoneIsNotDegraded: a request whose client has already gone
// away (its context is cancelled, as net/http does when the connection
// closes or an HTTP/2 stream is reset) must not be answered with
// X-RateLimit-Degraded: closed, the header operators alert on, which the
// docs reserve for a limiter that could not decide (Redis away).
func TestClientGoneIsNotDegraded(t *testing.T) {
	limiters := map[string]throttle.Limiter{
		"token bucket":   must(throttle.NewTokenBucket(throttle.PerSecond(10), 10)),
		"leaky bucket":   must(throttle.NewLeakyBucket(throttle.PerSecond(10), 5)),
		"fixed window":   must(throttle.NewFixedWindow(20, 10*time.Second)),
		"sliding window": must(throttle.NewSlidingWindow(20, 10*time.Second)),
	}
	for name, l := range limiters {
		for _, wait := range []time.Duration{0, time.Second} {
			opts := []middleware.Option{}
			if wait > 0 {
				opts = append(opts, middleware.WithMaxWait(wait))
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			req := httptest.NewRequest(http.MethodGet, "http://api.test/", nil).WithContext(ctx)
			rec := httptest.NewRecorder()
			middleware.New(l, opts...).Wrap(okHandler).ServeHTTP(rec, req)
			assert.Empty(t, rec.Header().Get(middleware.HeaderDegraded), "%s, max wait %v: a client gone away is not a degraded limiter", name, wait)
		}
	}
}
