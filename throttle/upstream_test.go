package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// requests is a statement of a quota counted in requests.
func requests(limit, remaining int, reset, window time.Duration) throttle.Statement {
	return throttle.Statement{Name: "requests", Unit: throttle.UnitRequests, Limit: limit, Remaining: remaining, Reset: reset, Window: window}
}

// delays books one unit of "k" n times on u alone and returns each delay.
func delays(t *testing.T, u *throttle.Upstream, n int) []time.Duration {
	t.Helper()
	return bookDelays(t, u, n)
}

// pacedDelays books one unit of "k" n times through All beside a limiter
// that admits everything at once, as a Transport with WithLimiter and
// WithUpstream does, and returns each delay: what the record does when
// another limiter paces the key.
func pacedDelays(t *testing.T, u *throttle.Upstream, n int) []time.Duration {
	t.Helper()
	open, err := throttle.NewTokenBucket(throttle.PerSecond(1_000_000), 1000)
	require.NoError(t, err)
	return bookDelays(t, throttle.All(open, u), n)
}

// bookDelays books one unit of "k" n times on l, each of which must be
// booked, and returns each delay.
func bookDelays(t *testing.T, l throttle.Limiter, n int) []time.Duration {
	t.Helper()
	var ds []time.Duration
	for range n {
		r, err := l.Reserve(context.Background(), "k", 1, -1)
		require.NoError(t, err)
		require.True(t, r.OK)
		ds = append(ds, r.Delay)
	}
	return ds
}

func ms(ds ...int) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = time.Duration(d) * time.Millisecond
	}
	return out
}

func TestUpstreamBooksWhatIsStated(t *testing.T) {
	tests := []struct {
		name       string
		giveStated []throttle.Outcome // learned in order, at the same instant
		giveN      int
		wantDelays []time.Duration
	}{
		{
			name:       "nothing stated admits everything at once",
			giveN:      3,
			wantDelays: ms(0, 0, 0),
		},
		{
			name:       "R before T, then L per window evenly",
			giveStated: []throttle.Outcome{{Statements: []throttle.Statement{requests(4, 2, 500*time.Millisecond, time.Second)}}},
			giveN:      5,
			wantDelays: ms(0, 0, 500, 750, 1000),
		},
		{
			name:       "remaining 0 holds new units until the reset",
			giveStated: []throttle.Outcome{{Statements: []throttle.Statement{requests(2, 0, 300*time.Millisecond, time.Second)}}},
			giveN:      3,
			wantDelays: ms(300, 800, 1300),
		},
		{
			name:       "a whole-second delay of 0 for a window not full: delays are cut down, so each ends up to a second later",
			giveStated: []throttle.Outcome{{Statements: []throttle.Statement{requests(10, 0, 0, 2*time.Second)}}},
			giveN:      2,
			wantDelays: ms(1000, 1200),
		},
		{
			name:       "no limit stated: nothing is known after the reset",
			giveStated: []throttle.Outcome{{Statements: []throttle.Statement{requests(-1, 0, 300*time.Millisecond, 0)}}},
			giveN:      3,
			wantDelays: ms(300, 300, 300),
		},
		{
			name: "the same window: the lower remaining wins when the order is unknown",
			giveStated: []throttle.Outcome{
				{Statements: []throttle.Statement{requests(10, 1, 400*time.Millisecond, time.Second)}},
				{Statements: []throttle.Statement{requests(10, 5, 400*time.Millisecond, time.Second)}},
			},
			giveN:      2,
			wantDelays: ms(0, 400),
		},
		{
			name: "the same window: the answer to the request sent later wins",
			giveStated: []throttle.Outcome{
				{Latency: 50 * time.Millisecond, Statements: []throttle.Statement{requests(10, 1, 400*time.Millisecond, time.Second)}},
				{Latency: 10 * time.Millisecond, Statements: []throttle.Statement{requests(10, 3, 400*time.Millisecond, time.Second)}},
			},
			giveN:      4,
			wantDelays: ms(0, 0, 0, 400),
		},
		{
			name: "an answer for a request sent earlier that arrives late loses",
			giveStated: []throttle.Outcome{
				{Latency: 10 * time.Millisecond, Statements: []throttle.Statement{requests(10, 1, 400*time.Millisecond, time.Second)}},
				{Latency: 50 * time.Millisecond, Statements: []throttle.Statement{requests(10, 3, 400*time.Millisecond, time.Second)}},
			},
			giveN:      2,
			wantDelays: ms(0, 400),
		},
		{
			name: "a later reset is a new window and replaces",
			giveStated: []throttle.Outcome{
				{Statements: []throttle.Statement{requests(10, 0, 400*time.Millisecond, time.Second)}},
				{Statements: []throttle.Statement{requests(10, 2, 1400*time.Millisecond, time.Second)}},
			},
			giveN:      3,
			wantDelays: ms(0, 0, 1400),
		},
		{
			name: "an earlier reset is stale and ignored",
			giveStated: []throttle.Outcome{
				{Statements: []throttle.Statement{requests(10, 0, 1400*time.Millisecond, time.Second)}},
				{Statements: []throttle.Statement{requests(10, 9, 200*time.Millisecond, time.Second)}},
			},
			giveN:      1,
			wantDelays: ms(1400),
		},
		{
			name: "a reset years ahead holds the key for the max hold at most",
			giveStated: []throttle.Outcome{
				{Statements: []throttle.Statement{requests(-1, 0, 24*365*time.Hour, 0)}},
			},
			giveN:      1,
			wantDelays: []time.Duration{throttle.DefaultMaxHold},
		},
		{
			name: "token quotas are recorded, not booked",
			giveStated: []throttle.Outcome{
				{Statements: []throttle.Statement{{Name: "tokens", Unit: "tokens", Limit: 1000, Remaining: 0, Reset: time.Second}}},
			},
			giveN:      2,
			wantDelays: ms(0, 0),
		},
		{
			name: "every quota in requests binds",
			giveStated: []throttle.Outcome{{Statements: []throttle.Statement{
				requests(10, 5, time.Second, time.Second),
				{Name: "daily", Unit: throttle.UnitRequests, Limit: 1000, Remaining: 0, Reset: 2 * time.Second},
			}}},
			giveN:      1,
			wantDelays: ms(2000),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, u := clockedUpstream(t)
			for _, o := range tt.giveStated {
				require.NoError(t, u.Learn(context.Background(), "k", o))
			}
			assert.Equal(t, tt.wantDelays, delays(t, u, tt.giveN))
		})
	}
}

