package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// phasedWindows drives an Upstream with answers from a fixed window of
// limit per second whose resets are stated to the second: the window
// named base+k s truly ends 300 ms later.
type phasedWindows struct {
	t     *testing.T
	clk   *manualClock
	u     *throttle.Upstream
	base  time.Time
	limit int
}

func newPhasedWindows(t *testing.T, limit int, opts ...throttle.Option) *phasedWindows {
	clk := newManualClock()
	u, err := throttle.NewUpstream(append([]throttle.Option{throttle.WithClock(clk.Now)}, opts...)...)
	require.NoError(t, err)
	return &phasedWindows{t: t, clk: clk, u: u, base: clk.Now(), limit: limit}
}

// answer learns, at at from the start, the answer to a request sent at
// sent, stating remaining in the window named stamp (seconds from the
// start); refused answers are 429s.
func (p *phasedWindows) answer(at, sent time.Duration, stamp int, remaining int, refused bool) {
	p.t.Helper()
	p.clk.Set(p.base.Add(at))
	resetAt := p.base.Add(time.Duration(stamp) * time.Second)
	s := throttle.Statement{Name: "requests", Unit: throttle.UnitRequests, Limit: p.limit, Remaining: remaining,
		Reset: resetAt.Sub(p.clk.Now()), Absolute: true, ResetAt: resetAt.Add(time.Second), Precision: time.Second}
	require.NoError(p.t, p.u.Learn(context.Background(), "k", throttle.Outcome{N: 0, Throttled: refused, Latency: at - sent, Statements: []throttle.Statement{s}}))
}

// next returns how long from now until the record admits one unit.
func (p *phasedWindows) next() time.Duration {
	p.t.Helper()
	s, err := p.u.Inspect(context.Background(), "k")
	require.NoError(p.t, err)
	return s.Next
}

// A reset stated to the second may be a second early: the record holds
// the key until the latest the window can end, then learns where it
// ends from the answers on either side of the boundary. Before a window
// is learned, the first answer bounds the end too: the window is taken
// to be what the answer states is left, rounded up to the precision.
func TestUpstreamLearnsWhereAWindowEnds(t *testing.T) {
	p := newPhasedWindows(t, 10)
	p.answer(400*time.Millisecond, 390*time.Millisecond, 1, 0, false)
	// One spacing after the reset: the window was spent, and the quota
	// may be a sliding counter (paceStart); others spent 9 of 10, so the
	// spacing is a second.
	assert.Equal(t, 2*time.Second, p.next(), "0.6 s stated left, rounded up to a 1 s window from the answer's arrival: 1.4 s, not the latest end 2 s, plus a spacing")

	p.answer(1200*time.Millisecond, 1190*time.Millisecond, 1, 0, true)
	assert.Equal(t, 1200*time.Millisecond, p.next(), "handled in the old window: its end is later than 1.19 s, which says nothing new here")

	p.answer(1350*time.Millisecond, 1340*time.Millisecond, 2, 9, false)
	got := p.u.Stated("k")
	require.Len(t, got, 1)
	assert.Equal(t, time.Second, got[0].Reset, "the old window had ended when this answer came, at 1.35 s: window 2 ends at or before 2.35 s")
	assert.Equal(t, time.Second, got[0].Window, "learned from the names of two windows")
}

// Once the window's end is known only to within more than a twentieth
// of the window, and what is left runs out, one request goes at the
// middle of the bounds: a probe. The rest wait for the latest end.
// (Another client spent the window here, so its boundary is not asked
// (boundary.go): the units are booked at the pace.)
func TestUpstreamProbesWhereAFixedWindowEnds(t *testing.T) {
	p := newPhasedWindows(t, 48)
	p.answer(100*time.Millisecond, 90*time.Millisecond, 1, 0, false)
	p.answer(1200*time.Millisecond, 1190*time.Millisecond, 1, 0, true)   // lo: 190 ms
	p.answer(1350*time.Millisecond, 1340*time.Millisecond, 2, 47, false) // hi: 350 ms; it came back at the boundary: fixed
	p.answer(1400*time.Millisecond, 1390*time.Millisecond, 2, 0, false)  // nothing left
	assert.Equal(t, ms(870, 950), delays(t, p.u, 2), "the probe at 2 s + 270 ms, then the latest end, 2.35 s")

	p.answer(2280*time.Millisecond, 2270*time.Millisecond, 2, 0, true) // the probe met the old window: lo is 270 ms
	assert.Equal(t, []time.Duration{70*time.Millisecond + (time.Second+47)/48}, delays(t, p.u, 1),
		"no second probe in this window: one spacing (1 s / 48) after the one booked at the latest end")
}

