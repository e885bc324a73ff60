package redislimit

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

func TestCancel(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	tests := []struct {
		name        string
		giveLimit   func(c *clock) (Part, error)
		giveN       int           // reservations to make
		giveAdvance time.Duration // time passing before the cancels
		giveOrder   []int         // which to cancel, in order
		giveTwice   bool          // resend each cancel, as go-redis may
		wantNext    time.Duration // Delay of the next reservation
	}{
		{name: "latest gives back all", giveN: 3, giveOrder: []int{2}, wantNext: 200 * ms},
		{name: "earlier gives back nothing", giveN: 3, giveOrder: []int{1}, wantNext: 300 * ms},
		{name: "latest then earlier gives back both", giveN: 3, giveOrder: []int{2, 1}, wantNext: 100 * ms},
		{name: "resent cancel gives back once", giveN: 3, giveOrder: []int{2}, giveTwice: true, wantNext: 200 * ms},
		{name: "resent cancels in a row give back each once", giveN: 3, giveOrder: []int{2, 1}, giveTwice: true, wantNext: 100 * ms},
		{name: "due slot gives back all", giveN: 1, giveOrder: []int{0}, wantNext: 0},
		{name: "passed slot gives back nothing", giveN: 1, giveAdvance: ms, giveOrder: []int{0}, wantNext: 99 * ms},
		{
			name: "sliding log gives back any future units", giveN: 3, giveOrder: []int{1}, wantNext: time.Second,
			giveLimit: func(c *clock) (Part, error) { return NewSlidingWindow(rdb, 2, time.Second, c.option()) },
		},
		{
			name: "fixed window resent cancel gives back once", giveN: 3, giveOrder: []int{2}, giveTwice: true, wantNext: 59 * time.Second,
			giveLimit: func(c *clock) (Part, error) { return NewFixedWindow(rdb, 2, time.Minute, c.option()) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock(time.Second)
			newLimit := tt.giveLimit
			if newLimit == nil {
				newLimit = func(c *clock) (Part, error) {
					return NewTokenBucket(rdb, throttle.PerSecond(10), 1, c.option())
				}
			}
			p, err := newLimit(c)
			require.NoError(t, err)
			l := p.part()
			closeAll(t, l)
			var bs []*booking
			for range tt.giveN {
				bs = append(bs, book(t, l, t.Name(), 1))
			}
			c.advance(tt.giveAdvance)
			for _, i := range tt.giveOrder {
				require.NoError(t, bs[i].Cancel(ctx))
				if tt.giveTwice {
					require.NoError(t, bs[i].Cancel(ctx))
				}
			}
			next := reserve(t, l, t.Name(), 1, -1)
			require.True(t, next.OK)
			assert.Equal(t, tt.wantNext, next.Delay)
		})
	}
}

// TestPause: a pause moves the pauser's sleepers from its reply and
// another process's through pub/sub, for any key: one drawn from an
// Authorization header has a space (pub/sub messages once split on it,
// and the other process's sleepers kept their slots).
func TestPause(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	for _, key := range []string{"pause", "Bearer sk-1 pause", "100% pause=a:1"} {
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			testPause(t, s, key)
		})
	}
}

func testPause(t *testing.T, s *server, key string) {
	rdb := s.client(t)
	other := s.client(t) // another connection and Client: another process
	ctx := context.Background()
	c := newClock(0)
	a, err := NewTokenBucket(rdb, throttle.PerSecond(10), 1, c.option())
	require.NoError(t, err)
	b, err := NewTokenBucket(other, throttle.PerSecond(10), 1, c.option())
	require.NoError(t, err)
	closeAll(t, a, b)

	reserve(t, a, key, 1, -1) // now
	mine := book(t, a, key, 1)
	theirs := book(t, b, key, 1)
	assert.Equal(t, 100*ms, mine.Until())
	assert.Equal(t, 200*ms, theirs.Until())

	require.NoError(t, a.Pause(ctx, key, time.Second))
	// The pauser learns from the reply; the other process through pub/sub.
	assert.Equal(t, 1100*ms, mine.Until())
	require.Eventually(t, func() bool { return theirs.Until() > time.Second }, 5*time.Second, 5*ms)
	assert.Equal(t, 1200*ms, theirs.Until())

	next := reserve(t, b, key, 1, -1)
	assert.Equal(t, 1300*ms, next.Delay, "new bookings queue after the shifted ones")

	// A pause that ends before the current one changes nothing.
	require.NoError(t, b.Pause(ctx, key, 500*ms))
	assert.Equal(t, 1100*ms, mine.Until())
	after := reserve(t, a, key, 1, -1)
	assert.Equal(t, 1400*ms, after.Delay)

	// Once the pause is over, sending resumes at the rate.
	c.advance(1500 * ms)
	resumed := reserve(t, a, key, 1, 0)
	assert.True(t, resumed.OK)
	refused := reserve(t, a, key, 1, 0)
	assert.False(t, refused.OK)
	assert.Equal(t, 100*ms, refused.Delay)
}