// Units in flight (booked, not yet answered) count against what a later
// statement says is left, and stop counting once answered.
func TestUpstreamCountsUnitsInFlight(t *testing.T) {
	_, u := clockedUpstream(t)
	ctx := context.Background()
	assert.Equal(t, ms(0, 0, 0), delays(t, u, 3), "three in flight")

	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{N: 1, Statements: []throttle.Statement{requests(10, 4, time.Second, time.Second)}}))
	assert.Equal(t, ms(0, 0, 1000), delays(t, u, 3), "4 left, less the 2 still in flight")
}

// A statement never moves units booked before it: remaining 0 holds back
// only new bookings.
func TestUpstreamNeverMovesBookedUnits(t *testing.T) {
	clk, u := clockedUpstream(t)
	ctx := context.Background()
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Statements: []throttle.Statement{requests(1, 0, 200*time.Millisecond, time.Second)}}))
	r, err := u.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	require.Equal(t, 200*time.Millisecond, r.Delay)

	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Statements: []throttle.Statement{requests(1, 0, 5*time.Second, time.Second)}}))
	clk.Advance(200 * time.Millisecond)
	assert.NoError(t, r.Wait(ctx), "the unit booked at 200 ms is still the caller's then")
	assert.Equal(t, ms(4800), delays(t, u, 1), "new units wait for the new reset")
}

func TestUpstreamCancelGivesBack(t *testing.T) {
	_, u := clockedUpstream(t)
	ctx := context.Background()
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Statements: []throttle.Statement{requests(2, 1, 300*time.Millisecond, time.Second)}}))
	r1, err := u.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	r2, err := u.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	require.Equal(t, ms(0, 300), []time.Duration{r1.Delay, r2.Delay})

	require.NoError(t, r2.Cancel(ctx))
	require.NoError(t, r1.Cancel(ctx))
	assert.Equal(t, ms(0, 300), delays(t, u, 2), "both given back")
}

func TestUpstreamPauseShiftsBookings(t *testing.T) {
	_, u := clockedUpstream(t)
	ctx := context.Background()
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Statements: []throttle.Statement{requests(4, 0, 100*time.Millisecond, time.Second)}}))
	r, err := u.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	require.Equal(t, 100*time.Millisecond, r.Delay)

	require.NoError(t, u.Pause(ctx, "k", time.Second))
	s, err := u.Inspect(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, time.Second, s.Paused)
	assert.Equal(t, 1, s.Ahead, "the unit booked is in flight")
	assert.Equal(t, ms(1350), delays(t, u, 1), "after the shifted unit, at the stated spacing")
}

