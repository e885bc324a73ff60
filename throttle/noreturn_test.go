package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// A quota of 48 whose reset is "within a second" (t rounded up, no
// window stated), booked alone. Its probe is answered with 47 left: a
// bucket refilling, or the next window of a window of a second; the
// record takes it to refill. Once the 47 are spent ("0 left, full within
// 1 s": a bucket refills at least 47 units within 2 s, the reset and its
// precision), a unit 200 ms later tells them apart: a bucket has refilled
// about 9 and admits it, a window has returned nothing and refuses it.
// The window returns only at its reset from then on: nothing goes until
// a second after the refusal's statement, then one unit alone, whose
// answer says whether it came back; what is left coming back is
// the next window, whose answers out of order never make it grow: what
// it has left goes at once, and nothing more until its reset. The bucket
// is paced as it refills, as before.
func TestUpstreamAloneTellsAWindowByItsRefill(t *testing.T) {
	tests := []struct {
		name      string
		ok        bool // the answer 200 ms after "0 left"
		remaining int  // what it states
		want      time.Duration
	}{
		{name: "a window: refused, nothing came back", ok: false, remaining: 0, want: time.Second},
		{name: "a bucket: admitted, 5 came back", ok: true, remaining: 4, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk, u := clockedUpstream(t)
			learn := func(ok bool, remaining int, latency time.Duration) {
				t.Helper()
				require.NoError(t, u.Learn(context.Background(), "k", throttle.Outcome{N: 1, Throttled: !ok, Latency: latency,
					Statements: []throttle.Statement{requests(48, remaining, time.Second, 0)}}))
			}
			learn(true, 0, 10*time.Millisecond)
			clk.Advance(900 * time.Millisecond)
			require.True(t, reserveOne(t, u).OK, "the probe")
			clk.Advance(10 * time.Millisecond)
			learn(true, 47, 10*time.Millisecond)
			delays(t, u, 47)
			clk.Advance(10 * time.Millisecond)
			for i := range 47 {
				learn(true, 46-i, 10*time.Millisecond-time.Duration(i)*time.Microsecond) // each sent after the one before
			}

			clk.Advance(200 * time.Millisecond)
			require.True(t, reserveOne(t, u).OK, "taken for a refill")
			clk.Advance(10 * time.Millisecond)
			learn(tt.ok, tt.remaining, 10*time.Millisecond)
			r := reserveOne(t, u)
			if tt.want == 0 {
				assert.True(t, r.OK, "it refills")
				return
			}
			requireHeld(t, r, tt.want) // until its reset, a second after the refusal's statement
			clk.Advance(tt.want)
			require.True(t, reserveOne(t, u).OK, "the reset: one unit alone")
			requireHeld(t, reserveOne(t, u), 2500*time.Microsecond) // until its answer: a quarter of an answer's latency
			clk.Advance(10 * time.Millisecond)
			learn(true, 47, 10*time.Millisecond) // the next window
			// Ten sent at once, answered out of order: the last one handled
			// first. The lowest remaining wins, less what is still in
			// flight: once all are in, 37 are left, not 37 less the nine
			// answered after it.
			delays(t, u, 10)
			clk.Advance(10 * time.Millisecond)
			for _, left := range []int{37, 46, 45, 44, 43, 42, 41, 40, 39, 38} {
				learn(true, left, 10*time.Millisecond)
			}
			booked := 0
			for ; booked < 48 && reserveOne(t, u).OK; booked++ {
			}
			assert.Equal(t, 37, booked, "what the window has left goes at once, and no more")
			requireHeld(t, reserveOne(t, u), 990*time.Millisecond) // until its reset, a second after the window's first statement
		})
	}
}
