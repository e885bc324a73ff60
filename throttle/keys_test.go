package throttle_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

func TestMaxKeysRefusesWhenAllLive(t *testing.T) {
	clk := newManualClock()
	tb := newTokenBucket(t, throttle.PerSecond(1), 2, throttle.WithClock(clk.Now), throttle.WithMaxKeys(2))
	ctx := context.Background()

	for _, key := range []string{"a", "b"} {
		ok, err := throttle.Allow(ctx, tb, key, 1)
		require.NoError(t, err)
		require.True(t, ok)
	}
	_, err := tb.Reserve(ctx, "c", 1, 0)
	require.ErrorIs(t, err, throttle.ErrTooManyKeys)
	assert.Contains(t, err.Error(), "2")
	_, err = throttle.Allow(ctx, tb, "c", 1)
	assert.ErrorIs(t, err, throttle.ErrTooManyKeys)
	assert.ErrorIs(t, tb.Pause(ctx, "c", time.Second), throttle.ErrTooManyKeys)

	ok, err := throttle.Allow(ctx, tb, "a", 1)
	require.NoError(t, err)
	assert.True(t, ok, "tracked keys still work")

	clk.Advance(time.Second)
	ok, err = throttle.Allow(ctx, tb, "c", 1)
	require.NoError(t, err)
	assert.True(t, ok, "b is full again and was dropped to make room")
}

func TestMaxKeysKeepsPausedKeys(t *testing.T) {
	clk := newManualClock()
	tb := newTokenBucket(t, throttle.PerSecond(1), 2, throttle.WithClock(clk.Now), throttle.WithMaxKeys(1))
	ctx := context.Background()
	require.NoError(t, tb.Pause(ctx, "a", time.Minute))

	_, err := tb.Reserve(ctx, "b", 1, 0)
	require.ErrorIs(t, err, throttle.ErrTooManyKeys, "a paused key is live")
	clk.Advance(time.Minute)
	reserveKey(t, tb, "b")
}

// TestFullLimiterSweepsSparingly checks the key-flood rule: once a sweep
// found no room, new keys are refused without another sweep until a
// second has passed (or many keys were added); meanwhile a new key looks
// at a few tracked keys only, and takes the place of one that has turned
// fresh (WithMaxKeys: a fresh key is dropped when room is needed).
func TestFullLimiterSweepsSparingly(t *testing.T) {
	clk := newManualClock()
	tb := newTokenBucket(t, throttle.PerSecond(10), 1, throttle.WithClock(clk.Now), throttle.WithMaxKeys(2))
	ctx := context.Background()
	reserveKey(t, tb, "a")
	reserveKey(t, tb, "b")
	_, err := tb.Reserve(ctx, "c", 1, 0)
	require.ErrorIs(t, err, throttle.ErrTooManyKeys, "swept, and nothing was fresh")

	clk.Advance(50 * time.Millisecond) // a and b are still live
	_, err = tb.Reserve(ctx, "c", 1, 0)
	require.ErrorIs(t, err, throttle.ErrTooManyKeys, "no second sweep within the second, and nothing fresh")

	clk.Advance(450 * time.Millisecond) // a and b are fresh again
	reserveKey(t, tb, "c")
	reserveKey(t, tb, "d")
	_, err = tb.Reserve(ctx, "e", 1, 0)
	require.ErrorIs(t, err, throttle.ErrTooManyKeys, "c and d are live")
}

func reserveKey(t *testing.T, l throttle.Limiter, key string) {
	t.Helper()
	r, err := l.Reserve(context.Background(), key, 1, 0)
	require.NoError(t, err)
	require.True(t, r.OK)
}

// TestFreshKeysDropLosslessly runs the same calls against a limiter that
// keeps every key and one that must keep dropping them: every answer is
// the same.
func TestFreshKeysDropLosslessly(t *testing.T) {
	tests := []struct {
		name   string
		giveL  func(opts ...throttle.Option) (throttle.Limiter, error)
		giveBy time.Duration
	}{
		{name: "TokenBucket", giveL: func(opts ...throttle.Option) (throttle.Limiter, error) {
			return throttle.NewTokenBucket(throttle.PerSecond(10), 3, opts...)
		}},
		{name: "LeakyBucket", giveL: func(opts ...throttle.Option) (throttle.Limiter, error) {
			return throttle.NewLeakyBucket(throttle.PerSecond(10), 3, opts...)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			roomy, err := tt.giveL(throttle.WithClock(clk.Now))
			require.NoError(t, err)
			tight, err := tt.giveL(throttle.WithClock(clk.Now), throttle.WithMaxKeys(3))
			require.NoError(t, err)
			ctx := context.Background()

			type answer struct {
				ok        bool
				delay     time.Duration
				remaining int
				err       error
			}
			ask := func(l throttle.Limiter, key string, n int) answer {
				r, err := l.Reserve(ctx, key, n, 250*time.Millisecond)
				if err != nil {
					return answer{err: err}
				}
				return answer{ok: r.OK, delay: r.Delay, remaining: r.Remaining}
			}
			for i := range 400 {
				key := "k" + strconv.Itoa(i*7%5)
				n := 1 + i%3
				want := ask(roomy, key, n)
				got := ask(tight, key, n)
				if got.err != nil {
					require.ErrorIs(t, got.err, throttle.ErrTooManyKeys)
					clk.Advance(time.Second) // everything is fresh again
					continue
				}
				require.Equal(t, want, got, "call %d on %s", i, key)
				clk.Advance(time.Duration(i%4) * 90 * time.Millisecond)
			}
		})
	}
}