func TestUpstreamLearnsTheWindowFromResets(t *testing.T) {
	clk, u := clockedUpstream(t)
	ctx := context.Background()
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Statements: []throttle.Statement{requests(4, 4, 100*time.Millisecond, 0)}}))
	clk.Advance(200 * time.Millisecond)
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Statements: []throttle.Statement{requests(4, 0, 1900*time.Millisecond, 0)}}))
	got := u.Stated("k")
	require.Len(t, got, 1)
	assert.Equal(t, 2*time.Second, got[0].Window, "two successive resets 2 s apart")
	assert.Equal(t, ms(1900, 1900), pacedDelays(t, u, 2), "a learned window is reported, not used for pacing beside a limiter")
	assert.Equal(t, ms(1900, 2375), delays(t, u, 2), "alone, the record paces the limit per the longest reset (unpaced.go)")
}

func TestUpstreamStated(t *testing.T) {
	clk, u := clockedUpstream(t)
	ctx := context.Background()
	assert.Nil(t, u.Stated("k"))
	tokens := throttle.Statement{Name: "tokens", Unit: "tokens", Limit: 1000, Remaining: 10, Reset: time.Second}
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Statements: []throttle.Statement{requests(10, 5, time.Second, time.Second), tokens}}))
	clk.Advance(400 * time.Millisecond)
	tokens.Reset = 600 * time.Millisecond
	assert.Equal(t, []throttle.Statement{requests(10, 5, 600*time.Millisecond, time.Second), tokens}, u.Stated("k"), "every reset measured from now")
}

func TestStatementClamp(t *testing.T) {
	tests := []struct {
		name        string
		give        throttle.Statement
		wantUsed    throttle.Statement
		wantChanged []string
	}{
		{name: "sane", give: requests(10, 5, time.Second, time.Second), wantUsed: requests(10, 5, time.Second, time.Second)},
		{name: "limit of 0", give: requests(0, 0, time.Second, 0), wantUsed: requests(-1, 0, time.Second, 0), wantChanged: []string{"Limit"}},
		{name: "remaining 1e18", give: requests(-1, 1e18, time.Second, 0), wantUsed: requests(-1, throttle.MaxStatedCount, time.Second, 0), wantChanged: []string{"Remaining"}},
		{name: "remaining above the limit", give: requests(10, 50, time.Second, 0), wantUsed: requests(10, 10, time.Second, 0), wantChanged: []string{"Remaining"}},
		{name: "reset years ahead", give: requests(10, 0, 5*365*24*time.Hour, 0), wantUsed: requests(10, 0, time.Minute, 0), wantChanged: []string{"Reset"}},
		{name: "negative reset", give: requests(10, 0, -time.Second, 0), wantUsed: requests(10, 0, 0, 0), wantChanged: []string{"Reset"}},
		{name: "huge window", give: requests(10, 0, time.Second, 48*time.Hour), wantUsed: requests(10, 0, time.Second, time.Minute), wantChanged: []string{"Window"}},
		{name: "a refilling quota's reset beyond the hold, a unit within it, is kept", give: throttle.Statement{Name: "t", Limit: 1000, Remaining: 400, Reset: 3 * time.Minute, Refills: true},
			wantUsed: throttle.Statement{Name: "t", Limit: 1000, Remaining: 400, Reset: 3 * time.Minute, Refills: true}},
		{name: "a refilling quota at 0 for 6m0s is kept: nothing more now", give: throttle.Statement{Name: "t", Limit: 60, Remaining: 0, Reset: 6 * time.Minute, Refills: true},
			wantUsed: throttle.Statement{Name: "t", Limit: 60, Remaining: 0, Reset: 6 * time.Minute, Refills: true}},
		{name: "a refilling quota whose unit refills beyond the hold: its reset is cut, its remaining never raised", give: throttle.Statement{Name: "t", Limit: 10, Remaining: 0, Reset: 30 * 24 * time.Hour, Refills: true},
			wantUsed: throttle.Statement{Name: "t", Limit: 10, Remaining: 0, Reset: time.Minute, Refills: true}, wantChanged: []string{"Reset"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotUsed, gotChanged := tt.give.Clamp(time.Minute)
			assert.Equal(t, tt.wantUsed, gotUsed)
			assert.Equal(t, tt.wantChanged, gotChanged)
		})
	}
}

