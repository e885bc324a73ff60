package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// Answers to requests in flight together reach the record in any order.
// Of one window's statements the lowest remaining wins, less what is in
// flight now: an answer that arrives after the lowest, stating more, was
// handled before it, and counting it in flight against the lowest took
// it twice (the README recipe against a fixed window, IETF and x delta,
// lost units of its first windows so, and a whole window at the end).
func TestUpstreamUnorderedAnswersCountOnce(t *testing.T) {
	tests := []struct {
		name       string
		giveLate   []int // the remaining each late answer states, after the lowest
		wantDelays []time.Duration
	}{
		{name: "no late answer", wantDelays: ms(0, 1000, 1100, 1200)},
		{name: "one late answer", giveLate: []int{6}, wantDelays: ms(0, 0, 1000, 1100)},
		{name: "two late answers", giveLate: []int{7, 6}, wantDelays: ms(0, 0, 0, 1000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, u := clockedUpstream(t)
			ctx := context.Background()
			assert.Equal(t, ms(0, 0, 0, 0), delays(t, u, 4), "four in flight")
			// The last handled is answered first: 4 left of 10 (a
			// window of 1 s, reset in 1 s), 3 more in flight.
			learn := func(remaining int) {
				require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{N: 1, Statements: []throttle.Statement{requests(10, remaining, time.Second, time.Second)}}))
			}
			learn(4)
			for _, r := range tt.giveLate {
				learn(r)
			}
			assert.Equal(t, tt.wantDelays, delays(t, u, 4))
		})
	}
}

// An answer wins as the later statement only when its request reached the
// upstream later as far as anyone can tell: sent after the winning
// statement arrived, or so long after the winner's request that the
// difference of their ways there cannot make up for it (half the
// difference of their round trips). Five requests leave together; the
// upstream handles B first (9 of 10 left) and A last (5 left). A, sent at
// 0.1 ms, is answered at 1 ms; B, sent 0.1 ms after it, at 2 ms: its way
// there may have been 0.45 ms shorter. Taken as the later statement, B's
// 9 less the 3 still in flight let 6 go where 5 remained
// (didip/tollbooth, 32 goroutines, WithRetry alone: 20 429s in 600). Of
// answers not known to be later the lowest remaining counts, less what is
// in flight now: A's 5 less the 3 still in flight lets 2 go. (The lower
// of what each left at its arrival, A's 5 less the 4 then in flight, let
// 1 go, and counted B twice, handled before A and answered after it.)
func TestUpstreamAnswersInFlightTogetherAreUnordered(t *testing.T) {
	clk, u := clockedUpstream(t)
	ctx := context.Background()
	assert.Equal(t, ms(0, 0, 0, 0, 0), delays(t, u, 5), "five in flight")
	answer := func(remaining int, latency time.Duration) {
		require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{N: 1, Latency: latency, Statements: []throttle.Statement{requests(10, remaining, time.Second, time.Second)}}))
	}
	clk.Advance(time.Millisecond)
	answer(5, 900*time.Microsecond) // A, sent at 0.1 ms
	clk.Advance(time.Millisecond)
	answer(9, 1800*time.Microsecond) // B, sent at 0.2 ms
	got := delays(t, u, 3)
	assert.Equal(t, ms(0, 0), got[:2])
	assert.Greater(t, got[2], time.Duration(0), "the third waits for the reset")

	// C, sent after A's answer arrived, was handled after A: it wins,
	// though it states more (a bucket refilled, or a sliding window's
	// estimate decayed).
	clk.Advance(time.Millisecond)
	answer(8, 500*time.Microsecond)
	assert.Equal(t, ms(0, 0), delays(t, u, 2), "8 left, 5 in flight")
}

// A later answer in a window takes off what is left only the units in
// flight before the window's reset: those booked past it count in the
// next window. Each answer's reset, stated as a delay from its arrival,
// lies a little later than the first's, and taken as the window's it
// counted the units booked past the window's reset as in flight before
// it (the README recipe against a fixed window stating delays, 32
// goroutines with a millisecond each way).
func TestUpstreamLaterAnswerCountsOnlyItsWindowInFlight(t *testing.T) {
	clk, u := clockedUpstream(t)
	ctx := context.Background()
	learn := func(remaining int, latency time.Duration) {
		require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{N: 1, Latency: latency, Statements: []throttle.Statement{
			{Name: "requests", Unit: throttle.UnitRequests, Limit: 10, Remaining: remaining, Reset: 4 * time.Second},
		}}))
	}
	learn(10, time.Millisecond)
	assert.Equal(t, ms(0, 0, 0, 0, 0), pacedDelays(t, u, 5), "five in flight")
	// The last of the five handled is answered first: 3 left (another
	// client spent 2), 4 more in flight. The next two go at the reset.
	clk.Advance(2 * time.Millisecond)
	learn(3, 2*time.Millisecond)
	assert.Equal(t, ms(3998, 3998), pacedDelays(t, u, 2))
	for _, r := range []int{4, 5, 6, 7} {
		learn(r, 2*time.Millisecond)
	}
	clk.Advance(time.Millisecond)
	assert.Equal(t, ms(0), pacedDelays(t, u, 1), "3 left, none in flight before the reset")
	// Its answer, sent after the lowest arrived, is the later statement:
	// 2 left, with nothing in flight before the reset.
	clk.Advance(2 * time.Millisecond)
	learn(2, 2*time.Millisecond)
	assert.Equal(t, ms(0, 0), pacedDelays(t, u, 2))
}
