package throttle_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

func TestRouteKeepsTiersApart(t *testing.T) {
	clk := newManualClock()
	free := newTokenBucket(t, throttle.PerDay(100), 2, throttle.WithClock(clk.Now))
	pro := newTokenBucket(t, throttle.PerMinute(600), 10, throttle.WithClock(clk.Now))
	tiers := throttle.Route(func(key string) throttle.Limiter {
		if strings.HasPrefix(key, "pro:") {
			return pro
		}
		return free
	})
	ctx := context.Background()

	tests := []struct {
		giveKey string
		giveN   int
		want    bool
	}{
		{giveKey: "free:alice", giveN: 2, want: true},
		{giveKey: "free:alice", giveN: 1, want: false},
		{giveKey: "free:carol", giveN: 2, want: true},
		{giveKey: "pro:bob", giveN: 10, want: true},
		{giveKey: "pro:bob", giveN: 1, want: false},
		{giveKey: "pro:dave", giveN: 10, want: true},
	}
	for _, tt := range tests {
		ok, err := throttle.Allow(ctx, tiers, tt.giveKey, tt.giveN)
		require.NoError(t, err)
		assert.Equal(t, tt.want, ok, "%s takes %d", tt.giveKey, tt.giveN)
	}

	clk.Advance(100 * time.Millisecond)
	r, err := tiers.Reserve(ctx, "pro:bob", 1, 0)
	require.NoError(t, err)
	assert.True(t, r.OK, "pro refills at 10/s")
	r, err = tiers.Reserve(ctx, "free:alice", 1, 0)
	require.NoError(t, err)
	assert.False(t, r.OK, "free does not")
	assert.Equal(t, 864*time.Second-100*time.Millisecond, r.Delay)
}

func TestRoutePause(t *testing.T) {
	clk := newManualClock()
	tb := newTokenBucket(t, throttle.PerSecond(10), 1, throttle.WithClock(clk.Now))
	foreign := &fakeLimiter{}
	l := throttle.Route(func(key string) throttle.Limiter {
		if key == "foreign" {
			return foreign
		}
		return tb
	})
	p, ok := l.(throttle.Pauser)
	require.True(t, ok)
	require.NoError(t, p.Pause(context.Background(), "k", time.Minute))
	assert.NoError(t, p.Pause(context.Background(), "foreign", time.Minute), "a Limiter that cannot pause is left alone")
	assert.Equal(t, time.Minute, reserve(t, tb, 1, -1).Delay)
}

func TestRouteNilPickPanics(t *testing.T) {
	assert.Panics(t, func() { throttle.Route(nil) })
}

func TestRoutePickedNothing(t *testing.T) {
	l := throttle.Route(func(string) throttle.Limiter { return nil })
	ctx := context.Background()

	_, err := l.Reserve(ctx, "nobody", 1, 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"nobody"`)
	_, err = throttle.Allow(ctx, l, "nobody", 1)
	assert.Error(t, err)
	assert.Error(t, throttle.Wait(ctx, l, "nobody", 1))
	assert.Error(t, l.(throttle.Pauser).Pause(ctx, "nobody", time.Second))
	_, err = throttle.All(l).Reserve(ctx, "nobody", 1, 0)
	assert.Error(t, err)
}

// A nil pointer given as a Limiter is nil too: All panics at once with a
// message that names it, and a Route that picks one fails Reserve with
// an error. Before, both panicked on the first Reserve with a nil
// pointer dereference (found by a user's test).
func TestNilPointerLimiter(t *testing.T) {
	var none *throttle.TokenBucket
	some, err := throttle.NewTokenBucket(throttle.PerSecond(1), 1)
	require.NoError(t, err)
	assert.PanicsWithValue(t, "throttle: All given a nil Limiter (argument 1, *throttle.TokenBucket)", func() {
		throttle.All(some, none)
	})
	_, err = throttle.Route(func(string) throttle.Limiter { return none }).Reserve(context.Background(), "k", 1, 0)
	assert.EqualError(t, err, `throttle: Route picked no Limiter for key "k"`)
}
