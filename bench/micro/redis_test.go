package micro

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/egress-go/egress/bench/internal/redisserver"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// redisGoroutines is how many goroutines share one key in
// BenchmarkRedisDecision.
const redisGoroutines = 64

// BenchmarkRedisDecision measures one decision against a private
// redis-server from 64 goroutines on one key: egress's redislimit token
// bucket (Reserve) against go-redis/redis_rate (Allow), with a limit so
// generous that every decision admits. It reports round trips per
// decision from INFO commandstats: (EVAL + EVALSHA) / decisions, after a
// warm-up.
func BenchmarkRedisDecision(b *testing.B) {
	ctx := context.Background()
	srv, err := redisserver.Start(ctx)
	if errors.Is(err, redisserver.ErrMissing) {
		b.Skip("redis-server is not installed")
	}
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: redisGoroutines})
	defer rdb.Close()

	// redis_rate's calls are bounded only by the client's ReadTimeout and
	// WriteTimeout (3 s by default); egress's get the same bound instead
	// of DefaultTimeout, so that a busy machine that holds a pipeline of
	// 63 calls past 250 ms fails neither library.
	timeout := redislimit.WithTimeout(3 * time.Second)
	tb, err := redislimit.NewTokenBucket(rdb, throttle.Rate{N: 1e9, Per: time.Second}, 1e9, timeout)
	if err != nil {
		b.Fatal(err)
	}
	defer tb.Close()
	// The same bucket following the upstream's statements (WithStated):
	// its calls carry the record and take the general path.
	stated, err := redislimit.NewTokenBucket(rdb, throttle.Rate{N: 1e9, Per: time.Second}, 1e9, timeout, redislimit.WithStated(throttle.UnitRequests))
	if err != nil {
		b.Fatal(err)
	}
	defer stated.Close()
	rr := redis_rate.NewLimiter(rdb)
	limit := redis_rate.Limit{Rate: 1e9, Burst: 1e9, Period: time.Second}

	for _, c := range []struct {
		lib    string
		decide func() error
	}{
		{"egress-redislimit", func() error {
			r, err := tb.Reserve(ctx, "bench", 1, 0)
			if err == nil && !r.OK {
				err = errors.New("refused")
			}
			return err
		}},
		{"egress-redislimit-stated", func() error {
			r, err := stated.Reserve(ctx, "bench-stated", 1, 0)
			if err == nil && !r.OK {
				err = errors.New("refused")
			}
			return err
		}},
		{"redis_rate", func() error {
			res, err := rr.Allow(ctx, "bench", limit)
			if err == nil && res.Allowed != 1 {
				err = errors.New("refused")
			}
			return err
		}},
	} {
		b.Run("lib="+c.lib, func(b *testing.B) {
			for range 100 { // warm-up: load the script, fill the pool
				if err := c.decide(); err != nil {
					b.Fatal(err)
				}
			}
			if err := redisserver.ResetStats(ctx, rdb); err != nil {
				b.Fatal(err)
			}
			procs := runtime.GOMAXPROCS(0)
			b.SetParallelism((redisGoroutines + procs - 1) / procs)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := c.decide(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			calls, err := redisserver.Calls(ctx, rdb)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(calls["eval"]+calls["evalsha"])/float64(b.N), "roundtrips/op")
		})
	}
}