// TestPauseExtremes pauses by the smallest and largest durations: a
// huge pause is clamped as in process, never overflows into no pause.
func TestPauseExtremes(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	ctx := context.Background()
	tests := []struct {
		name       string
		give       time.Duration
		wantPaused time.Duration
	}{
		{"zero", 0, 0},
		{"one nanosecond", time.Nanosecond, time.Microsecond},
		{"an hour", time.Hour, time.Hour},
		{"clamped", maxPause + time.Hour, maxPause.Truncate(time.Microsecond) + time.Microsecond},
		{"MaxInt64", math.MaxInt64, maxPause.Truncate(time.Microsecond) + time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock(0)
			l, err := NewTokenBucket(rdb, throttle.PerSecond(10), 1, c.option())
			require.NoError(t, err)
			closeAll(t, l)
			require.NoError(t, l.Pause(ctx, t.Name(), tt.give))
			st, err := l.Inspect(ctx, t.Name())
			require.NoError(t, err)
			assert.Equal(t, tt.wantPaused, st.Paused)
			r := reserve(t, l, t.Name(), 1, -1)
			assert.Equal(t, tt.wantPaused, r.Delay)
		})
	}
}

func TestPauseReachesOtherLimitersOnTheKey(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	c := newClock(time.Second)
	bucket, err := NewTokenBucket(rdb, throttle.PerSecond(10), 1, c.option())
	require.NoError(t, err)
	window, err := NewFixedWindow(rdb, 100, time.Minute, c.option())
	require.NoError(t, err)
	closeAll(t, bucket, window)

	require.NoError(t, bucket.Pause(ctx, "k", 500*ms))
	r := reserve(t, window, "k", 1, -1)
	assert.Equal(t, 500*ms, r.Delay)
}

func TestAllIsAtomic(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	c := newClock(time.Hour)
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
	assert.Equal(t, 22*time.Hour, refused.Delay, "until the slot is within maxWait")

	// The per-second part was left untouched by the refusal.
	r := reserve(t, perSecond, "k", 1, 0)
	require.True(t, r.OK)
	assert.Equal(t, 20-5-1, r.Remaining)

	// Booked together, both parts get the day's next slot.
	tomorrow := reserve(t, both, "k", 1, -1)
	require.True(t, tomorrow.OK)
	assert.Equal(t, 23*time.Hour, tomorrow.Delay)
}

// TestReserveAfter books no earlier than the given delay from the
// server's now, and counts it against maxWait.
func TestReserveAfter(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	ctx := context.Background()
	tests := []struct {
		name        string
		giveAfter   time.Duration
		giveMaxWait time.Duration
		wantOK      bool
		wantDelay   time.Duration
	}{
		{"no delay", 0, 0, true, 0},
		{"negative is none", -time.Second, 0, true, 0},
		{"later", 250 * ms, -1, true, 250 * ms},
		{"within maxWait", 250 * ms, 250 * ms, true, 250 * ms},
		{"past maxWait", 250 * ms, 200 * ms, false, 50 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock(0)
			l, err := NewTokenBucket(rdb, throttle.PerSecond(10), 5, c.option())
			require.NoError(t, err)
			closeAll(t, l)
			r, err := l.ReserveAfter(ctx, t.Name(), 1, tt.giveAfter, tt.giveMaxWait)
			require.NoError(t, err)
			assert.Equal(t, tt.wantOK, r.OK)
			assert.Equal(t, tt.wantDelay, r.Delay)
		})
	}
}

// TestInspect reads a budget without taking from it.
func TestInspect(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	ctx := context.Background()
	c := newClock(time.Second)
	tb, err := NewTokenBucket(rdb, throttle.PerSecond(10), 2, c.option())
	require.NoError(t, err)
	fw, err := NewFixedWindow(rdb, 3, time.Minute, c.option())
	require.NoError(t, err)
	sl, err := NewSlidingWindow(rdb, 2, time.Second, c.option())
	require.NoError(t, err)
	closeAll(t, tb, fw, sl)
	tests := []struct {
		name    string
		give    *budget
		giveN   int // units reserved first, one at a time
		giveKey string
		want    throttle.KeyState
	}{
		{"fresh bucket", tb.budget, 0, "a", throttle.KeyState{Remaining: 2}},
		{"bucket in use", tb.budget, 1, "b", throttle.KeyState{Remaining: 1, Ahead: 1}},
		{"bucket booked ahead", tb.budget, 4, "c", throttle.KeyState{Remaining: 0, Next: 300 * ms, Ahead: 4}},
		{"window full", fw.budget, 3, "d", throttle.KeyState{Remaining: 0, Next: 59 * time.Second}},
		{"window booked ahead", fw.budget, 5, "e", throttle.KeyState{Remaining: 0, Next: 59 * time.Second, Ahead: 2}},
		{"log booked ahead", sl.budget, 3, "f", throttle.KeyState{Remaining: 0, Next: 1000 * ms, Ahead: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range tt.giveN {
				reserve(t, tt.give, tt.giveKey, 1, -1)
			}
			got, err := tt.give.Inspect(ctx, tt.giveKey)
			require.NoError(t, err)
			tt.want.Key = tt.giveKey
			assert.Equal(t, tt.want, got)
			again, err := tt.give.Inspect(ctx, tt.giveKey)
			require.NoError(t, err)
			assert.Equal(t, got, again, "Inspect takes nothing")
		})
	}
}

