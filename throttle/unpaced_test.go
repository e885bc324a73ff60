package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// reserveOne books one unit of "k" on u alone, waiting as long as it
// takes (maxWait -1), and returns the reservation.
func reserveOne(t *testing.T, u *throttle.Upstream) *throttle.Reservation {
	t.Helper()
	r, err := u.Reserve(context.Background(), "k", 1, -1)
	require.NoError(t, err)
	return r
}

// requireHeld asserts that r booked nothing and holds its caller for d.
func requireHeld(t *testing.T, r *throttle.Reservation, d time.Duration) {
	t.Helper()
	require.False(t, r.OK, "booked")
	require.True(t, r.Held(), "refused, not held")
	assert.Equal(t, d, r.Delay)
}

// vagueRecord returns a record on a manual clock, and a func that
// learns an answer to one request, admitted or not (ok), sent 10 ms
// before, stating remaining of a quota of 9 whose reset is "within a
// second".
func vagueRecord(t *testing.T) (*throttle.Upstream, *manualClock, func(ok bool, remaining int)) {
	clk, u := clockedUpstream(t)
	return u, clk, func(ok bool, remaining int) {
		t.Helper()
		require.NoError(t, u.Learn(context.Background(), "k", throttle.Outcome{N: 1, Throttled: !ok, Latency: 10 * time.Millisecond,
			Statements: []throttle.Statement{requests(9, remaining, time.Second, 0)}}))
	}
}

// A bucket that states its size and what remains, and its reset only as
// "within a second" (throttled/throttled's GCRA), with nothing beside the
// record to pace it: what the statement left goes at once, the rest is
// held (nothing booked) until the quota can have come back. One probe,
// most of the way to the reset, tells a bucket (more left than stated)
// from a fixed window; once the bucket is seen to refill, units are
// admitted as fast as it refills at the least: what it lacked evenly over
// the reset's delay.
func TestUpstreamAlonePacesABucketWhoseRateIsNotStated(t *testing.T) {
	u, clk, learn := vagueRecord(t)
	learn(true, 2)
	assert.Equal(t, ms(0, 0), delays(t, u, 2), "the two left go at once")
	requireHeld(t, reserveOne(t, u), 900*time.Millisecond) // until the probe may go

	clk.Advance(10 * time.Millisecond)
	learn(true, 1)
	learn(true, 0)
	requireHeld(t, reserveOne(t, u), 891*time.Millisecond) // 90% of the way to the earliest reset stated, 1 s after the first statement

	clk.Advance(900 * time.Millisecond)
	assert.True(t, reserveOne(t, u).OK, "the probe")
	requireHeld(t, reserveOne(t, u), 100*time.Millisecond) // the probe is out: until the bucket is full

	clk.Advance(10 * time.Millisecond)
	learn(true, 2) // the probe's answer: 2 left, sent after the statement of 0: it refills
	assert.Equal(t, ms(0, 0), delays(t, u, 2))
	// Then a unit per 1 s / the 7 it lacked, from the statement (too few
	// units yet for the refill meter to read a rate: refill.go).
	perUnit := time.Duration(142857143)
	requireHeld(t, reserveOne(t, u), perUnit)
	clk.Advance(perUnit)
	assert.True(t, reserveOne(t, u).OK)
	requireHeld(t, reserveOne(t, u), perUnit)
}

// A fixed window whose end is stated only to the second answers the
// probe with a refusal: from then on what it lacks comes back at its
// reset only, and nothing is probed again.
func TestUpstreamAloneProbesAWindowOnce(t *testing.T) {
	u, clk, learn := vagueRecord(t)
	learn(true, 0)
	clk.Advance(900 * time.Millisecond)
	assert.True(t, reserveOne(t, u).OK, "the probe")
	clk.Advance(10 * time.Millisecond)
	learn(false, 0) // refused: a window, ending within 90 ms (the first statement's reset)
	requireHeld(t, reserveOne(t, u), 90*time.Millisecond)
	clk.Advance(100 * time.Millisecond)
	learn(true, 8) // the next window
	assert.Equal(t, ms(0, 0, 0, 0, 0, 0, 0, 0), delays(t, u, 8))
	clk.Advance(800 * time.Millisecond)
	requireHeld(t, reserveOne(t, u), 200*time.Millisecond) // no probe at 900 ms: its reset, 1 s after the statement
}

// A herd of requests sent before the record heard anything leaves what a
// statement says is left far below 0, and most of them are refused and
// spend nothing: once the quota is full again, only what is still in
// flight counts, so the key is never held for good; and with nothing in
// flight, at least one unit goes, to hear a new statement.
func TestUpstreamAloneNeverHoldsForGood(t *testing.T) {
	clk, u := clockedUpstream(t)
	require.NoError(t, u.Learn(context.Background(), "k", throttle.Outcome{N: 1, Unbooked: 31, Latency: 10 * time.Millisecond,
		Statements: []throttle.Statement{requests(9, 0, time.Second, 0)}}))
	assert.Equal(t, 0, reserveOne(t, u).Remaining)
	clk.Advance(time.Second)
	assert.Equal(t, ms(0, 0, 0, 0, 0, 0, 0, 0, 0), delays(t, u, 9), "full again, nothing in flight")
	requireHeld(t, reserveOne(t, u), 2500*time.Microsecond) // the bucket's 9 are in flight: a quarter of an answer's latency
}

// Without a wait allowed, a unit the record would hold is refused, and
// the refusal says how long the hold would have been.
func TestUpstreamAloneRefusesWhatItWouldHold(t *testing.T) {
	_, u := clockedUpstream(t)
	require.NoError(t, u.Learn(context.Background(), "k", throttle.Outcome{N: 1, Latency: 10 * time.Millisecond,
		Statements: []throttle.Statement{requests(9, 0, time.Second, 0)}}))
	r, err := u.Reserve(context.Background(), "k", 1, 0)
	require.NoError(t, err)
	assert.False(t, r.OK)
	assert.False(t, r.Held())
	assert.Equal(t, 900*time.Millisecond, r.Delay)
}

// With WithFirstAnswer, the bookings of a key nobody has answered wait
// for its first booking's answer, held with nothing booked, for at most
// the option's wait; beside another limiter they do not.
func TestUpstreamFirstAnswer(t *testing.T) {
	clk := newManualClock()
	u, err := throttle.NewUpstream(throttle.WithClock(clk.Now), throttle.WithFirstAnswer(50*time.Millisecond))
	require.NoError(t, err)
	assert.True(t, reserveOne(t, u).OK, "the first booking goes")
	requireHeld(t, reserveOne(t, u), time.Millisecond)
	assert.Equal(t, ms(0), pacedDelays(t, u, 1), "beside a limiter")
	clk.Advance(50 * time.Millisecond)
	assert.True(t, reserveOne(t, u).OK, "the wait is over")

	u, err = throttle.NewUpstream(throttle.WithClock(clk.Now), throttle.WithFirstAnswer(50*time.Millisecond))
	require.NoError(t, err)
	assert.True(t, reserveOne(t, u).OK)
	requireHeld(t, reserveOne(t, u), time.Millisecond)
	clk.Advance(5 * time.Millisecond)
	require.NoError(t, u.Learn(context.Background(), "k", throttle.Outcome{N: 1, Latency: 5 * time.Millisecond}))
	assert.Equal(t, ms(0, 0, 0), delays(t, u, 3), "answered, stating nothing: nothing holds")

	_, err = throttle.NewUpstream(throttle.WithFirstAnswer(-time.Second))
	require.ErrorContains(t, err, "WithFirstAnswer must not be negative, got -1s")
}