// Answers in flight together may have been handled in either order: of
// their statements for one window, the lower remaining wins.
func TestUpstreamConcurrentAnswersLowerRemainingWins(t *testing.T) {
	p := newPhasedWindows(t, 10)
	p.answer(100*time.Millisecond, 50*time.Millisecond, 1, 2, false)
	p.answer(110*time.Millisecond, 60*time.Millisecond, 1, 5, false) // sent before the first answer came
	got := p.u.Stated("k")
	require.Len(t, got, 1)
	assert.Equal(t, 2, got[0].Remaining)

	p.answer(130*time.Millisecond, 120*time.Millisecond, 1, 1, false) // sent after: it saw everything
	assert.Equal(t, 1, p.u.Stated("k")[0].Remaining)
}

// What the upstream says was spent beyond this client's own admitted
// requests is another client's: its pace is kept out of what is left
// before the reset and out of the pace after it, and the boundary is
// not asked (boundary.go): a burst at the window's start would take the
// other client's share.
func TestUpstreamKeepsOtherClientsShareOut(t *testing.T) {
	p := newPhasedWindows(t, 10)
	p.answer(100*time.Millisecond, 90*time.Millisecond, 1, 0, false)
	p.answer(1295*time.Millisecond, 1290*time.Millisecond, 1, 0, true)  // lo: 290 ms
	p.answer(1305*time.Millisecond, 1300*time.Millisecond, 2, 9, false) // hi: 305 ms; fixed; 1 of ours
	// Half a window in, 6 were spent and 2 were ours: others spend 8/s.
	p.answer(1805*time.Millisecond, 1800*time.Millisecond, 2, 4, false)
	assert.Equal(t, ms(500, 1000, 1500), delays(t, p.u, 3),
		"the 4 left go to the others before the reset (2.305 s); after it, the 2 a window they leave")
}

// A sliding counter's count of the window before carries over its
// boundary: a window well used that does not come back marks the quota
// sliding, and it is paced at its limit per window, not held to the reset
// nor probed.
func TestUpstreamTellsASlidingCounterAtItsBoundary(t *testing.T) {
	p := newPhasedWindows(t, 10)
	for i := range 10 { // the whole window is ours
		at := time.Duration(400+10*i) * time.Millisecond
		p.answer(at, at-5*time.Millisecond, 1, 9-i, false)
	}
	p.answer(1305*time.Millisecond, 1300*time.Millisecond, 2, 1, false) // 1 left after the boundary: not back
	p.answer(1310*time.Millisecond, 1306*time.Millisecond, 2, 0, false)
	assert.Equal(t, []time.Duration{0, (time.Second + 8) / 9}, delays(t, p.u, 2),
		"at 9 per second (a unit of headroom), from now: nothing was booked after the window's earliest end (1 s); no probe")
}

// A unit booked while units are left, for a slot past the earliest the
// window can end (a configured limiter may hold it there), may land in
// the next window: it takes from what is left and from the pace after
// the reset, so that it fits either window. Units booked before the
// earliest end take from what is left alone. Until a boundary tells
// whether the quota is a fixed window or a sliding counter, the pace
// keeps a sliding counter's unit of headroom.
func TestUpstreamPacesUnitsThatMayLandInTheNextWindow(t *testing.T) {
	p := newPhasedWindows(t, 10)
	p.answer(400*time.Millisecond, 390*time.Millisecond, 1, 9, false) // ends after 1 s, at or before 1.4 s; only ours spent
	step := (time.Second + 8) / 9
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 650 * time.Millisecond, 650*time.Millisecond + step},
		bookAfter(t, p.u, ms(100, 100, 650, 650)), "two before the earliest end at once; two after it, 1 s / 9 apart")
	assertHeld(t, p.u, 650*time.Millisecond, "a third after it waits for the answers of the two, which tell the window they met (boundary.go)")
}

