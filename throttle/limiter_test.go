package throttle_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

func TestConstructorsRejectBadInput(t *testing.T) {
	newTB := func(r throttle.Rate, burst int, opts ...throttle.Option) func() error {
		return func() error {
			tb, err := throttle.NewTokenBucket(r, burst, opts...)
			assert.Nil(t, tb)
			return err
		}
	}
	newLB := func(r throttle.Rate, capacity int, opts ...throttle.Option) func() error {
		return func() error {
			lb, err := throttle.NewLeakyBucket(r, capacity, opts...)
			assert.Nil(t, lb)
			return err
		}
	}
	tests := []struct {
		name     string
		giveNew  func() error
		wantErrs []string
	}{
		{name: "N zero", giveNew: newTB(throttle.PerSecond(0), 1), wantErrs: []string{"Rate.N", "0"}},
		{name: "N negative", giveNew: newLB(throttle.PerMinute(-2), 1), wantErrs: []string{"Rate.N", "-2"}},
		{name: "Per zero", giveNew: newTB(throttle.Rate{N: 1}, 1), wantErrs: []string{"Rate.Per", "0s"}},
		{name: "Per negative", giveNew: newLB(throttle.Rate{N: 1, Per: -time.Minute}, 1), wantErrs: []string{"Rate.Per", "-1m0s"}},
		{name: "below a nanosecond", giveNew: newTB(throttle.Rate{N: 2, Per: time.Nanosecond}, 1), wantErrs: []string{"2", "1ns", "nanosecond"}},
		{name: "burst zero", giveNew: newTB(throttle.PerSecond(1), 0), wantErrs: []string{"burst", "0"}},
		{name: "burst negative", giveNew: newTB(throttle.PerSecond(1), -4), wantErrs: []string{"burst", "-4"}},
		{name: "capacity negative", giveNew: newLB(throttle.PerSecond(1), -1), wantErrs: []string{"capacity", "-1"}},
		{name: "burst overflows", giveNew: newTB(throttle.PerDay(1), 1_000_000), wantErrs: []string{"burst", "1000000"}},
		{name: "capacity overflows", giveNew: newLB(throttle.PerDay(1), 1_000_000), wantErrs: []string{"capacity"}},
		{name: "WithMaxKeys zero", giveNew: newLB(throttle.PerSecond(1), 1, throttle.WithMaxKeys(0)), wantErrs: []string{"WithMaxKeys", "0"}},
		{name: "WithMaxKeys negative", giveNew: newTB(throttle.PerSecond(1), 1, throttle.WithMaxKeys(-1)), wantErrs: []string{"WithMaxKeys", "-1"}},
		{name: "negative tolerance", giveNew: newTB(throttle.PerSecond(1), 1, throttle.WithTolerance(-time.Millisecond)), wantErrs: []string{"WithTolerance", "-1ms"}},
		{name: "window limit above 2^53", giveNew: func() error {
			// The sliding log's count overflowed near MaxInt and panicked.
			sw, err := throttle.NewSlidingWindow(math.MaxInt, time.Hour)
			assert.Nil(t, sw)
			return err
		}, wantErrs: []string{"limit", "9223372036854775807", "2^53"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.giveNew()
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "throttle: "), err.Error())
			for _, want := range tt.wantErrs {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestNilOptionPanics(t *testing.T) {
	tests := []struct {
		name    string
		giveNew func()
		want    string
	}{
		{name: "nil Option", giveNew: func() { _, _ = throttle.NewTokenBucket(throttle.PerSecond(1), 1, nil) }, want: "throttle: nil Option (argument 0)"},
		{name: "nil clock", giveNew: func() { throttle.WithClock(nil) }, want: "throttle: WithClock given a nil func"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tt.want, tt.giveNew)
		})
	}
}

func TestCallsRejectBadInput(t *testing.T) {
	tb := newTokenBucket(t, throttle.PerSecond(10), 5)
	lb := newLeakyBucket(t, throttle.PerSecond(10), 2)
	limiters := []struct {
		name string
		l    throttle.Limiter
	}{
		{name: "TokenBucket", l: tb},
		{name: "LeakyBucket", l: lb},
		{name: "All", l: throttle.All(tb, lb)},
		{name: "Route", l: throttle.Route(func(string) throttle.Limiter { return tb })},
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	var nilCtx context.Context
	longKey := strings.Repeat("k", throttle.MaxKeyLen+1)

	tests := []struct {
		name     string
		giveCtx  context.Context
		giveKey  string
		giveN    int
		wantIs   error
		wantErrs []string
	}{
		{name: "n zero", giveCtx: context.Background(), giveKey: "k", giveN: 0, wantErrs: []string{"throttle: ", "n ", "0"}},
		{name: "n negative", giveCtx: context.Background(), giveKey: "k", giveN: -1, wantErrs: []string{"throttle: ", "n ", "-1"}},
		{name: "n beyond capacity", giveCtx: context.Background(), giveKey: "k", giveN: 6, wantIs: throttle.ErrExceedsCapacity, wantErrs: []string{"6"}},
		{name: "key too long", giveCtx: context.Background(), giveKey: longKey, giveN: 1, wantErrs: []string{"throttle: ", "1025", "MaxKeyLen"}},
		{name: "nil context", giveCtx: nilCtx, giveKey: "k", giveN: 1, wantErrs: []string{"throttle: ", "nil context"}},
		{name: "cancelled context", giveCtx: cancelled, giveKey: "k", giveN: 1, wantIs: context.Canceled},
	}
	for _, lt := range limiters {
		for _, tt := range tests {
			t.Run(lt.name+"/"+tt.name, func(t *testing.T) {
				check := func(err error) {
					t.Helper()
					require.Error(t, err)
					if tt.wantIs != nil {
						assert.ErrorIs(t, err, tt.wantIs)
					}
					for _, want := range tt.wantErrs {
						assert.Contains(t, err.Error(), want)
					}
				}
				r, err := lt.l.Reserve(tt.giveCtx, tt.giveKey, tt.giveN, -1)
				assert.Nil(t, r)
				check(err)
				_, err = throttle.Allow(tt.giveCtx, lt.l, tt.giveKey, tt.giveN)
				check(err)
				check(throttle.Wait(tt.giveCtx, lt.l, tt.giveKey, tt.giveN))
			})
		}
	}
}

func TestPauseRejectsBadInput(t *testing.T) {
	tb := newTokenBucket(t, throttle.PerSecond(10), 5)
	var nilCtx context.Context
	assert.ErrorContains(t, tb.Pause(nilCtx, "k", time.Second), "nil context")
	assert.ErrorContains(t, tb.Pause(context.Background(), strings.Repeat("k", throttle.MaxKeyLen+1), time.Second), "MaxKeyLen")
	assert.NoError(t, tb.Pause(context.Background(), strings.Repeat("k", throttle.MaxKeyLen), time.Second))
}

func TestReservationRejectsNilContext(t *testing.T) {
	tb := newTokenBucket(t, throttle.PerSecond(10), 5)
	r := reserve(t, tb, 1, 0)
	var nilCtx context.Context
	assert.ErrorContains(t, r.Wait(nilCtx), "nil context")
	assert.ErrorContains(t, r.Cancel(nilCtx), "nil context")
}

// TestNoRefusalWithinMaxWait checks every limiter under random load: a
// refused call, made again at once with its maxWait raised by the
// refusal's Delay, succeeds. So nothing refuses a caller whose slot lies
// within its maxWait.
func TestNoRefusalWithinMaxWait(t *testing.T) {
	builds := []struct {
		name  string
		build func(now func() time.Time) (throttle.Limiter, error)
	}{
		{name: "TokenBucket", build: func(now func() time.Time) (throttle.Limiter, error) {
			return throttle.NewTokenBucket(throttle.PerSecond(10), 3, throttle.WithClock(now))
		}},
		{name: "LeakyBucket", build: func(now func() time.Time) (throttle.Limiter, error) {
			return throttle.NewLeakyBucket(throttle.PerSecond(10), 2, throttle.WithClock(now))
		}},
		{name: "SlidingWindow", build: func(now func() time.Time) (throttle.Limiter, error) {
			return throttle.NewSlidingWindow(5, time.Second, throttle.WithClock(now))
		}},
		{name: "SlidingWindowCounter", build: func(now func() time.Time) (throttle.Limiter, error) {
			return throttle.NewSlidingWindowCounter(5, time.Second, throttle.WithClock(now))
		}},
		{name: "FixedWindow", build: func(now func() time.Time) (throttle.Limiter, error) {
			return throttle.NewFixedWindow(5, time.Second, throttle.WithClock(now), throttle.WithTolerance(100*time.Millisecond))
		}},
	}
	for _, tt := range builds {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			l, err := tt.build(clk.Now)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(3, 4))
			ctx := context.Background()
			refusals := 0
			for range 2000 {
				switch rng.IntN(10) {
				case 0:
					require.NoError(t, l.(throttle.Pauser).Pause(ctx, "k", time.Duration(rng.Int64N(int64(time.Second)))))
				case 1, 2:
					clk.Advance(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
				default:
					n := 1 + rng.IntN(2)
					maxWait := time.Duration(rng.Int64N(int64(2 * time.Second)))
					r, err := l.Reserve(ctx, "k", n, maxWait)
					require.NoError(t, err)
					if r.OK {
						assert.LessOrEqual(t, r.Delay, maxWait)
						continue
					}
					refusals++
					require.Positive(t, r.Delay)
					again, err := l.Reserve(ctx, "k", n, maxWait+r.Delay)
					require.NoError(t, err)
					assert.True(t, again.OK, "refused with Delay %v under maxWait %v, then refused again", r.Delay, maxWait)
				}
			}
			assert.Positive(t, refusals, "the test reached the limit")
		})
	}
}

