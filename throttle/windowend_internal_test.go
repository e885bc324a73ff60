package throttle

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What is left comes back at a fixed window's boundary, and at a sliding
// counter's too after a long enough silence: only a return across a
// short silence (a quarter of the window) tells a fixed window.
func TestUpstreamTellsAFixedWindowOnlyAcrossAShortSilence(t *testing.T) {
	tests := []struct {
		name      string
		giveLast  time.Duration // when the last answer of the first window arrived
		wantFixed bool
	}{
		{"an answer 5 ms before the boundary", 1295 * time.Millisecond, true},
		{"a second of silence", 300 * time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			now := base
			u, err := NewUpstream(WithClock(func() time.Time { return now }))
			require.NoError(t, err)
			answer := func(at time.Duration, stamp, remaining int) {
				t.Helper()
				now = base.Add(at)
				resetAt := base.Add(time.Duration(stamp) * time.Second)
				s := Statement{Name: "requests", Unit: UnitRequests, Limit: 10, Remaining: remaining,
					Reset: resetAt.Sub(now), Absolute: true, ResetAt: resetAt.Add(time.Second), Precision: time.Second}
				require.NoError(t, u.Learn(context.Background(), "k", Outcome{Latency: 5 * time.Millisecond, Statements: []Statement{s}}))
			}
			answer(100*time.Millisecond, 1, 1)
			answer(tt.giveLast, 1, 0)
			answer(1305*time.Millisecond, 2, 9) // it came back
			q := u.keys["k"].quotas[0]
			assert.Equal(t, tt.wantFixed, q.fixed)
			assert.False(t, q.sliding)
		})
	}
}
