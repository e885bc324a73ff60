package throttle

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// After a window a statement says was spent, the pace of a quota not yet
// told fixed or sliding starts one spacing after the reset, not at it: a
// sliding counter whose previous window holds its limit has no room at
// the boundary (5d). Bookings paced from the reset before the statement
// came move later to it. (With no other client, "spent" is a remaining
// of 0; with others it counts their expected spend, see
// TestUpstreamKeepsAFirstWindowsOthersOutOfThePace.)
func TestUpstreamStartsThePaceAfterASpentWindowOneSpacingLate(t *testing.T) {
	const sp = time.Second/9 + 1 // 10 a window less the unit of headroom, rounded up
	tests := []struct {
		name     string
		giveLast int // the remaining the last answer before the bookings states
		want     []time.Duration
	}{
		// The window ends at or before 1.4 s (600 ms stated left, a
		// second's precision); the bookings are made at 0.41 s.
		{"spent before the bookings", 0, []time.Duration{990*time.Millisecond + sp, 990*time.Millisecond + 2*sp}},
		{"spent by the first booking", 1, []time.Duration{0, 990*time.Millisecond + sp, 990*time.Millisecond + 2*sp}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			now := base
			u, err := NewUpstream(WithClock(func() time.Time { return now }))
			require.NoError(t, err)
			answer := func(at time.Duration, n, remaining int) {
				t.Helper()
				now = base.Add(at)
				s := tenPerSecond(now, base.Add(time.Second), remaining)
				require.NoError(t, u.Learn(context.Background(), "k", Outcome{N: n, Latency: 5 * time.Millisecond, Statements: []Statement{s}}))
			}
			for r := 9; r >= tt.giveLast; r-- { // ours, one at a time: no other client
				answer(400*time.Millisecond, 0, r)
			}
			now = base.Add(410 * time.Millisecond)
			var rs []*Reservation
			for range len(tt.want) {
				// Without holds: the pace itself (holdBoundary holds all
				// but the first booking past the reset until its answer).
				r, err := u.reserve(context.Background(), "k", 1, nil, 0, -1, false, false)
				require.NoError(t, err)
				rs = append(rs, r)
			}
			if tt.giveLast > 0 {
				answer(410*time.Millisecond, 1, 0) // the first booking's answer: spent
			}
			var got []time.Duration
			for _, r := range rs {
				got = append(got, r.booking.Until())
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
