package redislimit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

const ms = time.Millisecond

func TestCancel(t *testing.T) {
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	tests := []struct {
		name      string
		giveLimit func(c *clock) (*limiter, error)
		giveN     int           // reservations to make
		giveOrder []int         // which to cancel, in order
		giveTwice bool          // resend each cancel, as go-redis may
		wantNext  time.Duration // Delay of the next reservation
	}{
		{name: "latest gives back all", giveN: 3, giveOrder: []int{2}, wantNext: 200 * ms},
		{name: "earlier gives back nothing", giveN: 3, giveOrder: []int{1}, wantNext: 300 * ms},
		{name: "latest then earlier gives back both", giveN: 3, giveOrder: []int{2, 1}, wantNext: 100 * ms},
		{name: "resent cancel gives back once", giveN: 3, giveOrder: []int{2}, giveTwice: true, wantNext: 200 * ms},
		{name: "resent cancels in a row give back each once", giveN: 3, giveOrder: []int{2, 1}, giveTwice: true, wantNext: 100 * ms},
		{name: "passed slot gives back nothing", giveN: 1, giveOrder: []int{0}, wantNext: 100 * ms},
		{
			name: "sliding log gives back any future units", giveN: 3, giveOrder: []int{1}, wantNext: time.Second,
			giveLimit: func(c *clock) (*limiter, error) {
				l, err := NewSlidingWindow(rdb, 2, time.Second, c.option())
				if err != nil {
					return nil, err
				}
				return l.limiter, nil
			},
		},
		{
			name: "fixed window resent cancel gives back once", giveN: 3, giveOrder: []int{2}, giveTwice: true, wantNext: 59 * time.Second,
			giveLimit: func(c *clock) (*limiter, error) {
				l, err := NewFixedWindow(rdb, 2, time.Minute, c.option())
				if err != nil {
					return nil, err
				}
				return l.limiter, nil
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock(t, rdb, time.Minute, time.Second)
			newLimit := tt.giveLimit
			if newLimit == nil {
				newLimit = func(c *clock) (*limiter, error) {
					l, err := NewTokenBucket(rdb, throttle.PerSecond(10), 1, c.option())
					if err != nil {
						return nil, err
					}
					return l.limiter, nil
				}
			}
			l, err := newLimit(c)
			require.NoError(t, err)
			closeAll(t, l)
			var bs []*booking
			for range tt.giveN {
				_, b, err := l.book(ctx, t.Name(), 1, -1, true)
				require.NoError(t, err)
				require.NotNil(t, b)
				bs = append(bs, b)
			}
			for _, i := range tt.giveOrder {
				require.NoError(t, bs[i].Cancel(ctx))
				if tt.giveTwice {
					require.NoError(t, bs[i].Cancel(ctx))
				}
			}
			next := reserve(t, l, t.Name(), 1, -1)
			require.True(t, next.OK)
			assert.InDelta(t, tt.wantNext, next.Delay, float64(20*ms))
		})
	}
}

func TestPause(t *testing.T) {
	s := startRedis(t)
	rdb := s.client(t)
	other := s.client(t) // another connection, and another listener: another worker
	ctx := context.Background()
	c := newClock(t, rdb, 0, 0)
	a, err := NewTokenBucket(rdb, throttle.PerSecond(10), 1, c.option())
	require.NoError(t, err)
	b, err := NewTokenBucket(other, throttle.PerSecond(10), 1, c.option())
	require.NoError(t, err)
	closeAll(t, a, b)
	key := "pause"

	reserve(t, a, key, 1, -1) // now
	_, mine, err := a.book(ctx, key, 1, -1, true)
	require.NoError(t, err)
	_, theirs, err := b.book(ctx, key, 1, -1, true)
	require.NoError(t, err)
	assert.InDelta(t, 100*ms, mine.Until(), float64(20*ms))
	assert.InDelta(t, 200*ms, theirs.Until(), float64(20*ms))

	require.NoError(t, a.Pause(ctx, key, time.Second))
	// The pauser learns from the reply; the other worker through pub/sub.
	assert.InDelta(t, 1100*ms, mine.Until(), float64(30*ms))
	require.Eventually(t, func() bool { return theirs.Until() > time.Second }, time.Second, 5*ms)
	assert.InDelta(t, 1200*ms, theirs.Until(), float64(30*ms))

	next := reserve(t, b, key, 1, -1)
	assert.InDelta(t, 1300*ms, next.Delay, float64(30*ms), "new bookings queue after the shifted ones")

	// A pause that ends before the current one changes nothing.
	require.NoError(t, b.Pause(ctx, key, 500*ms))
	assert.InDelta(t, 1100*ms, mine.Until(), float64(30*ms))
	after := reserve(t, a, key, 1, -1)
	assert.InDelta(t, 1400*ms, after.Delay, float64(30*ms))

	// Once the pause is over, sending resumes at the rate.
	c.advance(2 * time.Second)
	resumed := reserve(t, a, key, 1, 0)
	assert.True(t, resumed.OK)
}

