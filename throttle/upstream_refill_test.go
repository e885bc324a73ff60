package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// outputTokens is a statement of an Anthropic-style output-tokens quota:
// a token bucket whose reset is when it is full again.
func outputTokens(limit, remaining int, reset time.Duration) throttle.Statement {
	return throttle.Statement{Name: "output-tokens", Unit: "output-tokens", Limit: limit, Remaining: remaining, Reset: reset, Refills: true}
}

// bookTokens books 1 request and n output tokens of "k" and returns the
// delay.
func bookTokens(t *testing.T, u *throttle.Upstream, n int) time.Duration {
	t.Helper()
	r, err := u.ReserveUnits(context.Background(), "k", 1, map[string]int{"output-tokens": n}, 0, -1)
	require.NoError(t, err)
	require.True(t, r.OK)
	return r.Delay
}

// A refilling quota is a token bucket: what is left now, then its limit
// per period, the period estimated from reset × L / (L − R).
func TestUpstreamRefillingQuota(t *testing.T) {
	tests := []struct {
		name       string
		giveStated throttle.Statement
		giveCosts  []int
		wantDelays []time.Duration
	}{
		{"400 of 1000 left, full in 600 ms: a period of 1 s",
			outputTokens(1000, 400, 600*time.Millisecond), []int{400, 400, 100},
			ms(0, 400, 500)},
		{"full: no pace known yet, the configured limiter paces",
			outputTokens(1000, 1000, 0), []int{1000, 1000},
			ms(0, 0)},
		{"empty, full in 2 s: 500 per second",
			outputTokens(1000, 0, 2*time.Second), []int{500, 500},
			ms(1000, 2000)},
		{"a cost above the limit waits past full",
			outputTokens(1000, 0, time.Second), []int{1500},
			ms(1500)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, u := clockedUpstream(t)
			require.NoError(t, u.Learn(context.Background(), "k", throttle.Outcome{Statements: []throttle.Statement{tt.giveStated}}))
			var got []time.Duration
			for _, n := range tt.giveCosts {
				got = append(got, bookTokens(t, u, n))
			}
			assert.Equal(t, tt.wantDelays, got)
		})
	}
}

// Units booked after the upstream spoke are taken off what it stated;
// units it has seen are not taken twice; and Reserve, which books only
// requests, is not held back by a quota in tokens.
func TestUpstreamRefillingQuotaInFlight(t *testing.T) {
	clk, u := clockedUpstream(t)
	ctx := context.Background()
	// Establish a period of 1 s for 1000 tokens.
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Statements: []throttle.Statement{outputTokens(1000, 500, 500*time.Millisecond)}}))
	assert.Equal(t, time.Duration(0), bookTokens(t, u, 300), "sent at 0")
	clk.Advance(100 * time.Millisecond)
	assert.Equal(t, time.Duration(0), bookTokens(t, u, 200), "sent at 100 ms")
	// The answer to the first, sent at 0 and back at 200 ms: the upstream
	// spoke at 100 ms at the latest, before the second arrived. It says
	// 300 left, full in 700 ms.
	clk.Advance(100 * time.Millisecond)
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{N: 1, Latency: 200 * time.Millisecond,
		Statements: []throttle.Statement{outputTokens(1000, 300, 700*time.Millisecond)}}))
	got := u.Stated("k")
	require.Len(t, got, 1)
	assert.Equal(t, 100, got[0].Remaining, "300 stated less the 200 booked at 100 ms, which it may not have seen")
	assert.Equal(t, 900*time.Millisecond, got[0].Reset)
	assert.Equal(t, time.Second, got[0].Window, "the period")
	assert.Equal(t, 300*time.Millisecond, bookTokens(t, u, 300),
		"100 left, 200 more refill in 200 ms, and 100 kept in reserve: the record expected 200 left, so others spent 100")

	// Another client spent 600: the next statement says so, and the
	// record follows it, not what it booked itself.
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{N: 1, Latency: time.Millisecond,
		Statements: []throttle.Statement{outputTokens(1000, 0, time.Second)}}))
	assert.Equal(t, 700*time.Millisecond, bookTokens(t, u, 300), "the 300 booked in flight, then 300 more, then the reserve")

	r, err := u.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	assert.Equal(t, time.Duration(0), r.Delay, "requests only: a quota in tokens takes nothing")
}

// Of two answers, the one for the request sent later wins.
func TestUpstreamRefillingQuotaOutOfOrder(t *testing.T) {
	clk, u := clockedUpstream(t)
	ctx := context.Background()
	clk.Advance(time.Second)
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Latency: 100 * time.Millisecond,
		Statements: []throttle.Statement{outputTokens(1000, 900, 100*time.Millisecond)}}))
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Latency: 500 * time.Millisecond,
		Statements: []throttle.Statement{outputTokens(1000, 0, time.Second)}}))
	got := u.Stated("k")
	require.Len(t, got, 1)
	assert.Equal(t, 900, got[0].Remaining, "the older view, arrived late, is ignored")
}

func TestUpstreamReserveUnitsRefusesNegative(t *testing.T) {
	u, err := throttle.NewUpstream()
	require.NoError(t, err)
	_, err = u.ReserveUnits(context.Background(), "k", 1, map[string]int{"input-tokens": -3}, 0, -1)
	assert.ErrorContains(t, err, `"input-tokens"`)
	assert.ErrorContains(t, err, "-3")
}
