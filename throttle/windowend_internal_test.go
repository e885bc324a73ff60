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
	for range 3 { // past the earliest end (1 s): paced
		r, err := u.ReserveAfter(context.Background(), "k", 1, 650*time.Millisecond, -1)
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

// heldWindows drives an Upstream with answers from windows of limit per
// second whose resets are stated to the second, for the tests of units
// held for a probe.
type heldWindows struct {
	t     *testing.T
	now   time.Time
	base  time.Time
	u     *Upstream
	limit int
}

func newHeldWindows(t *testing.T, limit int) *heldWindows {
	h := &heldWindows{t: t, limit: limit}
	h.base = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	h.now = h.base
	u, err := NewUpstream(WithClock(func() time.Time { return h.now }))
	require.NoError(t, err)
	h.u = u
	return h
}

// answer learns, at at, the answer to a request sent at sent, stating
// remaining in the window named stamp (seconds from the start), with
// unbooked requests in flight; others is taken to be nothing.
func (h *heldWindows) answer(at, sent time.Duration, stamp, remaining, unbooked int) {
	h.t.Helper()
	h.now = h.base.Add(at)
	resetAt := h.base.Add(time.Duration(stamp) * time.Second)
	s := Statement{Name: "requests", Unit: UnitRequests, Limit: h.limit, Remaining: remaining,
		Reset: resetAt.Sub(h.now), Absolute: true, ResetAt: resetAt.Add(time.Second), Precision: time.Second}
	require.NoError(h.t, h.u.Learn(context.Background(), "k", Outcome{Unbooked: unbooked, Latency: at - sent, Statements: []Statement{s}}))
}

// reserve books one unit for each of afters, and returns the bookings'
// delays and the reservations.
func (h *heldWindows) reserve(afters ...time.Duration) ([]time.Duration, []*Reservation) {
	h.t.Helper()
	var ds []time.Duration
	var rs []*Reservation
	for _, after := range afters {
		r, err := h.u.ReserveAfter(context.Background(), "k", 1, after, -1)
		require.NoError(h.t, err)
		require.True(h.t, r.OK)
		ds, rs = append(ds, r.Delay), append(rs, r)
	}
	return ds, rs
}

// until returns how long each of rs still waits, as Wait sees it.
func until(rs []*Reservation) []time.Duration {
	var got []time.Duration
	for _, r := range rs {
		got = append(got, r.booking.Until())
	}
	return got
}

// Units booked past the reset of a window not yet told fixed or sliding
// are held at its latest end: the first to come due goes alone, a probe,
// and the others wait for the first answer from the new window. Told
// fixed by it, they go at once, so a configured sliding log booked at
// the same slots (All) keeps one burst a window, not a pace it would
// repeat in every later window (5c). Untold, they are paced from the
// probe.
func TestUpstreamHoldsUnitsPastAnUntoldResetForAProbe(t *testing.T) {
	tests := []struct {
		name      string
		giveLeft  int // remaining, stated by the probe's answer
		wantUntil []time.Duration
	}{
		{"back at the boundary after a window well used: fixed: due since the reset, they go", 9, []time.Duration{-2 * time.Millisecond, -2 * time.Millisecond}},
		{"not back: untold, paced at 9 a window from the probe", 2, []time.Duration{(time.Second+8)/9 - 2*time.Millisecond, 2*((time.Second+8)/9) - 2*time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHeldWindows(t, 10)
			for i := range 9 { // the first window: 9 of ours, at once, the last answered first
				h.answer(400*time.Millisecond, 395*time.Millisecond, 1, 1+i, 8-i)
			}
			ds, rs := h.reserve(0, 0, 0, 0)
			assert.Equal(t, []time.Duration{0, time.Second, time.Second, time.Second}, ds,
				"the one left at once, though 8 answers were still to come: the statement had counted them; three held at the latest end (1.4 s)")
			h.now = h.base.Add(1400 * time.Millisecond)
			assert.Equal(t, []time.Duration{0, time.Millisecond, time.Millisecond}, until(rs[1:]), "the probe goes; the others wait")
			h.answer(1402*time.Millisecond, 1400*time.Millisecond, 2, tt.giveLeft, 0)
			assert.Equal(t, tt.wantUntil, until(rs[2:]))
		})
	}
}
