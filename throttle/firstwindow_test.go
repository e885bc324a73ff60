package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// A burst sent before the record heard anything is answered out of
// order: the statement handled last may come back first, with most of
// the burst still in flight. What it says was spent beyond this
// client's answers is the burst's requests it already counted; taken off
// what is left again, they were counted twice, what is left read below
// 0 until the rest of the answers came, and the units booked meanwhile
// went past the reset and stayed there (bench 5a: 15 of the first
// window's 48 lost).
func TestUpstreamFirstBurstIsNotCountedTwice(t *testing.T) {
	p := newPhasedWindows(t, 10)
	learn := func(at time.Duration, remaining, unbooked int) {
		t.Helper()
		p.clk.Set(p.base.Add(at))
		resetAt := p.base.Add(time.Second)
		s := throttle.Statement{Name: "requests", Unit: throttle.UnitRequests, Limit: 10, Remaining: remaining,
			Reset: resetAt.Sub(p.clk.Now()), Absolute: true, ResetAt: resetAt.Add(time.Second), Precision: time.Second}
		require.NoError(t, p.u.Learn(context.Background(), "k", throttle.Outcome{Unbooked: unbooked, Latency: at - 395*time.Millisecond, Statements: []throttle.Statement{s}}))
	}
	// 6 sent at once, unbooked; the one handled last is answered first.
	learn(400*time.Millisecond, 4, 5)
	assert.Equal(t, 4, p.u.Stated("k")[0].Remaining, "10 less the 6 sent: the 5 in flight were counted")
	got := bookAfter(t, p.u, ms(0, 0))
	for i, rem := range []int{9, 8, 7, 6, 5} { // the rest of the burst, answered
		learn(time.Duration(401+i)*time.Millisecond, rem, 4-i)
	}
	got = append(got, bookAfter(t, p.u, ms(0, 0))...)
	assert.Equal(t, ms(0, 0, 0, 0), got, "the 4 left, all before the reset")
	assert.Greater(t, bookAfter(t, p.u, ms(0))[0], 600*time.Millisecond, "the window is spent: the next goes after its earliest end")
}

// Another client's spending in the window the statement proves (more
// spent than this client's answers and pending requests together) keeps
// every pending request uncounted, as before: which of them the
// statement counts is unknown.
func TestUpstreamFirstBurstWithOthersStaysCautious(t *testing.T) {
	p := newPhasedWindows(t, 10)
	p.clk.Set(p.base.Add(400 * time.Millisecond))
	resetAt := p.base.Add(time.Second)
	s := throttle.Statement{Name: "requests", Unit: throttle.UnitRequests, Limit: 10, Remaining: 2,
		Reset: 600 * time.Millisecond, Absolute: true, ResetAt: resetAt.Add(time.Second), Precision: time.Second}
	// 8 spent: 1 answered, 3 pending, so at least 4 another client's.
	require.NoError(t, p.u.Learn(context.Background(), "k", throttle.Outcome{Unbooked: 3, Latency: 5 * time.Millisecond, Statements: []throttle.Statement{s}}))
	assert.Equal(t, 0, p.u.Stated("k")[0].Remaining, "2 stated, less the 3 in flight")
}