// Before a boundary has told whether the quota is a fixed window or a
// sliding counter, what the first window's statement says was spent
// beyond this client's own answers (and its requests not yet answered)
// is another client's over the window: exact for a sliding counter, low
// for a fixed one. It is kept out of the pace after the reset; what is
// left before it stays as stated. Unestimated, the units after the first
// reset took the whole limit: on 5d (httprate, another client at 20%)
// they met a 429 and its 1 s pause in the second window.
func TestUpstreamKeepsAFirstWindowsOthersOutOfThePace(t *testing.T) {
	p := newPhasedWindows(t, 10)
	p.clk.Set(p.base.Add(400 * time.Millisecond))
	resetAt := p.base.Add(time.Second)
	s := throttle.Statement{Name: "requests", Unit: throttle.UnitRequests, Limit: 10, Remaining: 3,
		Reset: 600 * time.Millisecond, Absolute: true, ResetAt: resetAt.Add(time.Second), Precision: time.Second}
	// Our first answer: 7 spent, 1 of them this answer's and 2 of ours still in flight: others spent 4.
	require.NoError(t, p.u.Learn(context.Background(), "k", throttle.Outcome{Unbooked: 2, Latency: 5 * time.Millisecond, Statements: []throttle.Statement{s}}))
	assert.Equal(t, 1, p.u.Stated("k")[0].Remaining, "3 stated, 2 in flight")
	step := time.Second / 5 // 10 − 4 others − 1 of headroom a window
	// From one spacing after the latest end: others are expected to spend
	// 4 before it, where 3 were left (paceStart).
	assert.Equal(t, []time.Duration{100 * time.Millisecond, time.Second + step, time.Second + 2*step, time.Second + 3*step},
		bookAfter(t, p.u, ms(100, 650, 650, 650)), "the one left at once; the rest from the latest end (1.4 s) plus a spacing, 5 a window")
}

// assertHeld asserts that a unit of "k" booked after after is held: it
// must wait and book again.
func assertHeld(t *testing.T, u *throttle.Upstream, after time.Duration, msg string) {
	t.Helper()
	r, err := u.ReserveAfter(context.Background(), "k", 1, after, -1)
	require.NoError(t, err)
	assert.True(t, r.Held(), msg)
}

// bookAfter books one unit of "k" on u for each of afters, as
// ReserveAfter, and returns their delays.
func bookAfter(t *testing.T, u *throttle.Upstream, afters []time.Duration) []time.Duration {
	t.Helper()
	var got []time.Duration
	for _, after := range afters {
		r, err := u.ReserveAfter(context.Background(), "k", 1, after, -1)
		require.NoError(t, err)
		require.True(t, r.OK)
		got = append(got, r.Delay)
	}
	return got
}

// A window stated longer than about its precision keeps the latest end
// until the answers narrow it: the stated time left (29.6 s) is no bound
// on the window, and the doubt costs it at most a precision once.
func TestUpstreamHoldsALongWindowToItsLatestEnd(t *testing.T) {
	p := newPhasedWindows(t, 10, throttle.WithMaxHold(2*time.Minute))
	p.answer(400*time.Millisecond, 390*time.Millisecond, 30, 0, false)
	assert.Equal(t, 60600*time.Millisecond, p.next(), "the stated reset (30 s) plus its precision, plus a spacing (paceStart: others spent 9 of 10)")
	p = newPhasedWindows(t, 10)
	p.answer(400*time.Millisecond, 390*time.Millisecond, 30, 0, false)
	assert.Equal(t, time.Minute, p.next(), "no further than the max hold (a minute) from the statement's arrival")
}

// Answers to requests in flight together arrive in any order: the lowest
// remaining stands, less what is in flight when the latest of them
// arrives, not the lowest of what each left at its own arrival (which
// counts twice a request handled before the lowest statement and
// answered after it).
func TestUpstreamConcurrentAnswersCountWhatIsInFlightNow(t *testing.T) {
	p := newPhasedWindows(t, 10)
	learn := func(at time.Duration, remaining, unbooked int) {
		t.Helper()
		p.clk.Set(p.base.Add(at))
		resetAt := p.base.Add(time.Second)
		s := throttle.Statement{Name: "requests", Unit: throttle.UnitRequests, Limit: 10, Remaining: remaining,
			Reset: resetAt.Sub(p.clk.Now()), Absolute: true, ResetAt: resetAt.Add(time.Second), Precision: time.Second}
		require.NoError(t, p.u.Learn(context.Background(), "k", throttle.Outcome{Unbooked: unbooked, Latency: at - 395*time.Millisecond, Statements: []throttle.Statement{s}}))
	}
	learn(400*time.Millisecond, 5, 3) // handled fifth of 8 sent at once; 3 still in flight
	assert.Equal(t, 2, p.u.Stated("k")[0].Remaining)
	learn(401*time.Millisecond, 7, 2) // handled third, answered late; 2 still in flight
	assert.Equal(t, 3, p.u.Stated("k")[0].Remaining, "5 stated, 2 in flight")
}