// TestKeys runs on the server's own time, since keys expire in real
// time: every key of a budget shares the hash tag, and expires no sooner
// than it returns to fresh and not much later.
func TestKeys(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	client, err := NewClient(rdb, WithPrefix("p:"))
	require.NoError(t, err)
	closeAll(t, client)
	tb, err := NewTokenBucket(rdb, throttle.PerMinute(1), 1, WithClient(client))
	require.NoError(t, err)
	lb, err := NewLeakyBucket(rdb, throttle.PerMinute(1), 1, WithClient(client))
	require.NoError(t, err)
	sl, err := NewSlidingWindow(rdb, 5, time.Minute, WithClient(client))
	require.NoError(t, err)
	swc, err := NewSlidingWindowCounter(rdb, 5, time.Minute, WithClient(client))
	require.NoError(t, err)
	fw, err := NewFixedWindow(rdb, 5, time.Minute, WithClient(client), WithWindowOffset(time.Second))
	require.NoError(t, err)
	every, err := All(tb, lb, sl, swc, fw)
	require.NoError(t, err)

	reserve(t, every, "api", 1, -1)
	require.NoError(t, every.Pause(ctx, "api", 5*time.Second))
	want := []string{"p:{api}:fw:5/min+1s", "p:{api}:lb:1/min", "p:{api}:pause", "p:{api}:sl:5/min", "p:{api}:swc:5/min", "p:{api}:tb:1/min"}
	got, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, want, got)
	// The bucket is full again a minute after its unit, the log once its
	// unit leaves the window, the windows after the next one; the pause
	// moved them all 5 s later, and its own state outlives them by 1 s.
	for _, k := range got {
		ttl, err := rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, 30*time.Second, k)
		assert.LessOrEqual(t, ttl, 2*time.Minute+7*time.Second, k)
	}
}

func TestClientIsShared(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	client, err := NewClient(rdb)
	require.NoError(t, err)
	a, err := NewTokenBucket(rdb, throttle.PerSecond(10), 1, WithClient(client))
	require.NoError(t, err)
	b, err := NewFixedWindow(rdb, 10, time.Minute, WithClient(client))
	require.NoError(t, err)
	assert.Same(t, a.client, b.client)

	require.NoError(t, a.Close())
	_, err = b.Reserve(ctx, "k", 1, 0)
	assert.NoError(t, err, "closing a limiter leaves a shared Client open")
	subs, err := rdb.PubSubNumSub(ctx, DefaultPrefix+channelSuffix).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), subs[DefaultPrefix+channelSuffix], "one subscription per Client")

	require.NoError(t, client.Close())
	require.NoError(t, client.Close(), "Close is idempotent")
	_, err = b.Reserve(ctx, "k", 1, 0)
	assert.ErrorIs(t, err, ErrClosed)
}