func TestPauseReachesOtherLimitersOnTheKey(t *testing.T) {
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	c := newClock(t, rdb, time.Minute, time.Second)
	bucket, err := NewTokenBucket(rdb, throttle.PerSecond(10), 1, c.option())
	require.NoError(t, err)
	window, err := NewFixedWindow(rdb, 100, time.Minute, c.option())
	require.NoError(t, err)
	closeAll(t, bucket, window)

	require.NoError(t, bucket.Pause(ctx, "k", 500*ms))
	r := reserve(t, window, "k", 1, -1)
	assert.InDelta(t, 500*ms, r.Delay, float64(20*ms))
}

func TestAllIsAtomic(t *testing.T) {
	s := startRedis(t)
	rdb := s.client(t)
	c := newClock(t, rdb, 24*time.Hour, time.Hour)
	perSecond, err := NewTokenBucket(rdb, throttle.PerSecond(20), 20, c.option())
	require.NoError(t, err)
	perDay, err := NewFixedWindow(rdb, 5, 24*time.Hour, c.option())
	require.NoError(t, err)
	closeAll(t, perSecond, perDay)
	both, err := All(perSecond, perDay)
	require.NoError(t, err)

	for i := range 5 {
		r := reserve(t, both, "k", 1, 0)
		require.True(t, r.OK, "reservation %d", i)
	}
	refused := reserve(t, both, "k", 1, time.Hour)
	assert.False(t, refused.OK, "the daily part is spent")
	assert.InDelta(t, 22*time.Hour, refused.Delay, float64(time.Second), "until the slot is within maxWait")

	// The per-second part was left untouched by the refusal.
	r := reserve(t, perSecond, "k", 1, 0)
	require.True(t, r.OK)
	assert.Equal(t, 20-5-1, r.Remaining)

	// Booked together, both parts get the day's next slot.
	tomorrow := reserve(t, both, "k", 1, -1)
	require.True(t, tomorrow.OK)
	assert.InDelta(t, 23*time.Hour, tomorrow.Delay, float64(time.Second))
}

func TestKeys(t *testing.T) {
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	tb, err := NewTokenBucket(rdb, throttle.PerSecond(100), 1, WithPrefix("p:"))
	require.NoError(t, err)
	lb, err := NewLeakyBucket(rdb, throttle.PerSecond(100), 1, WithPrefix("p:"))
	require.NoError(t, err)
	sl, err := NewSlidingWindow(rdb, 5, 100*ms, WithPrefix("p:"))
	require.NoError(t, err)
	swc, err := NewSlidingWindowCounter(rdb, 5, 100*ms, WithPrefix("p:"))
	require.NoError(t, err)
	fw, err := NewFixedWindow(rdb, 5, 100*ms, WithPrefix("p:"), WithWindowOffset(10*ms))
	require.NoError(t, err)
	closeAll(t, tb, lb, sl, swc, fw)
	every, err := All(tb, lb, sl, swc, fw)
	require.NoError(t, err)

	reserve(t, every, "api", 1, -1)
	require.NoError(t, every.Pause(ctx, "api", 50*ms))
	want := []string{"p:{api}:fw:5/100ms+10ms", "p:{api}:lb:100/s", "p:{api}:pause", "p:{api}:sl:5/100ms", "p:{api}:swc:5/100ms", "p:{api}:tb:100/s"}
	got, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, want, got)
	for _, k := range got {
		ttl, err := rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.Positive(t, ttl, k)
	}
	// Nothing outlives its return to fresh by much.
	require.Eventually(t, func() bool { return rdb.DBSize(ctx).Val() == 0 }, 3*time.Second, 20*ms)
}

