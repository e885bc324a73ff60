package redislimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress/throttle"
)

// A token bucket at an LLM API's token rate refills at that rate: 30 000
// tokens a second is an interval of 33.3 µs, and 3 000 tokens past an
// empty bucket are due 100 ms later, not 102 ms (an interval rounded up
// to 34 µs). At 150M tokens per minute (2.5M/s, 0.4 µs) rounding up to
// 1 µs would refill at 40% of the rate.
func TestTokenBucketHighRateKeepsItsRate(t *testing.T) {
	for _, tt := range []struct {
		name string
		rate throttle.Rate
		n    int
		want time.Duration
	}{
		{"30k per second", throttle.Rate{N: 30_000, Per: time.Second}, 3_000, 100 * ms},
		{"150M per minute", throttle.Rate{N: 150_000_000, Per: time.Minute}, 250_000, 100 * ms},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startRedis(t)
			clk := newClock(0)
			tb, err := NewTokenBucket(s.client(t), tt.rate, tt.rate.N, clk.option())
			if err != nil {
				t.Fatal(err)
			}
			defer tb.Close()
			reserve(t, tb, "k", tt.rate.N, -1) // empty the bucket
			r := reserve(t, tb, "k", tt.n, -1)
			assert.InDelta(t, tt.want.Seconds(), r.Delay.Seconds(), 0.001, "delay of %d units past an empty bucket", tt.n)
		})
	}
}
