package throttle_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/egress-go/egress/throttle"
)

// BenchmarkRefuseNewKey is issue 11's key flood: every one of the
// default 100 000 keys holds live state (a bucket of 1/h), and each new
// key must be refused cheaply. Goal: ≤ 10 µs per refusal.
func BenchmarkRefuseNewKey(b *testing.B) {
	tb, err := throttle.NewTokenBucket(throttle.PerHour(1), 1)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range throttle.DefaultMaxKeys {
		if ok, err := tb.AllowN(ctx, strconv.Itoa(i), 1); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
	i := 0
	for b.Loop() {
		i++
		if _, err := tb.AllowN(ctx, "new-"+strconv.Itoa(i), 1); !errors.Is(err, throttle.ErrTooManyKeys) {
			b.Fatal(err)
		}
	}
}