func TestBadConfig(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	tests := []struct {
		name string
		give func() error
	}{
		{"prefix with {", func() error { _, err := NewTokenBucket(rdb, throttle.PerSecond(1), 1, WithPrefix("a{")); return err }},
		{"prefix with }", func() error { _, err := NewFixedWindow(rdb, 1, time.Second, WithPrefix("a}")); return err }},
		{"long prefix", func() error {
			_, err := NewSlidingWindow(rdb, 1, time.Second, WithPrefix(string(make([]byte, MaxPrefixLen+1))))
			return err
		}},
		{"burst 0", func() error { _, err := NewTokenBucket(rdb, throttle.PerSecond(1), 0); return err }},
		{"capacity 0", func() error { _, err := NewLeakyBucket(rdb, throttle.PerSecond(1), 0); return err }},
		{"limit 0", func() error { _, err := NewSlidingWindowCounter(rdb, 0, time.Second); return err }},
		{"zero window", func() error { _, err := NewSlidingWindow(rdb, 1, 0); return err }},
		{"tolerance past window", func() error { _, err := NewFixedWindow(rdb, 1, time.Second, WithTolerance(time.Second)); return err }},
		{"zero timeout", func() error { _, err := NewTokenBucket(rdb, throttle.PerSecond(1), 1, WithTimeout(0)); return err }},
		{"nil option", func() error { _, err := NewTokenBucket(rdb, throttle.PerSecond(1), 1, nil); return err }},
		{"bad rate", func() error { _, err := NewTokenBucket(rdb, throttle.Rate{}, 1); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Error(t, tt.give())
		})
	}
}

func TestBadRequest(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	l, err := NewTokenBucket(rdb, throttle.PerSecond(1), 2)
	require.NoError(t, err)
	defer l.Close()
	ctx := context.Background()
	tests := []struct {
		name    string
		giveKey string
		giveN   int
		wantIs  error
	}{
		{"empty key", "", 1, nil},
		{"key starting with }", "}x", 1, nil},
		{"zero units", "k", 0, nil},
		{"too many units", "k", 3, throttle.ErrExceedsCapacity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.Reserve(ctx, tt.giveKey, tt.giveN, 0)
			require.Error(t, err)
			if tt.wantIs != nil {
				assert.ErrorIs(t, err, tt.wantIs)
			}
		})
	}
	assert.Error(t, l.Pause(ctx, "k", -time.Second))
}

// fakeScripter answers every script with a fixed reply.
type fakeScripter struct {
	redis.Scripter
	reply any
	err   error
}

func (f fakeScripter) cmd(ctx context.Context) *redis.Cmd {
	return redis.NewCmdResult(f.reply, f.err)
}

func (f fakeScripter) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return f.cmd(ctx)
}

func (f fakeScripter) Eval(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return f.cmd(ctx)
}

func TestUnexpectedReplyIsAnError(t *testing.T) {
	tests := []struct {
		name      string
		giveReply any
		giveErr   error
	}{
		{name: "nil", giveReply: nil},
		{name: "string", giveReply: "allowed"},
		{name: "integer", giveReply: int64(1)},
		{name: "short array", giveReply: []any{int64(1), int64(0)}},
		{name: "string in array", giveReply: []any{"1", int64(0), int64(0), int64(0), int64(0), int64(0), "t"}},
		{name: "missing token", giveReply: []any{int64(1), int64(0), int64(0), int64(0), int64(0), int64(0)}},
		{name: "integer token", giveReply: []any{int64(1), int64(0), int64(0), int64(0), int64(0), int64(0), int64(7)}},
		{name: "script error", giveErr: errors.New("ERR something broke")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewTokenBucket(fakeScripter{reply: tt.giveReply, err: tt.giveErr}, throttle.PerSecond(1), 1, WithFailurePolicy(FailOpen))
			require.NoError(t, err)
			defer l.Close()
			r, err := l.Reserve(context.Background(), "k", 1, 0)
			assert.Error(t, err)
			assert.Nil(t, r)
			ok, err := l.AllowN(context.Background(), "k", 1)
			assert.Error(t, err)
			assert.False(t, ok)
		})
	}
}
