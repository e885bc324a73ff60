package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

func TestAdaptiveStartsAtTheCeilingAndPacesEvenly(t *testing.T) {
	clk := newManualClock()
	a, err := throttle.NewAdaptive(throttle.PerSecond(10), throttle.WithClock(clk.Now))
	require.NoError(t, err)
	assert.InDelta(t, 10.0, a.Rate("k"), 1e-9)
	var got []time.Duration
	for range 3 {
		r, err := a.Reserve(context.Background(), "k", 1, -1)
		require.NoError(t, err)
		got = append(got, r.Delay)
	}
	assert.Equal(t, ms(0, 100, 200), got)
}

func TestAdaptiveStatedLimitReplacesTheEstimate(t *testing.T) {
	tests := []struct {
		name     string
		give     throttle.Statement
		wantRate float64
	}{
		{name: "limit and window: 97% of it", give: requests(120, 50, 30*time.Second, time.Minute), wantRate: 2 * 0.97},
		{name: "above the ceiling", give: requests(100_000, 50, time.Second, time.Second), wantRate: 1000},
		{name: "tokens do not count", give: throttle.Statement{Name: "tokens", Unit: "tokens", Limit: 10, Remaining: 5, Window: time.Second}, wantRate: 1000},
		{name: "reset at a window boundary: the window is at least the reset", give: absolute(requests(120, 50, 30*time.Second, 0)), wantRate: 4 * 0.97},
		{name: "reset at a boundary under a second: the window is at least a second", give: absolute(requests(48, 47, 300*time.Millisecond, 0)), wantRate: 48 * 0.97},
		{name: "reset as a delay: a bucket, starting at its limit per reset", give: requests(120, 50, 30*time.Second, 0), wantRate: 4},
		{name: "limit 0 is unknown", give: requests(0, 5, time.Second, time.Second), wantRate: 1000},
		{name: "remaining 1e18 and a reset years ahead are clamped", give: absolute(requests(120, 1e18, 24*365*time.Hour, 0)), wantRate: 120 / 60.0 * 0.97},
		{
			// Anthropic's RFC 3339 reset of a bucket of 30 a second, 33 ms
			// off, with Reset counted from a Date a second coarse: the
			// period is about the instant's 33 ms × 30 (at least a
			// second), not 933 ms × 30 (the rate was 1.04/s).
			name: "a refilling bucket's reset as an instant: the period from the instant",
			give: throttle.Statement{Name: "q", Unit: throttle.UnitRequests, Limit: 30, Remaining: 29, Reset: 933 * time.Millisecond,
				Absolute: true, Refills: true, ResetAt: epoch().Add(33 * time.Millisecond), Precision: time.Nanosecond},
			wantRate: 30 * 0.97,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := throttle.NewAdaptive(throttle.PerSecond(1000), throttle.WithClock(newManualClock().Now))
			require.NoError(t, err)
			require.NoError(t, a.Learn(context.Background(), "k", throttle.Outcome{N: 1, Statements: []throttle.Statement{tt.give}}))
			assert.InDelta(t, tt.wantRate, a.Rate("k"), 1e-9)
		})
	}
}

// absolute returns s with its reset stated as an instant.
func absolute(s throttle.Statement) throttle.Statement {
	s.Absolute = true
	return s
}

func TestAdaptiveCutsOnThrottlingAndNeverBelowTheFloor(t *testing.T) {
	clk := newManualClock()
	a, err := throttle.NewAdaptive(throttle.PerSecond(100), throttle.WithClock(clk.Now), throttle.WithFloor(throttle.PerSecond(5)))
	require.NoError(t, err)
	ctx := context.Background()
	for range 50 {
		clk.Advance(time.Second)
		require.NoError(t, a.Learn(ctx, "k", throttle.Outcome{N: 1, Throttled: true}))
	}
	assert.InDelta(t, 5.0, a.Rate("k"), 1e-9)
}

func TestAdaptivePauseShiftsBookings(t *testing.T) {
	clk := newManualClock()
	a, err := throttle.NewAdaptive(throttle.PerSecond(10), throttle.WithClock(clk.Now))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = a.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	r, err := a.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	require.Equal(t, 100*time.Millisecond, r.Delay)

	require.NoError(t, a.Pause(ctx, "k", time.Second))
	s, err := a.Inspect(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, time.Second, s.Paused)
	clk.Advance(1099 * time.Millisecond)
	s, err = a.Inspect(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, 101*time.Millisecond, s.Next, "the booking at 100 ms moved to 1.1 s, the next free slot after it")
	clk.Advance(time.Millisecond)
	assert.NoError(t, r.Wait(ctx))
}

func TestAdaptiveCancelGivesBackTheLatest(t *testing.T) {
	clk := newManualClock()
	a, err := throttle.NewAdaptive(throttle.PerSecond(10), throttle.WithClock(clk.Now))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = a.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	r, err := a.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	require.NoError(t, r.Cancel(ctx))
	again, err := a.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	assert.Equal(t, 100*time.Millisecond, again.Delay)
}