func TestBadConfig(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	other := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer other.Close()
	client, err := NewClient(rdb)
	require.NoError(t, err)
	defer client.Close()
	tests := []struct {
		name     string
		give     func() error
		wantText string
	}{
		{"prefix with {", func() error { _, err := NewTokenBucket(rdb, throttle.PerSecond(1), 1, WithPrefix("a{")); return err }, "WithPrefix"},
		{"prefix with }", func() error { _, err := NewFixedWindow(rdb, 1, time.Second, WithPrefix("a}")); return err }, "WithPrefix"},
		{"long prefix", func() error {
			_, err := NewSlidingWindow(rdb, 1, time.Second, WithPrefix(string(make([]byte, MaxPrefixLen+1))))
			return err
		}, "MaxPrefixLen"},
		{"burst 0", func() error { _, err := NewTokenBucket(rdb, throttle.PerSecond(1), 0); return err }, "burst"},
		{"negative capacity", func() error { _, err := NewLeakyBucket(rdb, throttle.PerSecond(1), -1); return err }, "capacity"},
		{"limit 0", func() error { _, err := NewSlidingWindowCounter(rdb, 0, time.Second); return err }, "limit"},
		// The scripts count in doubles: Remaining came back as MinInt64.
		{"limit above 2^53", func() error { _, err := NewFixedWindow(rdb, math.MaxInt, time.Hour); return err }, "limit 9223372036854775807 is above 2^53"},
		{"zero window", func() error { _, err := NewSlidingWindow(rdb, 1, 0); return err }, "window"},
		{"tolerance past window", func() error { _, err := NewFixedWindow(rdb, 1, time.Second, WithTolerance(time.Second)); return err }, "WithTolerance"},
		{"negative tolerance", func() error { _, err := NewTokenBucket(rdb, throttle.PerSecond(1), 1, WithTolerance(-1)); return err }, "WithTolerance"},
		{"zero timeout", func() error { _, err := NewTokenBucket(rdb, throttle.PerSecond(1), 1, WithTimeout(0)); return err }, "WithTimeout"},
		{"bad rate", func() error { _, err := NewTokenBucket(rdb, throttle.Rate{}, 1); return err }, "throttle"},
		{"client option beside WithClient", func() error {
			_, err := NewTokenBucket(rdb, throttle.PerSecond(1), 1, WithClient(client), WithPrefix("x:"))
			return err
		}, "WithPrefix"},
		{"WithClient on another client", func() error {
			_, err := NewTokenBucket(other, throttle.PerSecond(1), 1, WithClient(client))
			return err
		}, "another redis client"},
		{"limiter option to NewClient", func() error { _, err := NewClient(rdb, WithTolerance(ms)); return err }, "WithTolerance"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantText)
		})
	}
}

func TestProgrammerErrorsPanic(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give func()
	}{
		{"nil option", func() { _, _ = NewTokenBucket(fakeScripter{}, throttle.PerSecond(1), 1, nil) }},
		{"nil scripter", func() { _, _ = NewTokenBucket(nil, throttle.PerSecond(1), 1) }},
		{"nil observer", func() { WithObserver(nil) }},
		{"nil client", func() { WithClient(nil) }},
		{"nil policy", func() { WithFailurePolicy(nil) }},
		{"nil fallback", func() { Fallback(nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Panics(t, tt.give)
		})
	}
}

func TestBadRequest(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// TestBookingFarAheadIsAnError: past about 73 years ahead, as in process,
// a booking is an error: the script's slots are doubles, and the delay
// in nanoseconds came back negative (a bucket of one unit per 30 years,
// the eleventh booking; an Adaptive booked 2^40 units, the next one).
func TestBookingFarAheadIsAnError(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	ctx := context.Background()
	tb, err := NewTokenBucket(s.client(t), throttle.Rate{N: 1, Per: 10 * 365 * 24 * time.Hour}, 1, c.option())
	require.NoError(t, err)
	closeAll(t, tb)
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
	a := newAdaptive(t, s, c)
	_, err = a.Reserve(ctx, "k", 1<<40, -1)
	require.NoError(t, err)
	_, err = a.Reserve(ctx, "k", 1, -1)
	assert.ErrorContains(t, err, `key "k" is booked more than`)
}

// TestOneRateWrittenTwoWaysIsOneBudget: a bucket's key is named by its
// rate as a whole count per second, minute or hour, so that PerMinute(600)
// and PerSecond(10) are one budget. Named as written ("600/min" and
// "10/s"), a fleet that changed one for the other in a rolling deploy
// paced two buckets at once: twice the rate. A window's key keeps its
// window: 600 a minute is not 10 a second.
func TestOneRateWrittenTwoWaysIsOneBudget(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	rdb := s.client(t)
	ctx := context.Background()
	perMinute, err := NewTokenBucket(rdb, throttle.PerMinute(600), 1, c.option())
	require.NoError(t, err)
	perSecond, err := NewTokenBucket(rdb, throttle.PerSecond(10), 1, c.option())
	require.NoError(t, err)
	thirds, err := NewTokenBucket(rdb, throttle.Rate{N: 1, Per: 3 * time.Second}, 1, c.option())
	require.NoError(t, err)
	closeAll(t, perMinute, perSecond, thirds)

	assert.Zero(t, reserve(t, perMinute, "api", 1, -1).Delay)
	assert.Equal(t, 100*time.Millisecond, reserve(t, perSecond, "api", 1, -1).Delay, "the unit the other took counts")
	reserve(t, thirds, "api", 1, -1)
	got, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"egress:{api}:tb:10/s", "egress:{api}:tb:20/min"}, got)

	a, err := NewAdaptive(rdb, throttle.PerMinute(60_000), c.option())
	require.NoError(t, err)
	closeAll(t, a)
	reserve(t, a, "learned", 1, -1)
	n, err := rdb.Exists(ctx, "egress:{learned}:"+adaptiveSuffix+":1000/s").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
}
