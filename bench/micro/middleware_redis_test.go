package micro

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress/bench/internal/redisserver"
	"github.com/egress-go/egress/middleware"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// countingHook counts the commands go-redis sends, pipelines included.
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1) // one round trip
		return next(ctx, cmds)
	}
}

// BenchmarkMiddlewareRedis measures a request through the middleware over
// a redislimit token bucket in a private redis-server, on 10 000 client
// IPs, and reports Redis round trips per request (goal: 1).
func BenchmarkMiddlewareRedis(b *testing.B) {
	ctx := context.Background()
	srv, err := redisserver.Start(ctx)
	if errors.Is(err, redisserver.ErrMissing) {
		b.Skip("redis-server is not installed")
	}
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	hook := &countingHook{}
	rdb.AddHook(hook)

	// A generous timeout: on a loaded machine the default's fail-closed
	// would turn a slow answer into a 503.
	tb, err := redislimit.NewTokenBucket(rdb, throttle.Rate{N: 1e9, Per: time.Second}, 1e9, redislimit.WithTimeout(5*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer tb.Close()
	h := middleware.New(tb).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	reqs := clientRequests(numKeys)
	w := &discardWriter{h: http.Header{}}
	h.ServeHTTP(w, reqs[0]) // loads the script

	hook.n.Store(0)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, reqs[i])
		if w.code > 299 || w.h.Get("RateLimit") == "" {
			b.Fatalf("refused or no headers: %d %v", w.code, w.h)
		}
		if i++; i == len(reqs) {
			i = 0
		}
	}
	b.ReportMetric(float64(hook.n.Load())/float64(b.N), "roundtrips/op")
}
