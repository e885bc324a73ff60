package middleware_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress/middleware"
	"github.com/egress-go/egress/throttle"
)

// headerWriter keeps only a header map, cleared between requests.
type headerWriter struct {
	h    http.Header
	code int
}

func (w *headerWriter) Header() http.Header         { return w.h }
func (w *headerWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *headerWriter) WriteHeader(code int)        { w.code = code }

// TestAllocs guards the allocation goal of issue 18: at most 2 per
// admitted request, headers included, on throttle's limiters.
func TestAllocs(t *testing.T) {
	tests := []struct {
		name string
		give throttle.Limiter
		want float64
	}{
		{name: "token bucket", give: must(throttle.NewTokenBucket(throttle.PerSecond(1_000_000_000), 1_000_000_000)), want: 2},
		// A 1 ns window: each request finds the log empty, so no run of
		// the benchmark grows it.
		{name: "sliding window", give: must(throttle.NewSlidingWindow(1_000_000, 1)), want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := middleware.New(tt.give).Wrap(okHandler)
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
			req.RemoteAddr = "203.0.113.7:5000"
			w := &headerWriter{h: http.Header{}}
			h.ServeHTTP(w, req)
			got := testing.AllocsPerRun(100, func() {
				clear(w.h)
				h.ServeHTTP(w, req)
			})
			assert.Equal(t, 0, w.code, "admitted")
			assert.LessOrEqual(t, got, tt.want)
		})
	}
}
