package micro

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/egress-go/egress/throttle"
	"golang.org/x/time/rate"
)

// memKeys is how many keys hold live state in BenchmarkMemoryPerKey.
const memKeys = 1_000_000

// BenchmarkMemoryPerKey reports the heap each key costs while it holds
// live state (one unit booked against a budget of 1 per hour), at
// 1 000 000 keys with WithMaxKeys(1e6), against x/time/rate kept in a
// map. Key strings are allocated before measuring and are not counted.
// Each iteration fills a new limiter, so b.N only repeats the
// measurement; ns/op is the time to fill one.
func BenchmarkMemoryPerKey(b *testing.B) {
	ks := make([]string, memKeys)
	for i := range ks {
		ks[i] = fmt.Sprintf("key-%07d", i)
	}
	ctx := context.Background()
	for _, a := range algorithms() {
		b.Run("lib=egress-"+a.name, func(b *testing.B) {
			for b.Loop() {
				perKey := heapPerKey(b, func() any {
					l, err := a.stingy(throttle.WithMaxKeys(memKeys))
					if err != nil {
						b.Fatal(err)
					}
					for _, k := range ks {
						if r, err := l.Reserve(ctx, k, 1, 0); err != nil || !r.OK {
							b.Fatalf("reserve %s: %v %v", k, r, err)
						}
					}
					return l
				})
				b.ReportMetric(perKey, "B/key")
			}
		})
	}
	b.Run("lib=x-time-rate", func(b *testing.B) {
		for b.Loop() {
			perKey := heapPerKey(b, func() any {
				m := make(map[string]*rate.Limiter)
				for _, k := range ks {
					l := rate.NewLimiter(rate.Every(3600e9), 1)
					l.Allow()
					m[k] = l
				}
				return m
			})
			b.ReportMetric(perKey, "B/key")
		}
	})
}

// heapPerKey returns the live heap that fill's result holds, per key.
func heapPerKey(b *testing.B, fill func() any) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := fill()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / memKeys
}