func TestNewAdaptiveBadInput(t *testing.T) {
	tests := []struct {
		name    string
		give    throttle.Rate
		opts    []throttle.Option
		wantErr string
	}{
		{name: "zero ceiling", give: throttle.Rate{}, wantErr: "throttle: NewAdaptive ceiling: throttle: Rate.N must be positive, got 0"},
		{name: "floor below one per max hold", give: throttle.PerSecond(10), opts: []throttle.Option{throttle.WithFloor(throttle.PerHour(1))},
			wantErr: "throttle: WithFloor 1/h is below one unit per max hold (1m0s)"},
		{name: "bad floor", give: throttle.PerSecond(10), opts: []throttle.Option{throttle.WithFloor(throttle.Rate{N: -1, Per: time.Second})},
			wantErr: "throttle: WithFloor: throttle: Rate.N must be positive, got -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := throttle.NewAdaptive(tt.give, tt.opts...)
			assert.EqualError(t, err, tt.wantErr)
		})
	}
}

func TestAdaptiveStricterQuotaWins(t *testing.T) {
	a, err := throttle.NewAdaptive(throttle.PerSecond(1000), throttle.WithClock(newManualClock().Now))
	require.NoError(t, err)
	require.NoError(t, a.Learn(context.Background(), "k", throttle.Outcome{N: 1, Statements: []throttle.Statement{
		{Name: "burst", Unit: throttle.UnitRequests, Limit: 100, Remaining: 99, Reset: time.Second, Window: time.Second},
		{Name: "minute", Unit: throttle.UnitRequests, Limit: 600, Remaining: 599, Reset: time.Minute, Window: time.Minute},
	}}))
	assert.InDelta(t, 10*0.97, a.Rate("k"), 1e-9)
}

func TestAdaptiveStatedFloorAndRecovery(t *testing.T) {
	clk := newManualClock()
	a, err := throttle.NewAdaptive(throttle.PerSecond(1000), throttle.WithClock(clk.Now), throttle.WithFloor(throttle.PerSecond(2)))
	require.NoError(t, err)
	ctx := context.Background()
	hostile := throttle.Statement{Name: "q", Unit: throttle.UnitRequests, Limit: 1, Remaining: 0, Reset: 24 * time.Hour, Window: 24 * time.Hour}
	require.NoError(t, a.Learn(ctx, "k", throttle.Outcome{N: 1, Throttled: true, Statements: []throttle.Statement{hostile}}))
	assert.InDelta(t, 2.0, a.Rate("k"), 1e-9, "one a day, clamped to the max hold, is below the floor")
	clk.Advance(time.Second)
	recovered := throttle.Statement{Name: "q", Unit: throttle.UnitRequests, Limit: 100, Remaining: 99, Reset: time.Second, Window: time.Second}
	require.NoError(t, a.Learn(ctx, "k", throttle.Outcome{N: 1, Statements: []throttle.Statement{recovered}}))
	assert.InDelta(t, 100*0.97*0.98, a.Rate("k"), 1e-9, "the next statement replaces it at once, less the throttled answer's 2%")
}

func TestAdaptiveSpentQuotaHoldsUnlessTheWindowSlides(t *testing.T) {
	spent := func(remaining int, reset time.Duration) throttle.Outcome {
		return throttle.Outcome{N: 1, Statements: []throttle.Statement{{Name: "q", Unit: throttle.UnitRequests, Limit: 48, Remaining: remaining, Reset: reset, Window: time.Second}}}
	}
	tests := []struct {
		name string
		// giveBefore is the remaining stated by the 60 answers, 25 ms
		// apart, before the one at 0: every other one states one more,
		// as a window whose units come and go does (a remaining that
		// stays exactly put while this client's units grow is a
		// bucket's: adaptiveOthers.pin).
		giveBefore int
		giveZeros  int // answers at 0 in a row, at the same instant
		giveReset  time.Duration
		wantDelay  time.Duration
	}{
		{name: "fixed window: what was spent fell at the boundary, so nothing before the reset", giveBefore: 40, giveZeros: 1, giveReset: 300 * time.Millisecond, wantDelay: 300 * time.Millisecond},
		{name: "fixed window: holds do not compound", giveBefore: 40, giveZeros: 2, giveReset: 300 * time.Millisecond, wantDelay: 300 * time.Millisecond},
		{name: "fixed window at its reset: nothing to hold", giveBefore: 40, giveZeros: 1, wantDelay: 0},
		{name: "sliding window: a window's worth spent at every instant, so one answer at 0 is noise", giveBefore: 2, giveZeros: 1, giveReset: 300 * time.Millisecond, wantDelay: 0},
		{name: "sliding window: from the second answer at 0, until one unit has drained", giveBefore: 2, giveZeros: 2, giveReset: 300 * time.Millisecond, wantDelay: time.Second / 48},
		{name: "sliding window, reset stated as now (httprate, within Date's second): the same", giveBefore: 2, giveZeros: 2, wantDelay: time.Second / 48},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			a, err := throttle.NewAdaptive(throttle.PerSecond(1000), throttle.WithClock(clk.Now))
			require.NoError(t, err)
			ctx := context.Background()
			for i := range 60 {
				require.NoError(t, a.Learn(ctx, "k", spent(tt.giveBefore+i%2, 500*time.Millisecond)))
				clk.Advance(25 * time.Millisecond)
			}
			for range tt.giveZeros {
				require.NoError(t, a.Learn(ctx, "k", spent(0, tt.giveReset)))
			}
			r, err := a.Reserve(ctx, "k", 1, -1)
			require.NoError(t, err)
			assert.Equal(t, tt.wantDelay, r.Delay)
		})
	}
}