// TestKeysCycling stresses dropping keys while others reserve on them.
// No key may ever admit more than its budget allows.
func TestKeysCycling(t *testing.T) {
	const (
		keys  = 16
		burst = 2
	)
	var ticks atomic.Int64 // the clock moves 1µs per reading
	now := func() time.Time { return epoch().Add(time.Duration(ticks.Add(1)) * time.Microsecond) }
	tb := newTokenBucket(t, throttle.PerSecond(1000), burst, throttle.WithClock(now), throttle.WithMaxKeys(4))

	var (
		mu       sync.Mutex
		admitted = map[string]int{}
		wg       sync.WaitGroup
	)
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				key := fmt.Sprint("key-", (g+i)%keys)
				ok, err := throttle.Allow(context.Background(), tb, key, 1)
				if err != nil {
					assert.ErrorIs(t, err, throttle.ErrTooManyKeys)
					continue
				}
				if ok {
					mu.Lock()
					admitted[key]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Duration(ticks.Load()) * time.Microsecond
	most := burst + int(elapsed/time.Millisecond)
	for key, n := range admitted {
		assert.LessOrEqual(t, n, most, key)
	}
	assert.NotEmpty(t, admitted)
}

func TestClockSteppingBackwards(t *testing.T) {
	clk := newManualClock()
	tb := newTokenBucket(t, throttle.PerSecond(1), 1, throttle.WithClock(clk.Now))
	ctx := context.Background()
	t2 := epoch().Add(10 * time.Second)
	t1 := t2.Add(-5 * time.Second)

	clk.Set(t2)
	ok, err := throttle.Allow(ctx, tb, "k", 1)
	require.NoError(t, err)
	require.True(t, ok)

	clk.Set(t1) // a stale reading arrives after a newer one
	ok, err = throttle.Allow(ctx, tb, "k", 1)
	require.NoError(t, err)
	assert.False(t, ok, "going back mints nothing")
	r, err := tb.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	assert.Equal(t, time.Second, r.Delay, "measured from the newest reading, never from the stale one")

	clk.Set(t2.Add(500 * time.Millisecond))
	r, err = tb.Reserve(ctx, "k", 1, 0)
	require.NoError(t, err)
	assert.False(t, r.OK)
	assert.Equal(t, 1500*time.Millisecond, r.Delay, "the state never moved backwards")
}

func TestClockBeforeConstruction(t *testing.T) {
	clk := newManualClock()
	lb := newLeakyBucket(t, throttle.PerSecond(1), 0, throttle.WithClock(clk.Now))
	clk.Set(epoch().Add(-time.Hour))
	var delays []time.Duration
	for range 3 {
		r, err := lb.Reserve(context.Background(), "k", 1, -1)
		require.NoError(t, err)
		delays = append(delays, r.Delay)
	}
	assert.Equal(t, []time.Duration{0, time.Second, 2 * time.Second}, delays, "no negative delay, no extra units")
}

// WithMaxKeys says a fresh key is dropped when room is needed, and that
// a new key fails with ErrTooManyKeys only when every tracked key is live.
// But a full limiter sweeps for fresh keys at most once a second: a key
// that turns fresh just after a sweep keeps its place, and a new key is
// refused ("all 2 tracked keys hold live state") although neither is.
func TestMaxKeysDropsKeysThatTurnedFreshSinceTheLastSweep(t *testing.T) {
	ctx := context.Background()
	clk := newManualClock()
	tb, err := throttle.NewTokenBucket(throttle.PerSecond(10), 1, throttle.WithClock(clk.Now), throttle.WithMaxKeys(2))
	require.NoError(t, err)
	for _, k := range []string{"a", "b"} {
		r, err := tb.Reserve(ctx, k, 1, 0)
		require.NoError(t, err)
		require.True(t, r.OK)
	}
	_, err = tb.Reserve(ctx, "c", 1, 0)
	require.ErrorIs(t, err, throttle.ErrTooManyKeys, "a and b are live: c is refused")

	clk.Advance(200 * time.Millisecond) // a and b are full again: fresh
	r, err := tb.Reserve(ctx, "c", 1, 0)
	require.NoError(t, err, "a and b hold nothing worth remembering any more")
	assert.True(t, r.OK)
}
