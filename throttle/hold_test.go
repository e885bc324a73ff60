package throttle_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// learnUnbooked learns, at at from the start, the answer to one of the
// requests counted by SendUnbooked, sent at 395 ms, stating remaining in
// the window named 1 s (which truly ends up to a second later).
func (p *phasedWindows) learnUnbooked(at time.Duration, remaining int) {
	p.t.Helper()
	p.clk.Set(p.base.Add(at))
	resetAt := p.base.Add(time.Second)
	s := throttle.Statement{Name: "requests", Unit: throttle.UnitRequests, Limit: p.limit, Remaining: remaining,
		Reset: resetAt.Sub(p.clk.Now()), Absolute: true, ResetAt: resetAt.Add(time.Second), Precision: time.Second}
	require.NoError(p.t, p.u.Learn(context.Background(), "k", throttle.Outcome{SentUnbooked: true, Latency: at - 395*time.Millisecond, Statements: []throttle.Statement{s}}))
}

// reserve books one unit of "k" with no bound on the wait.
func (p *phasedWindows) reserve() *throttle.Reservation {
	p.t.Helper()
	r, err := p.u.Reserve(context.Background(), "k", 1, -1)
	require.NoError(p.t, err)
	return r
}

// A statement that arrives while requests it may have counted are still in
// flight cannot tell what is left: the record takes them all off, and a
// unit booked then would go past the reset for good (bench 5a sent 32 of
// its first window's 48 so). The record holds such a booking, taking
// nothing, until the answers are in, then books with what they say.
func TestUpstreamHoldsWhileAnswersItMayHaveCountedAreInFlight(t *testing.T) {
	p := newPhasedWindows(t, 10)
	for range 8 {
		p.u.SendUnbooked() // a burst before the record heard anything
	}
	p.learnUnbooked(400*time.Millisecond, 2) // handled last: 8 spent, 2 left; 7 answers still on their way
	r := p.reserve()
	require.False(t, r.OK)
	assert.True(t, r.Held(), "2 left less 7 in flight is below 1, but the 7 may be counted")
	assert.Equal(t, 1250*time.Microsecond, r.Delay, "a quarter of the answer's latency")
	assert.Equal(t, 0, p.u.Stated("k")[0].Remaining, "a hold takes nothing")

	for i := range 7 {
		p.learnUnbooked(401*time.Millisecond, 3+i%3) // handled earlier
	}
	assert.Equal(t, []time.Duration{0, 0}, []time.Duration{p.reserve().Delay, p.reserve().Delay}, "with the answers in, the 2 left go at once")
	r = p.reserve()
	assert.True(t, r.OK, "nothing in flight: no doubt left, the unit goes past the reset")
	assert.Greater(t, r.Delay, 599*time.Millisecond)
}

// Holds end: when the requests in flight stay unanswered (or what is
// left was spent by another client, which no answer shows), the record
// stops holding within about two answers' latency of the first hold, and
// books where its cautious arithmetic puts the units. A hold never
// reaches past the reset.
func TestUpstreamHoldsForAboutAnAnswersLatency(t *testing.T) {
	p := newPhasedWindows(t, 10)
	for range 4 {
		p.u.SendUnbooked()
	}
	p.learnUnbooked(400*time.Millisecond, 1) // 5 ms latency; 3 still in flight
	var held time.Duration
	for {
		r := p.reserve()
		if !r.Held() {
			require.True(t, r.OK)
			assert.Greater(t, r.Delay, 500*time.Millisecond, "past the reset, at the pace after it")
			break
		}
		held += r.Delay
		p.clk.Advance(r.Delay)
	}
	assert.Equal(t, 10*time.Millisecond, held, "two answers' latency")
}

// Inside All, a hold holds every part: the configured limiter books
// nothing either, so its log keeps no slot for a unit that may yet go
// before the reset, or after it.
func TestAllPassesAHoldOnBookingNothing(t *testing.T) {
	p := newPhasedWindows(t, 10)
	sw, err := throttle.NewSlidingWindow(10, time.Second, throttle.WithClock(p.clk.Now))
	require.NoError(t, err)
	l := throttle.All(sw, p.u)
	for range 3 {
		p.u.SendUnbooked()
	}
	p.learnUnbooked(400*time.Millisecond, 1) // 2 still in flight
	r, err := l.Reserve(context.Background(), "k", 1, -1)
	require.NoError(t, err)
	assert.True(t, r.Held())
	assert.False(t, r.OK)
	st, err := sw.Inspect(context.Background(), "k")
	require.NoError(t, err)
	assert.Equal(t, 10, st.Remaining, "the configured log booked nothing")

	p.learnUnbooked(401*time.Millisecond, 2)
	p.learnUnbooked(401*time.Millisecond, 3)
	r, err = l.Reserve(context.Background(), "k", 1, -1)
	require.NoError(t, err)
	assert.True(t, r.OK)
	assert.Equal(t, time.Duration(0), r.Delay, "1 left once the answers are in")
}

