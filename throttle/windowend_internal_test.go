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
			u, answer := tenPerSecondRecord(t)
			answer(100*time.Millisecond, 1, 1)
			answer(tt.giveLast, 1, 0)
			answer(1305*time.Millisecond, 2, 9) // it came back
			q := u.keys["k"].quotas[0]
			assert.Equal(t, tt.wantFixed, q.fixed)
			assert.False(t, q.sliding)
		})
	}
}

// A fixed window booked beyond what is left, less what others are
// expected to spend before its reset, sheds its latest bookings still
// ahead past the reset, at the pace after it: sent, they would meet
// refusals at the window's end (5e).
func TestUpstreamShedsAnOverbookedFixedWindow(t *testing.T) {
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := base
	u, err := NewUpstream(WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	answer := func(at time.Duration, stamp, remaining int, refused bool) {
		t.Helper()
		now = base.Add(at)
		resetAt := base.Add(time.Duration(stamp) * time.Second)
		s := Statement{Name: "requests", Unit: UnitRequests, Limit: 10, Remaining: remaining,
			Reset: resetAt.Sub(now), Absolute: true, ResetAt: resetAt.Add(time.Second), Precision: time.Second}
		require.NoError(t, u.Learn(context.Background(), "k", Outcome{Throttled: refused, Latency: 5 * time.Millisecond, Statements: []Statement{s}}))
	}
	answer(100*time.Millisecond, 1, 0, false)
	answer(1295*time.Millisecond, 1, 0, true)  // the window ends after 1.29 s
	answer(1305*time.Millisecond, 2, 9, false) // at or before 1.305 s; it came back: fixed
	var rs []*Reservation
	for range 6 { // 9 left: all before the window's end (2.29-2.305 s)
		r, err := u.ReserveAfter(context.Background(), "k", 1, 800*time.Millisecond, -1)
		require.NoError(t, err)
		require.Equal(t, 800*time.Millisecond, r.Delay)
		rs = append(rs, r)
	}
	// Half a window in, 4 left: others spent 4 of the 6 in 0.5 s, 4 more
	// to come before the reset; the 6 booked do not fit.
	answer(1805*time.Millisecond, 2, 4, false)
	var got []time.Duration
	for _, r := range rs {
		got = append(got, r.booking.Until())
	}
	step := 500 * time.Millisecond // 10 a window less others' 8
	want := []time.Duration{500*time.Millisecond + 5*step, 500*time.Millisecond + 4*step, 500*time.Millisecond + 3*step,
		500*time.Millisecond + 2*step, 500*time.Millisecond + step, 500 * time.Millisecond}
	assert.Equal(t, want, got, "all six past the latest end (2.305 s), newest first, at the pace after it")
}

// When others' share grows after units were paced past a window's
// earliest end, the bookings still ahead move later to the new pace,
// never earlier: 5d's callers booked the second window before the first
// window's answers showed another client's share.
func TestUpstreamRepacesWhenOthersShareGrows(t *testing.T) {
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := base
	u, err := NewUpstream(WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	answer := func(at, sent time.Duration, remaining int) {
		t.Helper()
		now = base.Add(at)
		resetAt := base.Add(time.Second)
		s := Statement{Name: "requests", Unit: UnitRequests, Limit: 10, Remaining: remaining,
			Reset: resetAt.Sub(now), Absolute: true, ResetAt: resetAt.Add(time.Second), Precision: time.Second}
		require.NoError(t, u.Learn(context.Background(), "k", Outcome{Latency: at - sent, Statements: []Statement{s}}))
	}
	answer(400*time.Millisecond, 390*time.Millisecond, 9) // only ours spent: 9 a window less a unit of headroom
	var rs []*Reservation
	for range 3 { // past the earliest end (1 s): paced (without holds: boundary.go would hold all but two)
		r, err := u.reserve(context.Background(), "k", 1, nil, 650*time.Millisecond, -1, false, false)
		require.NoError(t, err)
		rs = append(rs, r)
	}
	answer(450*time.Millisecond, 445*time.Millisecond, 4) // 6 spent, 2 of them ours: another client's 4 a window
	var got []time.Duration
	for _, r := range rs {
		got = append(got, r.booking.Until())
	}
	assert.Equal(t, []time.Duration{600 * time.Millisecond, 800 * time.Millisecond, time.Second}, got,
		"the first stays; the others 1 s / 5 apart (10 less 4 less 1), not 1 s / 9")
}

// tenPerSecond is what an upstream with 10 requests a window states at
// now, its reset stated to the second as resetAt (the window may end up
// to a second later).
func tenPerSecond(now, resetAt time.Time, remaining int) Statement {
	return Statement{Name: "requests", Unit: UnitRequests, Limit: 10, Remaining: remaining,
		Reset: resetAt.Sub(now), Absolute: true, ResetAt: resetAt.Add(time.Second), Precision: time.Second}
}

// A first window, before a boundary has told it fixed or sliding, sheds
// its latest bookings still ahead past the latest end too, once what is
// left cannot cover them: a statement that arrives with none of this
// client's requests in flight unbooked, and that only units booked for
// later slots (not yet sent, so not counted) exceed, says they would
// meet refusals at the window's end. On 5e (go-limiter, another client
// at 20%) the first window's last 2-3 units did, in most passes.
func TestUpstreamShedsAnOverbookedFirstWindow(t *testing.T) {
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := base
	u, err := NewUpstream(WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	answer := func(at time.Duration, remaining int) {
		t.Helper()
		now = base.Add(at)
		s := tenPerSecond(now, base.Add(time.Second), remaining) // ends after 1 s, at or before 2 s
		require.NoError(t, u.Learn(context.Background(), "k", Outcome{Latency: 5 * time.Millisecond, Statements: []Statement{s}}))
	}
	answer(1100*time.Millisecond, 5)
	var rs []*Reservation
	for i := range 5 { // 5 left: all before the latest end (without holds: boundary.go would hold all but two)
		r, err := u.reserve(context.Background(), "k", 1, nil, time.Duration(i+1)*50*time.Millisecond, -1, false, false)
		require.NoError(t, err)
		rs = append(rs, r)
	}
	answer(1150*time.Millisecond, 2) // another client spent 3: none of the 5 booked here was sent yet
	var got []time.Duration
	for _, r := range rs {
		got = append(got, r.booking.Until())
	}
	step := 250 * time.Millisecond // 10 a window less others' 5 (of the 10 spent, 1 ours) less a unit of headroom
	// Laid out again at that pace (repace): 1.15, 1.4, 1.65, 1.9 and
	// 2.15 s; the last is past the latest end, and 2 of the 4 before it
	// fit: the latest 2 go after it.
	assert.Equal(t, []time.Duration{0, step, time.Second + 2*step, time.Second + step, time.Second}, got,
		"the 2 left stay; the other 3 go past the latest end (2 s), at the pace after it")
}

// A window told fixed never grows: of two answers in one window, the
// lower remaining wins even when the higher one's request seems sent
// after the lower one arrived (its Learn ran late, on a busy machine),
// and the quota stays fixed, not sliding.
func TestUpstreamFixedWindowLowerRemainingWins(t *testing.T) {
	u, answer := tenPerSecondSentRecord(t)
	answer(100*time.Millisecond, 90*time.Millisecond, 1, 1)
	answer(1295*time.Millisecond, 1290*time.Millisecond, 1, 0) // the window ends after 1.29 s
	answer(1305*time.Millisecond, 1300*time.Millisecond, 2, 9) // at or before 1.305 s; it came back: fixed
	answer(1500*time.Millisecond, 1499*time.Millisecond, 2, 3)
	answer(1503*time.Millisecond, 1502*time.Millisecond, 2, 6) // handled before the one above, learned 3 ms late
	q := u.keys["k"].quotas[0]
	assert.True(t, q.fixed)
	assert.False(t, q.sliding, "a fixed window's remaining never grows")
	assert.Equal(t, 3, q.raw, "the lower remaining wins")
}

// A window half used that comes back to its limit less the answer's own
// unit did come back: it is not told sliding, though it came back by
// less than half the limit (5 left of 10, then 9).
func TestUpstreamHalfUsedWindowThatComesBackIsNotSliding(t *testing.T) {
	u, answer := tenPerSecondRecord(t)
	answer(100*time.Millisecond, 1, 9)
	answer(1295*time.Millisecond, 1, 5)
	answer(1305*time.Millisecond, 2, 9) // the next window, 4 up: all a fixed window can show
	assert.False(t, u.keys["k"].quotas[0].sliding)
}

// tenPerSecondSentRecord is tenPerSecondRecord whose answers say when
// their request was sent.
func tenPerSecondSentRecord(t *testing.T) (*Upstream, func(at, sent time.Duration, stamp, remaining int)) {
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := base
	u, err := NewUpstream(WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	return u, func(at, sent time.Duration, stamp, remaining int) {
		t.Helper()
		now = base.Add(at)
		s := tenPerSecond(now, base.Add(time.Duration(stamp)*time.Second), remaining)
		require.NoError(t, u.Learn(context.Background(), "k", Outcome{Latency: at - sent, Statements: []Statement{s}}))
	}
}

// tenPerSecondRecord returns a record on a clock of its own, and a func
// that has it learn, at at past the clock's start, an answer of
// tenPerSecond with remaining left in the window stated to end stamp
// seconds past the start, 5 ms after its request was sent.
func tenPerSecondRecord(t *testing.T) (*Upstream, func(at time.Duration, stamp, remaining int)) {
	u, answer := tenPerSecondSentRecord(t)
	return u, func(at time.Duration, stamp, remaining int) {
		t.Helper()
		answer(at, at-5*time.Millisecond, stamp, remaining)
	}
}

// A window told sliding by an answer that seemed to grow (learned late, so
// that its request seemed sent after a lower one arrived) is told fixed
// again where what is left comes back at the boundary across a short
// silence, which a sliding counter's never does. Left sliding, it was
// paced over every window to the run's end.
func TestUpstreamWindowToldSlidingByALateAnswerComesBackFixed(t *testing.T) {
	u, answer := tenPerSecondSentRecord(t)
	answer(100*time.Millisecond, 90*time.Millisecond, 1, 5)
	answer(210*time.Millisecond, 200*time.Millisecond, 1, 7) // seems sent after the answer above: it grew
	require.True(t, u.keys["k"].quotas[0].sliding, "the first window is told sliding")
	answer(1295*time.Millisecond, 1290*time.Millisecond, 1, 0)
	answer(1305*time.Millisecond, 1300*time.Millisecond, 2, 9) // it came back: fixed
	q := u.keys["k"].quotas[0]
	assert.True(t, q.fixed)
	assert.False(t, q.sliding, "a window that comes back at its boundary is no sliding one")
}