func TestReserveAfterExtremes(t *testing.T) {
	tests := []struct {
		name      string
		giveAfter time.Duration
		wantDelay time.Duration
	}{
		{name: "negative is now", giveAfter: -time.Hour, wantDelay: 0},
		{name: "ordinary", giveAfter: 3 * time.Second, wantDelay: 3 * time.Second},
		{name: "huge stays far", giveAfter: math.MaxInt64, wantDelay: math.MaxInt64 / 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			tb := newTokenBucket(t, throttle.PerSecond(10), 1, throttle.WithClock(clk.Now))
			fw := newFixedWindow(t, 5, time.Second, throttle.WithClock(clk.Now))
			for _, d := range []throttle.Deferrer{tb, throttle.All(fw).(throttle.Deferrer)} {
				r, err := d.ReserveAfter(context.Background(), "k", 1, tt.giveAfter, -1)
				require.NoError(t, err)
				require.True(t, r.OK)
				assert.Equal(t, tt.wantDelay, r.Delay)
			}
		})
	}
}

// TestBookingFarAheadIsAnError: callers with no max wait can push a key's
// schedule ever further ahead; past some 73 years a booking is
// an error, not a slot past int64 nanoseconds, which wrapped and went at
// once (a bucket of one unit per 30 years, the eleventh booking; an
// Adaptive booked 2^40 units, the next one: their spacing is now bounded).
func TestBookingFarAheadIsAnError(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := throttle.WithClock(func() time.Time { return now })
	ctx := context.Background()
	tb, err := throttle.NewTokenBucket(throttle.Rate{N: 1, Per: 10 * 365 * 24 * time.Hour}, 1, clock)
	require.NoError(t, err)
	prev := time.Duration(-1)
	for i := 0; ; i++ {
		r, err := tb.Reserve(ctx, "k", 1, -1)
		if err != nil {
			assert.ErrorContains(t, err, `key "k" is booked more than`)
			assert.Equal(t, 8, i, "seven decades booked, the ninth is past 73 years")
			break
		}
		require.True(t, r.OK)
		assert.Greater(t, r.Delay, prev, "booking %d", i)
		prev = r.Delay
	}
	a, err := throttle.NewAdaptive(throttle.PerSecond(1), clock)
	require.NoError(t, err)
	_, err = a.Reserve(ctx, "k", 1<<40, -1)
	require.NoError(t, err)
	r, err := a.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	assert.Greater(t, r.Delay, 36*365*24*time.Hour, "2^40 units' spacing, bounded at some 36 years: not at once")
}