// Wait waits a hold out and reserves again.
func TestWaitWaitsOutAHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u, err := throttle.NewUpstream()
		require.NoError(t, err)
		ctx := context.Background()
		for range 3 {
			u.SendUnbooked()
		}
		learn := func(remaining int, latency time.Duration) {
			o := throttle.Outcome{SentUnbooked: true, Latency: latency,
				Statements: []throttle.Statement{requests(10, remaining, time.Second, time.Second)}}
			require.NoError(t, u.Learn(ctx, "k", o))
		}
		learn(1, 4*time.Millisecond) // 2 in flight
		go func() {
			time.Sleep(time.Millisecond / 2)
			// Sent after the first answer arrived: later statements.
			learn(2, time.Millisecond/4)
			learn(3, time.Millisecond/4)
		}()
		start := time.Now()
		require.NoError(t, throttle.Wait(ctx, u, "k", 1))
		assert.Equal(t, time.Millisecond, time.Since(start), "one hold, then the unit left before the reset")
		synctest.Wait()
	})
}

// A window not yet told refilling whose new statement leaves less than
// the units booked ahead of it may be a sliding counter, whose answers to
// those units will say so: a booking they would push past the reset is
// held until the first of them is answered, not booked there for good.
// An answer later than two answers' latency past its due time (a hung
// upstream) holds nothing longer: the booking goes past the reset.
func TestUpstreamHoldsForTheAnswersThatTellARefill(t *testing.T) {
	clk, u := clockedUpstream(t)
	ctx := context.Background()
	learn := func(remaining int, reset time.Duration) {
		t.Helper()
		require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{N: 1, Latency: 10 * time.Millisecond, Statements: []throttle.Statement{requests(100, remaining, reset, 5*time.Second)}}))
	}
	reserve := func() *throttle.Reservation {
		t.Helper()
		r, err := u.Reserve(ctx, "k", 1, -1)
		require.NoError(t, err)
		return r
	}
	learn(0, 4*time.Second) // a window of 100 per 5 s, spent
	first, second := reserve(), reserve()
	require.True(t, first.OK)
	require.True(t, second.OK)
	require.Equal(t, 4*time.Second, first.Delay, "at the reset")
	require.Greater(t, second.Delay, 4*time.Second, "paced after it")

	clk.Advance(4 * time.Second)
	learn(1, 5*time.Second) // the first unit's answer: a new window with 1 left, and the second unit due before its reset
	r := reserve()
	require.False(t, r.OK)
	require.True(t, r.Held(), "1 left less the unit ahead: past the reset only because of it")
	assert.Equal(t, second.Delay-4*time.Second+10*time.Millisecond, r.Delay, "until the unit ahead is answered")
	assert.Equal(t, 0, u.Stated("k")[0].Remaining, "a hold takes nothing")

	clk.Advance(second.Delay - 4*time.Second + 21*time.Millisecond) // its answer is 11 ms late
	r = reserve()
	require.True(t, r.OK, "a hung answer holds nothing longer")
	assert.Greater(t, r.Delay, 4*time.Second, "past the new reset")
}

// Units booked here are waited for as unbooked ones are, where a
// Transport feeds the key and the answers' latencies are known: a herd's
// answers arrive in any order, and the first to arrive, stating the
// lowest remaining, leaves nothing while the rest are in flight. Booked
// then, a unit went past the reset, and beside a FixedWindow moved it on
// to the next window for good (the README recipe, 32 goroutines, a
// millisecond each way: 1.20-1.25× the minimum).
func TestUpstreamHoldsWhileBookedAnswersItMayHaveCountedAreInFlight(t *testing.T) {
	clk, u := clockedUpstream(t)
	ctx := context.Background()
	learn := func(o throttle.Outcome, remaining int) {
		t.Helper()
		o.N = 1
		o.Statements = []throttle.Statement{{Name: "requests", Unit: throttle.UnitRequests, Limit: 10, Remaining: remaining, Reset: 4 * time.Second}}
		require.NoError(t, u.Learn(ctx, "k", o))
	}
	u.SendUnbooked()
	learn(throttle.Outcome{SentUnbooked: true, Latency: 2 * time.Millisecond}, 9) // a Transport's first answer
	assert.Equal(t, ms(0, 0, 0, 0, 0), delays(t, u, 5), "five in flight")

	clk.Advance(2 * time.Millisecond)
	learn(throttle.Outcome{Latency: 2 * time.Millisecond}, 4) // handled last: 4 left, 4 more in flight
	r, err := u.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	require.False(t, r.OK)
	assert.True(t, r.Held(), "4 left less 4 in flight is 0, but the 4 may be counted")

	for _, rem := range []int{5, 6, 7, 8} {
		learn(throttle.Outcome{Latency: 2 * time.Millisecond}, rem) // handled earlier
	}
	assert.Equal(t, ms(0, 0, 0, 0), delays(t, u, 4), "with the answers in, the 4 left go at once")
}
