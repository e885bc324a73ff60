package throttle_test

import (
	"context"
	"sync"
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

// A send is dated from when Learn is called, not from when it gets the
// record's lock: on a key 32 callers book and learn on, the wait for the
// lock dated a send up to a millisecond late, after the arrival of an
// answer to a request the upstream handled later, and the higher
// remaining won as the later statement (bench 5c, go-limiter's fixed
// window: told sliding, the README recipe then paced every window, 1.05×
// in about one pass in ten). Five requests leave together; A, sent at
// 0.1 ms, states 5 left at 1 ms; B, sent at 0.2 ms and handled before A,
// states 9. B's Learn is called at 1.2 ms and waits for the lock until
// 3 ms. Dated from 3 ms, B's send came after A's answer: 9 won, less the
// 3 in flight, and 6 went at once where 2 remained.
func TestUpstreamSendDatedFromLearnsCall(t *testing.T) {
	clk := &hookedClock{manualClock: newManualClock()}
	u, err := throttle.NewUpstream(throttle.WithClock(clk.Now))
	require.NoError(t, err)
	ctx := context.Background()
	assert.Equal(t, ms(0, 0, 0, 0, 0), delays(t, u, 5), "five in flight")
	answer := func(remaining int, latency time.Duration) error {
		return u.Learn(ctx, "k", throttle.Outcome{N: 1, Latency: latency, Statements: []throttle.Statement{requests(10, remaining, time.Second, time.Second)}})
	}
	clk.Advance(time.Millisecond)
	require.NoError(t, answer(5, 900*time.Microsecond)) // A

	// Another call holds the lock, stopped in its read of the clock.
	held, release := clk.next(true)
	inspected := make(chan error, 1)
	go func() {
		_, err := u.Inspect(ctx, "k")
		inspected <- err
	}()
	<-held
	clk.Advance(200 * time.Microsecond)
	called, _ := clk.next(false)
	learned := make(chan error, 1)
	go func() { learned <- answer(9, time.Millisecond) }() // B, sent at 0.2 ms
	select {
	case <-called:
	case <-time.After(10 * time.Second): // it reads the clock only once it holds the lock
		t.Log("Learn did not read the clock before the lock")
	}
	clk.Advance(1800 * time.Microsecond)
	close(release)
	require.NoError(t, <-inspected)
	require.NoError(t, <-learned)

	got := delays(t, u, 3)
	assert.Equal(t, ms(0, 0), got[:2], "5 left, 3 in flight")
	assert.Greater(t, got[2], time.Duration(0), "the third waits for the reset")
}

// hookedClock is a manual clock whose next read can be told apart: see
// next.
type hookedClock struct {
	*manualClock
	mu      sync.Mutex
	read    chan struct{} // closed at the next read, if set
	release chan struct{} // the next read waits for it to close, if set
}

// next arms the clock's next read: it closes the returned read channel,
// and, when wait is set, returns only once release is closed.
func (c *hookedClock) next(wait bool) (read <-chan struct{}, release chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read = make(chan struct{})
	c.release = nil
	if wait {
		c.release = make(chan struct{})
	}
	return c.read, c.release
}

// Now returns the clock's time, after the hooks of an armed read.
func (c *hookedClock) Now() time.Time {
	c.mu.Lock()
	read, release := c.read, c.release
	c.read, c.release = nil, nil
	c.mu.Unlock()
	if read != nil {
		close(read)
	}
	if release != nil {
		<-release
	}
	return c.manualClock.Now()
}