func TestNewUpstreamBadOptions(t *testing.T) {
	tests := []struct {
		name    string
		give    throttle.Option
		wantErr string
	}{
		{name: "max hold 0", give: throttle.WithMaxHold(0), wantErr: "throttle: WithMaxHold must be positive, got 0s"},
		{name: "max keys 0", give: throttle.WithMaxKeys(0), wantErr: "throttle: WithMaxKeys must be at least 1, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := throttle.NewUpstream(tt.give)
			assert.EqualError(t, err, tt.wantErr)
		})
	}
	assert.PanicsWithValue(t, "throttle: nil Option (argument 0)", func() { _, _ = throttle.NewUpstream(nil) })
}

// Units booked after the reset count in the next window, not against
// what a statement says is left before the reset.
func TestUpstreamCountsOnlyUnitsBeforeTheReset(t *testing.T) {
	clk, u := clockedUpstream(t)
	ctx := context.Background()
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Latency: time.Millisecond, Statements: []throttle.Statement{requests(4, 2, 500*time.Millisecond, time.Second)}}))
	require.Equal(t, ms(0, 0, 500, 750, 1000), delays(t, u, 5))

	clk.Advance(time.Millisecond) // sent after the first answer arrived: it wins
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Latency: time.Microsecond, Statements: []throttle.Statement{requests(4, 4, 499*time.Millisecond, time.Second)}}))
	got := u.Stated("k")
	require.Len(t, got, 1)
	assert.Equal(t, 2, got[0].Remaining, "4 left, less the 2 in flight before the reset; the 3 after it do not count")
}

// Resets stated as instants are window boundaries: the window learned
// from two of them paces units after the reset.
func TestUpstreamPacesAtALearnedWindowOfAbsoluteResets(t *testing.T) {
	clk, u := clockedUpstream(t)
	ctx := context.Background()
	first, second := requests(4, 4, 100*time.Millisecond, 0), requests(4, 0, 1900*time.Millisecond, 0)
	first.Absolute, second.Absolute = true, true
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Statements: []throttle.Statement{first}}))
	clk.Advance(200 * time.Millisecond)
	require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Statements: []throttle.Statement{second}}))
	assert.Equal(t, ms(1900, 2400), delays(t, u, 2), "4 per learned 2 s window")
}

// A remaining that grows within a window, for a request sent later, is a
// sliding window: once what it states is spent, units are paced at its
// limit per window instead of waiting for the reset.
func TestUpstreamPacesASlidingWindowBeforeItsReset(t *testing.T) {
	clk, u := clockedUpstream(t)
	ctx := context.Background()
	learn := func(remaining int, reset time.Duration) {
		t.Helper()
		require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Latency: 10 * time.Millisecond, Statements: []throttle.Statement{requests(10, remaining, reset, time.Second)}}))
	}
	learn(0, 900*time.Millisecond)
	assert.Equal(t, ms(900), delays(t, u, 1), "a fixed window, as far as anyone knows: wait for the reset")
	clk.Advance(20 * time.Millisecond)
	learn(1, 880*time.Millisecond) // sent after the first answer arrived, and more is left: it refills
	assert.Equal(t, []time.Duration{0, 980 * time.Millisecond, 980*time.Millisecond + (time.Second+8)/9}, delays(t, u, 3),
		"the one left now, then 9 per second: a unit of headroom below a sliding counter's limit")
}

// A quota that refills before its reset with no window to pace at (a
// GCRA's bucket states the time to refill it as its reset) holds nothing
// back once it shows it refills, until its refill is measured
// (refill_test.go): the configured limiter paces. Nor does a reset stated
// as "within a second", to the second: it says nothing about when. (With
// nothing beside it, the record paces such a bucket itself: unpaced_test.go.)
func TestUpstreamLeavesARefillingBucketToTheLimiter(t *testing.T) {
	clk, u := clockedUpstream(t)
	ctx := context.Background()
	learn := func(remaining int) {
		t.Helper()
		require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{Latency: 10 * time.Millisecond, Statements: []throttle.Statement{requests(9, remaining, time.Second, 0)}}))
	}
	learn(0)
	assert.Equal(t, ms(0), pacedDelays(t, u, 1), "within a second, stated to the second")
	clk.Advance(20 * time.Millisecond) // the next request is sent after this answer
	learn(1)
	assert.Equal(t, ms(0, 0, 0), pacedDelays(t, u, 3))
}

