package throttle_test

import (
	"cmp"
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// TestUpstreamAfterHuge: a booking asked for after the largest Duration
// is refused or booked far ahead, never at once with a negative Delay
// (now+after overflowed, FuzzUpstream/dffc96165ff8c315).
func TestUpstreamAfterHuge(t *testing.T) {
	tests := []struct {
		name    string
		reserve func(u *throttle.Upstream) (*throttle.Reservation, error)
	}{
		{"ReserveAfter", func(u *throttle.Upstream) (*throttle.Reservation, error) {
			return u.ReserveAfter(context.Background(), "k", 1, math.MaxInt64, -1)
		}},
		{"ReserveUnits", func(u *throttle.Upstream) (*throttle.Reservation, error) {
			return u.ReserveUnits(context.Background(), "k", 1, nil, math.MaxInt64, -1)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk, u := clockedUpstream(t)
			clk.Advance(time.Second)
			r, err := tt.reserve(u)
			require.NoError(t, err)
			assert.Greater(t, r.Delay, 24*time.Hour)
		})
	}
}

// TestUpstreamHoldsAtMostMaxHold: what a hostile upstream states holds a
// booking back for at most the max hold (issue 13). Each row was found by
// FuzzUpstream (testdata/fuzz/FuzzUpstream).
func TestUpstreamHoldsAtMostMaxHold(t *testing.T) {
	tests := []struct {
		name string
		give []throttle.Statement
		// giveThrottled says the answer was a refusal (a 429).
		giveThrottled bool
		// giveLatency is the answer's latency; 480 ms when 0.
		giveLatency time.Duration
		// giveHold is the record's max hold; DefaultMaxHold when 0.
		giveHold time.Duration
	}{
		{
			// A unit refills every 29 ms, so Clamp kept the reset; the
			// record's period stops at a day, and the bucket was full
			// only at the reset: the booking went 364 days ahead.
			name: "refilling, full in a year",
			give: []throttle.Statement{{Limit: throttle.MaxStatedCount, Remaining: 0, Reset: 365 * 24 * time.Hour, Refills: true}},
		},
		{
			// One quota name stated as a bucket full in a day, then as
			// a window of a second: the window took the bucket's reset,
			// and held every booking for the day (FuzzUpstream/5d9ba935ee301b88).
			name: "a bucket, then a window, under one name",
			give: []throttle.Statement{
				{Limit: throttle.MaxStatedCount, Remaining: 0, Reset: 24 * time.Hour, Refills: true},
				{Limit: 2, Remaining: 0, Reset: time.Second},
			},
		},
		{
			// A 429 stating 1 per minute, none left, with an epoch
			// second: the spent unit looked like other clients' and their
			// share, capped at nine tenths of the limit, left a tenth of
			// a unit a minute: ten minutes (FuzzUpstream/57c43091811857a5).
			name: "a limit of 1, spent by others",
			give: []throttle.Statement{{
				Limit: 1, Remaining: 0, Reset: 480 * time.Millisecond, Window: time.Minute, Absolute: true,
				ResetAt: epoch().Add(480 * time.Millisecond), Precision: time.Second,
			}},
			giveThrottled: true,
		},
		{
			// An answer a year in coming, to a bucket that states no
			// rate, none left: the record booked alone holds a booking
			// a quarter of the latest latency, 2190 hours
			// (FuzzUpstream/962c32b76604205c).
			name:        "an answer a year late",
			give:        []throttle.Statement{{Limit: 2, Remaining: 0, Reset: -time.Second, Window: -time.Second}},
			giveLatency: 365 * 24 * time.Hour,
		},
		{
			// A bucket's two statements, full in 480 ms and then, as
			// others drained it, in 6m0s: the reserve kept for others,
			// half a period, held a booking 3 minutes
			// (FuzzUpstream/fb5b63e53577700f).
			name: "a bucket drained by others",
			give: []throttle.Statement{
				{Limit: throttle.MaxStatedCount, Remaining: throttle.MaxStatedCount - 1, Reset: 480 * time.Millisecond, Refills: true},
				{Limit: throttle.MaxStatedCount, Remaining: 0, Reset: 6 * time.Minute, Refills: true},
			},
		},
		{
			// One answer stating a bucket of 48 full in 30 s (a unit
			// within the hold of a second: kept), then of 2 full in
			// 480 ms: the second, from the same instant, took the
			// emptier view, the first bucket's, and held a booking 29.76 s
			// (FuzzUpstream/04d85c9187509115).
			name: "a bucket's limit changes",
			give: []throttle.Statement{
				{Name: "b", Limit: 48, Remaining: 0, Reset: 30 * time.Second, Refills: true},
				{Name: "b", Limit: 2, Remaining: 0, Reset: 480 * time.Millisecond, Refills: true},
			},
			giveHold: time.Second,
		},
		{
			// One left of 1, its reset an instant stated to the minute,
			// under a max hold of 10 s: the window, guessed from the
			// precision, paced the next unit a minute after the reset
			// (FuzzUpstream/3f49d62cb306ff2e).
			name: "a reset stated to the minute",
			give: []throttle.Statement{{
				Limit: 1, Remaining: 0, Reset: 480 * time.Millisecond, Absolute: true,
				ResetAt: epoch().Add(480 * time.Millisecond), Precision: time.Minute,
			}},
			giveHold: 10 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			hold := cmp.Or(tt.giveHold, throttle.DefaultMaxHold)
			u, err := throttle.NewUpstream(throttle.WithClock(clk.Now), throttle.WithMaxHold(hold))
			require.NoError(t, err)
			o := throttle.Outcome{Throttled: tt.giveThrottled, Latency: cmp.Or(tt.giveLatency, 480*time.Millisecond), Statements: tt.give}
			require.NoError(t, u.Learn(context.Background(), "k", o))
			r, err := u.Reserve(context.Background(), "k", 1, -1)
			require.NoError(t, err)
			// A window's first unit after its reset may go up to a window
			// (the max hold at most) after it: the reset's second is slack.
			assert.LessOrEqual(t, r.Delay, hold+time.Second, "booked %v, held %v", r.OK, r.Held())
		})
	}
}

