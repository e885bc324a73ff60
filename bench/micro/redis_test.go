package micro

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
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
// warm-up; the writes each decision makes (SETs in the scripts); and
// the CPU redis-server spent per decision (INFO cpu), the script's work
// and the connections' I/O together.
//
// With Rate 1e9/s, redis_rate's GCRA adds 1e-9 s to a time of about
// 3e8 s in a double, whose step there is about 6e-8 s: its tat never
// moves, so it never writes (writes/op 0). egress's script keeps its
// tat exact in whole µs and ns, and writes once per decision.
// lib=redis_rate-writing is redis_rate at 1e6/s, whose tat moves: it
// writes once per decision too.
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
	// writing is as generous, but its interval (1 µs) moves redis_rate's
	// tat, so that it writes on every decision as egress does: the same
	// script work (writes/op 1), for comparison.
	writing := redis_rate.Limit{Rate: 1e6, Burst: 1e9, Period: time.Second}

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
		{"redis_rate-writing", func() error {
			res, err := rr.Allow(ctx, "bench-writing", writing)
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
			cpu0, err := serverCPU(ctx, rdb)
			if err != nil {
				b.Fatal(err)
			}
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
			cpu1, err := serverCPU(ctx, rdb)
			if err != nil {
				b.Fatal(err)
			}
			calls, err := redisserver.Calls(ctx, rdb)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(calls["eval"]+calls["evalsha"])/float64(b.N), "roundtrips/op")
			b.ReportMetric(float64(calls["set"])/float64(b.N), "writes/op")
			b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1e3/float64(b.N), "server-µs/op")
		})
	}
}

// serverCPU returns the CPU time redis-server has used, user and system,
// from INFO cpu.
func serverCPU(ctx context.Context, rdb *redis.Client) (time.Duration, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if k != "used_cpu_sys" && k != "used_cpu_user" || !ok {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %q: %w", line, err)
		}
		total += f
	}
	return time.Duration(total * float64(time.Second)), nil
}
