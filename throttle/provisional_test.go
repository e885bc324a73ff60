package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// answerBooked is answer for a request the record booked (N: 1).
func (p *phasedWindows) answerBooked(at, sent time.Duration, stamp, remaining int) {
	p.t.Helper()
	p.clk.Set(p.base.Add(at))
	resetAt := p.base.Add(time.Duration(stamp) * time.Second)
	s := throttle.Statement{Name: "requests", Unit: throttle.UnitRequests, Limit: p.limit, Remaining: remaining,
		Reset: resetAt.Sub(p.clk.Now()), Absolute: true, ResetAt: resetAt.Add(time.Second), Precision: time.Second}
	require.NoError(p.t, p.u.Learn(context.Background(), "k", throttle.Outcome{N: 1, Latency: at - sent, Statements: []throttle.Statement{s}}))
}

// provisionalSetup books 6 requests at 10 ms; the first answer, at
// 15 ms, says 4 left (the upstream counted all 6) while 5 are still in
// flight: what is left dips to -1, and the next booking goes past the
// reset. The other 5 answers then come at 16 ms, stating others.
func provisionalSetup(t *testing.T, others int) (*phasedWindows, *throttle.Reservation) {
	p := newPhasedWindows(t, 10)
	ctx := context.Background()
	p.clk.Set(p.base.Add(10 * time.Millisecond))
	for range 6 {
		r, err := p.u.Reserve(ctx, "k", 1, time.Minute)
		require.NoError(t, err)
		require.Zero(t, r.Delay)
	}
	p.answerBooked(15*time.Millisecond, 10*time.Millisecond, 1, 4)
	r, err := p.u.Reserve(ctx, "k", 1, time.Minute)
	require.NoError(t, err)
	require.Greater(t, r.Delay, 500*time.Millisecond, "in the dip: past the reset")
	for range 5 {
		p.answerBooked(16*time.Millisecond, 10*time.Millisecond, 1, others)
	}
	return p, r
}

// A booking put past the reset only because of requests in flight that
// the statement had already counted moves back before the reset once
// the answers show the room: checked again an answer's latency later.
func TestUpstreamMovesAProvisionalBookingBack(t *testing.T) {
	p, r := provisionalSetup(t, 4)
	p.clk.Set(p.base.Add(20 * time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.NoError(t, r.Wait(ctx), "4 left with nothing in flight: it goes now, not past the reset")
	got := p.u.Stated("k")
	require.Len(t, got, 1)
	assert.Equal(t, 3, got[0].Remaining, "it took one of the 4 left before the reset")
}

// When the answers show the count was not ours (another client's share
// carried over: bench 5d), the booking stays past the reset.
func TestUpstreamKeepsAProvisionalBookingThatDoesNotFit(t *testing.T) {
	p, r := provisionalSetup(t, 0)
	p.clk.Set(p.base.Add(20 * time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var le *throttle.LimitError
	assert.ErrorAs(t, r.Wait(ctx), &le, "nothing left: it stays past the reset")
}