// TestUpstreamLearnedWindowAtMostMaxHold: a window learned from two
// resets stated as instants across a silence spans every window between
// them; it paces no slower than a window stated as long would, cut to
// the max hold. Learned as 6 minutes, it held a booking that long under a
// max hold of a second (FuzzUpstream/9d5e0605159c5d36).
func TestUpstreamLearnedWindowAtMostMaxHold(t *testing.T) {
	clk := newManualClock()
	u, err := throttle.NewUpstream(throttle.WithClock(clk.Now), throttle.WithMaxHold(time.Second))
	require.NoError(t, err)
	learn := func(s throttle.Statement) {
		o := throttle.Outcome{Latency: 480 * time.Millisecond, Statements: []throttle.Statement{s}}
		require.NoError(t, u.Learn(context.Background(), "k", o))
	}
	learn(throttle.Statement{Limit: -1, Remaining: 0, Reset: 480 * time.Millisecond})
	clk.Advance(6 * time.Minute)
	learn(throttle.Statement{Limit: 1, Remaining: 0, Reset: 480 * time.Millisecond, Absolute: true})
	r, err := u.Reserve(context.Background(), "k", 1, -1) // at the reset
	require.NoError(t, err)
	require.True(t, r.OK)
	r, err = u.Reserve(context.Background(), "k", 1, -1) // a window after it
	require.NoError(t, err)
	assert.LessOrEqual(t, r.Delay, 2*time.Second, "booked %v, held %v", r.OK, r.Held())
}