// The record has heard nothing until a quota is stated or a key is
// paused: answers without statements leave it quiet.
func TestUpstreamHeard(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		give func(*throttle.Upstream) error
		want bool
	}{
		{"an answer without statements", func(u *throttle.Upstream) error {
			return u.Learn(ctx, "k", throttle.Outcome{N: 1})
		}, false},
		{"a token quota", func(u *throttle.Upstream) error {
			return u.Learn(ctx, "k", throttle.Outcome{N: 1, Statements: []throttle.Statement{{Name: "tokens", Unit: "tokens", Limit: 10, Remaining: 0, Reset: time.Second}}})
		}, true},
		{"a quota in requests", func(u *throttle.Upstream) error {
			return u.Learn(ctx, "k", throttle.Outcome{N: 1, Statements: []throttle.Statement{requests(10, 3, time.Second, 0)}})
		}, true},
		{"a pause", func(u *throttle.Upstream) error { return u.Pause(ctx, "k", time.Second) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := throttle.NewUpstream()
			require.NoError(t, err)
			assert.False(t, u.Heard())
			require.NoError(t, tt.give(u))
			assert.Equal(t, tt.want, u.Heard())
		})
	}
}

// Requests sent before the record heard anything were not booked on it,
// yet a statement's remaining is theirs first: those still in flight
// (Outcome.Unbooked) are taken off what is left. Without it, the first
// window of 5c at 25% too high met 6 429s.
func TestUpstreamCountsRequestsItDidNotBook(t *testing.T) {
	u, err := throttle.NewUpstream()
	require.NoError(t, err)
	require.NoError(t, u.Learn(context.Background(), "k", throttle.Outcome{Unbooked: 7, Statements: []throttle.Statement{requests(48, 20, time.Second, time.Second)}}))
	got := u.Stated("k")
	require.Len(t, got, 1)
	assert.Equal(t, 13, got[0].Remaining, "20 left, 7 of them for the requests in flight")

	p := newPhasedWindows(t, 48)
	p.clk.Set(p.base.Add(400 * time.Millisecond))
	resetAt := p.base.Add(time.Second)
	s := throttle.Statement{Name: "requests", Unit: throttle.UnitRequests, Limit: 48, Remaining: 20,
		Reset: 600 * time.Millisecond, Absolute: true, ResetAt: resetAt.Add(time.Second), Precision: time.Second}
	require.NoError(t, p.u.Learn(context.Background(), "k", throttle.Outcome{Unbooked: 7, Latency: time.Millisecond, Statements: []throttle.Statement{s}}))
	assert.Equal(t, 13, p.u.Stated("k")[0].Remaining, "the same for a window stated to the second")
}

// A remaining that holds within a window across admitted answers, in
// whatever order they arrive, is a sliding window too: an upstream that
// counts each request states one unit less for the next until its
// window resets. A sliding counter paced at its decay states the same
// remaining on every answer, and its reset is its window's end; the
// third such answer marks it, and what follows is paced at its limit per
// window, not held to the reset.
func TestUpstreamPacesAWindowWhoseRemainingHolds(t *testing.T) {
	tests := []struct {
		name       string
		giveLeft   []int // stated by admitted answers, 50 ms apart
		wantDelays []time.Duration
	}{
		{
			name:       "counted: one less each time, a fixed window as far as anyone knows",
			giveLeft:   []int{4, 3, 2},
			wantDelays: ms(0, 0, 2900),
		},
		{
			name:       "twice the same: a request it may not have counted",
			giveLeft:   []int{3, 2, 2},
			wantDelays: ms(0, 0, 2900),
		},
		{
			name:       "three times the same: it refills",
			giveLeft:   []int{2, 2, 2},
			wantDelays: []time.Duration{0, 0, (5*time.Second + 98) / 99}, // a unit of headroom below its limit
		},
		{
			name:       "three times 0: nothing comes back before the reset",
			giveLeft:   []int{0, 0, 0},
			wantDelays: ms(2900, 2950, 3000),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk, u := clockedUpstream(t)
			for i, left := range tt.giveLeft {
				if i > 0 {
					clk.Advance(50 * time.Millisecond)
				}
				// No latency: the order is unknown, as under testing/synctest.
				require.NoError(t, u.Learn(context.Background(), "k", throttle.Outcome{N: 1, Statements: []throttle.Statement{requests(100, left, 3*time.Second-time.Duration(i)*50*time.Millisecond, 5*time.Second)}}))
			}
			assert.Equal(t, tt.wantDelays, pacedDelays(t, u, 3))
		})
	}
}
