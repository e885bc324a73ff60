package redislimit

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// TestSettleAtClose: Close sends the settles queued before it, even when
// a failure a moment ago left the circuit breaker open, and a Settle
// after Close says it was not sent instead of queuing it for nobody.
func TestSettleAtClose(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	c := newClock(time.Hour)
	cl, err := NewClient(rdb, c.option())
	require.NoError(t, err)
	cl.settles.after = func(time.Duration, func()) {} // only Close sends them
	l, err := NewTokenBucket(rdb, throttle.PerSecond(10), 10, WithClient(cl))
	require.NoError(t, err)

	r := reserve(t, l, "k", 6, 0)
	require.True(t, r.OK)
	late := reserve(t, l, "late", 6, 0)
	require.True(t, late.OK)
	require.NoError(t, r.Settle(ctx, 1))
	// A blip, over: the breaker is open, and the frozen clock keeps it
	// from letting a probe through on its own.
	cl.breaker.failed(errors.New("a blip"))
	assert.NoError(t, cl.Close())

	err = late.Settle(ctx, 1)
	assert.ErrorIs(t, err, ErrClosed)

	fresh, err := NewTokenBucket(rdb, throttle.PerSecond(10), 10, c.option())
	require.NoError(t, err)
	defer fresh.Close()
	tests := []struct {
		giveKey       string
		wantRemaining int
	}{
		{giveKey: "k", wantRemaining: 9},    // settled at Close: 5 given back
		{giveKey: "late", wantRemaining: 4}, // settled after Close: nothing sent
	}
	for _, tt := range tests {
		st, err := fresh.Inspect(ctx, tt.giveKey)
		require.NoError(t, err)
		assert.Equal(t, tt.wantRemaining, st.Remaining, tt.giveKey)
	}
}

// TestSettleRacingClose: a Settle that races Close is either sent by
// Close or refused with ErrClosed, never queued for nobody.
func TestSettleRacingClose(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	c := newClock(time.Hour)
	fresh, err := NewTokenBucket(rdb, throttle.PerSecond(10), 10, c.option())
	require.NoError(t, err)
	defer fresh.Close()
	for i := range 20 {
		cl, err := NewClient(rdb, c.option())
		require.NoError(t, err)
		cl.settles.after = func(time.Duration, func()) {}
		l, err := NewTokenBucket(rdb, throttle.PerSecond(10), 10, WithClient(cl))
		require.NoError(t, err)
		key := "k" + strconv.Itoa(i)
		r := reserve(t, l, key, 6, 0)
		require.True(t, r.OK)
		settled := make(chan error, 1)
		go func() { settled <- r.Settle(ctx, 1) }()
		require.NoError(t, cl.Close())
		err = <-settled
		want := 9 // sent by Close: 5 given back
		if err != nil {
			assert.ErrorIs(t, err, ErrClosed)
			want = 4
		}
		st, err := fresh.Inspect(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, want, st.Remaining, key)
	}
}
