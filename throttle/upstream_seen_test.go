package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// requestsBucket states a refilling quota of 10 requests, OpenAI-style:
// remaining left, full again after reset.
func requestsBucket(remaining int, reset time.Duration) throttle.Statement {
	return throttle.Statement{Name: "requests", Limit: 10, Remaining: remaining, Reset: reset, Refills: true}
}

// What a statement of a refilling quota has seen: none of the units
// still in flight. The quota is 10 requests refilling in 10 s, one a
// second; each case books its requests at the sending slots given, then
// learns one answer, and reads what the record holds left.
func TestUpstreamStatementSeesNothingInFlight(t *testing.T) {
	tests := []struct {
		name        string
		giveSlots   []time.Duration // when each booked request is sent, from 0
		giveAnswer  time.Duration   // when the answer arrives
		giveLatency time.Duration   // the answered request's latency
		giveStated  throttle.Statement
		wantLeft    int
	}{
		{
			// Four workers answered at one instant (testing/synctest):
			// the upstream handled the answered request first; the
			// other, sent at the same instant, reached it after.
			name:      "a unit sent at the same instant is not seen",
			giveSlots: []time.Duration{0, 0}, giveAnswer: 20 * time.Millisecond, giveLatency: 20 * time.Millisecond,
			giveStated: requestsBucket(8, 2*time.Second),
			wantLeft:   7, // 8 stated, less the other unit; the midpoint rule said 8
		},
		{
			// The answered request was sent 10 ms after the other and
			// overtook it: the other took a slower way in.
			name:      "a unit sent earlier and still in flight is not seen",
			giveSlots: []time.Duration{0, 10 * time.Millisecond}, giveAnswer: 30 * time.Millisecond, giveLatency: 20 * time.Millisecond,
			giveStated: requestsBucket(8, 2*time.Second),
			wantLeft:   7,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			clk, u := clockedUpstream(t)
			// A period of 10 s: full, less one unit, in a second.
			require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Statements: []throttle.Statement{requestsBucket(9, time.Second)}}))
			for _, at := range tt.giveSlots {
				clk.Set(epoch().Add(at))
				r, err := u.Reserve(ctx, "k", 1, 0)
				require.NoError(t, err)
				require.True(t, r.OK, "booked at once")
			}
			clk.Set(epoch().Add(tt.giveAnswer))
			require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{N: 1, Latency: tt.giveLatency, Statements: []throttle.Statement{tt.giveStated}}))
			got := u.Stated("k")
			require.Len(t, got, 1)
			assert.Equal(t, tt.wantLeft, got[0].Remaining)
		})
	}
}

// A bucket whose rate the record measures (a GCRA upstream, bench 5b) at
// 100 ms each way: each answer states the bucket as its request was sent,
// so the units booked since are taken off it at their slots, and the
// refill of the answer's latency is not given away. Anchored at the
// answer's arrival, less the units booked in the second half of the
// latency, the pace fell behind the bucket: 1.21–1.23× the least wall
// time, against 1.10×.
func TestUpstreamPacesAMeasuredBucketFarAway(t *testing.T) {
	g := &gcraUpstream{interval: time.Second / 48, burst: 9}
	run := runGCRA(t, g, throttle.PerSecond(60), 600, 32, fixed(100*time.Millisecond), time.Second)
	least := time.Duration(600-9) * g.interval
	t.Logf("wall %v (%.3f× the least), %d throttled, %d after the first second", run.wall, run.wall.Seconds()/least.Seconds(), run.throttled, run.late)
	assert.Equal(t, 0, run.late, "throttled after the first second")
	// Each refusal at the start pauses the key for a second; the rest is
	// the pace.
	assert.Less(t, run.wall.Seconds(), 1.15*least.Seconds())
}
