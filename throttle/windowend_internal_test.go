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
				s := tenPerSecond(now, base.Add(time.Duration(stamp)*time.Second), remaining)
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

// tenPerSecond is what an upstream with 10 requests a window states at
// now, its reset stated to the second as resetAt (the window may end up
// to a second later).
func tenPerSecond(now, resetAt time.Time, remaining int) Statement {
	return Statement{Name: "requests", Unit: UnitRequests, Limit: 10, Remaining: remaining,
		Reset: resetAt.Sub(now), Absolute: true, ResetAt: resetAt.Add(time.Second), Precision: time.Second}
}