// TestUpstreamHugeCostNotFree: a booking of 10^18 tokens on a bucket
// stated empty for 6m0s neither goes at once nor leaves the bucket full
// for the next one: its refill time overflowed to a large negative one.
func TestUpstreamHugeCostNotFree(t *testing.T) {
	_, u := clockedUpstream(t)
	ctx := context.Background()
	empty := throttle.Statement{Unit: "tokens", Limit: 1000, Remaining: 0, Reset: 6 * time.Minute, Refills: true}
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Statements: []throttle.Statement{empty}}))
	r, err := u.ReserveUnits(ctx, "k", 1, map[string]int{"tokens": 1e18}, 0, -1)
	require.NoError(t, err)
	assert.Positive(t, r.Delay, "booked %v", r.OK)
	r, err = u.ReserveUnits(ctx, "k", 1, map[string]int{"tokens": 1000}, 0, 0)
	require.NoError(t, err)
	assert.False(t, r.OK, "a bucket stated empty admitted a full bucket at once")
}

// TestUpstreamRemainingAtMostLimit: a statement with no limit says more
// is left than the limit its quota stated before (a bucket of 1, then a
// window): the record keeps to the limit, and says so
// (found by FuzzUpstream: Stated 2 left of 1).
func TestUpstreamRemainingAtMostLimit(t *testing.T) {
	_, u := clockedUpstream(t)
	ctx := context.Background()
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Statements: []throttle.Statement{
		{Limit: 1, Remaining: 0, Reset: 480 * time.Millisecond, Refills: true},
		{Limit: -1, Remaining: 2, Reset: 480 * time.Millisecond},
	}}))
	stated := u.Stated("k")
	require.Len(t, stated, 1)
	assert.Equal(t, 1, stated[0].Limit)
	assert.LessOrEqual(t, stated[0].Remaining, 1)

	// The other order: 7 left with no limit, then a limit of 1 in a
	// statement of a window already gone.
	require.NoError(t, u.Learn(ctx, "j", throttle.Outcome{Statements: []throttle.Statement{
		{Limit: -1, Remaining: 7, Reset: 1200 * time.Millisecond},
		{Limit: 1, Remaining: 0, Reset: 480 * time.Millisecond},
	}}))
	stated = u.Stated("j")
	require.Len(t, stated, 1)
	assert.Equal(t, 1, stated[0].Limit)
	assert.LessOrEqual(t, stated[0].Remaining, 1)

	// A bucket: 7 left with no limit, then a limit of 1 in an older view
	// of it, arrived late (FuzzUpstream/f4917c6586ae272a).
	for _, o := range []throttle.Outcome{
		{Latency: 480 * time.Millisecond, Statements: []throttle.Statement{{Limit: -1, Remaining: 7, Reset: 480 * time.Millisecond, Refills: true}}},
		{Latency: 490 * time.Millisecond, Statements: []throttle.Statement{{Limit: 1, Remaining: 0, Reset: 480 * time.Millisecond, Refills: true}}},
	} {
		require.NoError(t, u.Learn(ctx, "i", o))
	}
	stated = u.Stated("i")
	require.Len(t, stated, 1)
	assert.Equal(t, 1, stated[0].Limit)
	assert.LessOrEqual(t, stated[0].Remaining, 1)
}

// TestUpstreamStatedUnknownRemaining: a quota stated with a limit and no
// remaining stays "not stated" (-1) in Stated once units are booked on
// it; it said MaxInt−1 left of 1 (FuzzUpstream/eea503ea9f0802b6).
func TestUpstreamStatedUnknownRemaining(t *testing.T) {
	_, u := clockedUpstream(t)
	ctx := context.Background()
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Statements: []throttle.Statement{{Limit: 1, Remaining: -1, Reset: 480 * time.Millisecond}}}))
	r, err := u.Reserve(ctx, "k", 1, 0)
	require.NoError(t, err)
	require.True(t, r.OK)
	stated := u.Stated("k")
	require.Len(t, stated, 1)
	assert.Equal(t, -1, stated[0].Remaining)
}
