package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// throttled/throttled's GCRA, 48/s with a burst of 9, stating its burst,
// what remains and "full within a second" (bench scenario 5b, WithRetry
// alone). The first answer leaves 8, which go at once; the upstream
// handles them in any order, and their answers come back in any order.
// Each answer whose earlier-sent requests are all answered is a refill
// meter reading (refill.go), yet what it states was counted in the
// upstream's own order: when the second sent was handled last, its "0
// left", read with 3 answered, is a fill of 3 where the first answer's
// was 9. Taken for a refill that fell 6 short, it marked the bucket as
// returning only at its reset: 9 a second for 46 s, where the bucket
// refills 48 (bench 5b, one pass in three; the last two rows). In every order the record goes on as for a
// bucket: it sends more, or probes it at 90% of the way to the reset.
func TestUpstreamAloneBurstAnsweredOutOfOrderIsNoWindow(t *testing.T) {
	tests := []struct {
		name      string
		remaining []int // what each answer states, in the order the requests were sent
	}{
		{name: "handled as sent", remaining: []int{7, 6, 5, 4, 3, 2, 1, 0}},
		{name: "handled in reverse", remaining: []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{name: "first sent handled last", remaining: []int{0, 7, 6, 5, 4, 3, 2, 1}},
		{name: "two handled late", remaining: []int{7, 1, 0, 6, 5, 4, 3, 2}},
		{name: "second sent handled last", remaining: []int{6, 0, 7, 5, 4, 3, 2, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk, u := clockedUpstream(t)
			learn := func(remaining int, latency time.Duration) {
				t.Helper()
				require.NoError(t, u.Learn(context.Background(), "k", throttle.Outcome{N: 1, Latency: latency,
					Statements: []throttle.Statement{requests(9, remaining, time.Second, 0)}}))
			}
			learn(8, 10*time.Millisecond)
			start := clk.Now()
			for range tt.remaining {
				require.True(t, reserveOne(t, u).OK, "what the first answer left goes at once")
				clk.Advance(time.Microsecond) // each sent after the one before
			}
			clk.Advance(time.Millisecond)
			for i, left := range tt.remaining {
				learn(left, clk.Now().Sub(start)-time.Duration(i)*time.Microsecond) // answered in the order sent
			}
			// The answers to come decide what goes next: the record may
			// send more at once (a remaining that grew reads as refill), or
			// hold until the probe, 90% of the way to the first reset; never
			// until the reset itself.
			r := reserveOne(t, u)
			if !r.OK {
				require.True(t, r.Held(), "refused, not held")
				assert.Less(t, r.Delay, 950*time.Millisecond-clk.Now().Sub(start), "held until the reset: taken for a window")
				clk.Advance(r.Delay)
				assert.True(t, reserveOne(t, u).OK, "the probe")
			}
		})
	}
}
