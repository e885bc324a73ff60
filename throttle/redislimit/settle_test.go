package redislimit

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// scriptCounter counts the script calls sent through a client, alone or
// in pipelines.
type scriptCounter struct{ n atomic.Int64 }

func (h *scriptCounter) count(cmds ...redis.Cmder) {
	for _, c := range cmds {
		if name := c.Name(); name == "evalsha" || name == "eval" {
			h.n.Add(1)
		}
	}
}

func (h *scriptCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(cmds...)
		return next(ctx, cmds)
	}
}

// timers holds the flushes a Client scheduled, for the test to fire.
type timers struct {
	mu    sync.Mutex
	delay []time.Duration
	fs    []func()
}

func (ts *timers) after(d time.Duration, f func()) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.delay, ts.fs = append(ts.delay, d), append(ts.fs, f)
}

// fire runs every flush scheduled so far.
func (ts *timers) fire() {
	ts.mu.Lock()
	fs := ts.fs
	ts.fs = nil
	ts.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// llmBudget is the budget of an LLM API in Redis: 5 requests, 1000
// input tokens and 500 output tokens per second, the output tokens in a
// fixed window.
type llmBudget struct {
	rpm, itpm *TokenBucket
	otpm      *FixedWindow
	all       *Composite
	client    *Client
	timers    *timers
	scripts   *scriptCounter
}

func newLLMBudget(t *testing.T, rdb *redis.Client, c *clock) *llmBudget {
	t.Helper()
	b := &llmBudget{timers: &timers{}, scripts: &scriptCounter{}}
	rdb.AddHook(b.scripts)
	var err error
	b.client, err = NewClient(rdb, c.option())
	require.NoError(t, err)
	b.client.settles.after = b.timers.after
	t.Cleanup(func() { _ = b.client.Close() })
	b.rpm, err = NewTokenBucket(rdb, throttle.PerSecond(5), 5, WithClient(b.client))
	require.NoError(t, err)
	b.itpm, err = NewTokenBucket(rdb, throttle.PerSecond(1000), 1000, WithClient(b.client))
	require.NoError(t, err)
	b.otpm, err = NewFixedWindow(rdb, 500, time.Second, WithClient(b.client))
	require.NoError(t, err)
	b.all, err = All(b.rpm, b.itpm, b.otpm)
	require.NoError(t, err)
	return b
}

// remaining inspects each part of the budget alone, once the settles
// queued are sent.
func (b *llmBudget) remaining(t *testing.T, key string) [3]int {
	t.Helper()
	require.NoError(t, b.client.Flush(context.Background())) // the settles queued for b.all
	var out [3]int
	for i, l := range []throttle.Inspector{b.rpm, b.itpm, b.otpm} {
		st, err := l.Inspect(context.Background(), key)
		require.NoError(t, err)
		out[i] = st.Remaining
	}
	return out
}

// TestReserveParts books one cost per part, at one common slot, all or
// nothing, in one script call; a part of cost 0 takes nothing.
func TestReserveParts(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	c := newClock(time.Hour)
	b := newLLMBudget(t, rdb, c)
	var _ throttle.PartsReserver = b.all

	before := b.scripts.n.Load()
	r, err := b.all.ReserveParts(ctx, "k", []int{1, 300, 200}, 0)
	require.NoError(t, err)
	require.True(t, r.OK)
	assert.Equal(t, int64(1), b.scripts.n.Load()-before, "one script call")
	assert.Equal(t, [3]int{4, 700, 300}, b.remaining(t, "k"))

	// A part of cost 0 is not booked and does not hold the slot back.
	r, err = b.all.ReserveParts(ctx, "k", []int{0, 700, 0}, 0)
	require.NoError(t, err)
	require.True(t, r.OK)
	assert.Equal(t, [3]int{4, 0, 300}, b.remaining(t, "k"))

	// All or nothing: the input tokens are spent, so nothing is booked.
	r, err = b.all.ReserveParts(ctx, "k", []int{1, 100, 100}, 0)
	require.NoError(t, err)
	assert.False(t, r.OK)
	assert.Equal(t, 100*time.Millisecond, r.Delay)
	assert.Equal(t, [3]int{4, 0, 300}, b.remaining(t, "k"))

	// The same call waiting for its slot books every part there.
	r, err = b.all.ReserveParts(ctx, "k", []int{1, 100, 100}, time.Second)
	require.NoError(t, err)
	require.True(t, r.OK)
	assert.Equal(t, 100*time.Millisecond, r.Delay)

	// Cancel gives back every part of the latest booking. The window
	// reports nothing left until its slot, as in process: no slot goes
	// below the latest booked.
	require.NoError(t, r.Cancel(ctx))
	assert.Equal(t, [3]int{4, 0, 0}, b.remaining(t, "k"))
	c.advance(100 * time.Millisecond)
	assert.Equal(t, [3]int{4, 100, 300}, b.remaining(t, "k"))

	// Reserve with one n still books n on every part.
	r, err = b.all.Reserve(ctx, "other", 2, 0)
	require.NoError(t, err)
	require.True(t, r.OK)
	assert.Equal(t, [3]int{3, 998, 498}, b.remaining(t, "other"))

	for _, tt := range []struct {
		give     []int
		wantErrs []string
	}{
		{give: []int{1, 2}, wantErrs: []string{"3 costs", "got 2"}},
		{give: []int{1, -2, 3}, wantErrs: []string{"part 1", "-2"}},
		{give: []int{0, 0, 0}, wantErrs: []string{"positive", "[0 0 0]"}},
		{give: []int{1, 1, 501}, wantErrs: []string{"501", "fw:500/s", "at most 500"}},
	} {
		_, err := b.all.ReserveParts(ctx, "k", tt.give, 0)
		require.Error(t, err, "%v", tt.give)
		for _, w := range tt.wantErrs {
			assert.ErrorContains(t, err, w, "%v", tt.give)
		}
	}
}

// TestSettle gives back and charges each part at the booking's slot,
// after the slot has passed, once.
func TestSettle(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	c := newClock(time.Hour)
	b := newLLMBudget(t, rdb, c)

	r1, err := b.all.ReserveParts(ctx, "k", []int{1, 300, 400}, 0)
	require.NoError(t, err)
	r2, err := b.all.ReserveParts(ctx, "k", []int{1, 300, 100}, 0)
	require.NoError(t, err)
	require.True(t, r1.OK && r2.OK)
	assert.Equal(t, [3]int{3, 400, 0}, b.remaining(t, "k"))
	c.advance(10 * time.Millisecond) // the slots have passed: 10 input tokens came back

	// The latest booking gives back in full; the window gets back what
	// the output did not use. The settle waits for the key's next call.
	require.NoError(t, r2.Settle(ctx, 1, 100, 30))
	assert.Equal(t, [3]int{3, 610, 70}, b.remaining(t, "k"))

	// An earlier booking gives back no more than the slack of the ones
	// after it: r2 was booked 300 input tokens past r1's slot, of which
	// its own settle gave 200 back.
	require.NoError(t, r1.Settle(ctx, 1, 0, 450))
	assert.Equal(t, [3]int{3, 710, 20}, b.remaining(t, "k"))

	// Settled once: later settles, and a cancel, do nothing.
	require.NoError(t, r1.Settle(ctx, 1, 0, 0))
	require.NoError(t, r1.Cancel(ctx))
	assert.Equal(t, [3]int{3, 710, 20}, b.remaining(t, "k"))

	// Settling a refused or cancelled reservation is a no-op.
	refused, err := b.all.ReserveParts(ctx, "k", []int{1, 1, 100}, 0)
	require.NoError(t, err)
	require.False(t, refused.OK)
	require.NoError(t, refused.Settle(ctx, 0, 0, 0))
	cancelled, err := b.all.ReserveParts(ctx, "k", []int{1, 10, 10}, 0)
	require.NoError(t, err)
	require.NoError(t, cancelled.Cancel(ctx))
	require.NoError(t, cancelled.Settle(ctx, 5, 50, 50))
	assert.Equal(t, [3]int{3, 710, 20}, b.remaining(t, "k"))
	assert.Zero(t, b.client.settles.queued.Load())
}

// TestSettleBadInput: a wrong count or a negative actual is an error that
// changes nothing; an actual larger than a part could ever admit is
// charged and reported.
func TestSettleBadInput(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	c := newClock(time.Hour)
	b := newLLMBudget(t, rdb, c)

	r, err := b.all.ReserveParts(ctx, "k", []int{1, 10, 10}, 0)
	require.NoError(t, err)
	err = r.Settle(ctx, 1, -3, 10)
	assert.ErrorContains(t, err, "part 1")
	assert.ErrorContains(t, err, "-3")
	// (A wrong count is found by the Settler, after Reservation.Settle
	// has marked the reservation settled: see the booking's own check.)
	err = (&booking{budget: b.all.budget, parts: b.all.partLimits}).Settle(ctx, []int{1, 10})
	assert.ErrorContains(t, err, "3 actual costs")

	// The call has happened: 600 output tokens are charged at the slot,
	// past the window's 500.
	err = r.Settle(ctx, 1, 10, 600)
	require.Error(t, err)
	assert.True(t, errors.Is(err, throttle.ErrExceedsCapacity), "%v", err)
	assert.ErrorContains(t, err, "600")
	assert.ErrorContains(t, err, "fw:500/s")
	assert.Equal(t, [3]int{4, 990, 0}, b.remaining(t, "k"))
	c.advance(time.Second)
	assert.Equal(t, [3]int{5, 1000, 500}, b.remaining(t, "k"), "the next window starts afresh")

	// One value settles a reservation from Reserve, on every part.
	err = (&booking{budget: b.all.budget}).Settle(ctx, []int{1, 2, 3})
	assert.ErrorContains(t, err, "1 actual cost")
	r, err = b.all.Reserve(ctx, "one", 4, 0)
	require.NoError(t, err)
	require.NoError(t, r.Settle(ctx, 2))
	assert.Equal(t, [3]int{3, 998, 498}, b.remaining(t, "one"))
}

// TestSettleRoundTrips counts script calls: a settle rides on the key's
// next call, or goes on its own when the flush fires; Close flushes.
func TestSettleRoundTrips(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	c := newClock(time.Hour)
	b := newLLMBudget(t, rdb, c)

	calls := func() int64 { return b.scripts.n.Load() }
	start := calls()
	const n = 50
	var prev *throttle.Reservation
	for range n {
		if prev != nil {
			require.NoError(t, prev.Settle(ctx, 1, 5, 3))
		}
		r, err := b.all.ReserveParts(ctx, "busy", []int{1, 10, 10}, -1)
		require.NoError(t, err)
		prev = r
	}
	assert.Equal(t, int64(n), calls()-start, "every settle rode on the next reserve")
	assert.Equal(t, []time.Duration{SettleDelay}, b.timers.delay[:1])

	// The last settle has no call to ride on: the flush sends it.
	require.NoError(t, prev.Settle(ctx, 1, 5, 3))
	assert.Equal(t, int64(1), b.client.settles.queued.Load())
	start = calls()
	b.timers.fire()
	assert.Equal(t, int64(1), calls()-start, "one call for the flush (%d timers)", len(b.timers.delay))
	assert.Zero(t, b.client.settles.queued.Load())
	b.timers.fire()
	assert.Equal(t, int64(1), calls()-start, "nothing left to flush")

	// Close sends what is still queued.
	r, err := b.all.ReserveParts(ctx, "closing", []int{1, 100, 100}, -1)
	require.NoError(t, err)
	require.NoError(t, r.Settle(ctx, 1, 0, 0))
	require.NoError(t, b.client.Close())
	cl, err := NewClient(rdb, c.option())
	require.NoError(t, err)
	defer cl.Close()
	fresh, err := NewTokenBucket(rdb, throttle.PerSecond(1000), 1000, WithClient(cl))
	require.NoError(t, err)
	st, err := fresh.Inspect(ctx, "closing")
	require.NoError(t, err)
	assert.Equal(t, 1000, st.Remaining, "the settle gave the input tokens back")
}

// TestSettleOnce sends one settle twice, as go-redis may resend a call:
// Redis applies it once.
func TestSettleOnce(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	c := newClock(time.Hour)
	b := newLLMBudget(t, rdb, c)

	r, err := b.all.ReserveParts(ctx, "k", []int{1, 100, 100}, -1)
	require.NoError(t, err)
	require.NoError(t, r.Settle(ctx, 1, 400, 400))
	recs := b.client.settles.take(b.all.budget, "k")
	require.Len(t, recs, 1)
	ks, err := b.all.keys("k")
	require.NoError(t, err)
	for range 2 {
		_, err := b.all.send(ctx, "k", ks, append(b.all.args("settle", 1), b.client.channel), recs)
		require.NoError(t, err)
	}
	assert.Equal(t, [3]int{4, 600, 100}, b.remaining(t, "k"))
}

// TestSettleAfterKeyDropped: a settle of a key dropped since (evicted,
// or expired) is safe: nothing is given back, an excess is charged.
func TestSettleAfterKeyDropped(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	c := newClock(time.Hour)
	b := newLLMBudget(t, rdb, c)

	r1, err := b.all.ReserveParts(ctx, "k", []int{1, 100, 100}, -1)
	require.NoError(t, err)
	r2, err := b.all.ReserveParts(ctx, "k", []int{1, 100, 100}, -1)
	require.NoError(t, err)
	ks, err := b.all.keys("k")
	require.NoError(t, err)
	require.NoError(t, rdb.Del(ctx, ks...).Err())
	require.NoError(t, r1.Settle(ctx, 0, 0, 0))
	require.NoError(t, r2.Settle(ctx, 1, 300, 150))
	require.NoError(t, b.client.Flush(ctx))
	assert.Equal(t, [3]int{5, 800, 450}, b.remaining(t, "k"))
}

// TestSettleCluster books and settles an LLM budget on a Redis Cluster:
// every key of the budget, the record of settles included, shares a slot.
func TestSettleCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	rdb := startCluster(t)
	ctx := context.Background()
	c := newClock(time.Hour)
	rpm, err := NewTokenBucket(rdb, throttle.PerSecond(5), 5, c.option())
	require.NoError(t, err)
	otpm, err := NewFixedWindow(rdb, 500, time.Second, WithClient(rpm.client))
	require.NoError(t, err)
	closeAll(t, rpm)
	all, err := All(rpm, otpm)
	require.NoError(t, err)
	for _, key := range []string{"a", "b", "api.example.com"} {
		r, err := all.ReserveParts(ctx, key, []int{1, 400}, 0)
		require.NoError(t, err)
		require.True(t, r.OK)
		require.NoError(t, r.Settle(ctx, 1, 100))
		require.NoError(t, rpm.client.Flush(ctx))
		st, err := otpm.Inspect(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, 400, st.Remaining, key)
	}
}

// TestSettleFailures: a settle Redis could not answer stays queued; one
// the script fails on is dropped and reported.
func TestSettleFailures(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	c := newClock(time.Hour)
	var events []Event
	var mu sync.Mutex
	cl, err := NewClient(rdb, c.option(), WithObserver(func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}))
	require.NoError(t, err)
	cl.settles.after = func(time.Duration, func()) {}
	defer cl.Close()
	l, err := NewTokenBucket(rdb, throttle.PerSecond(10), 10, WithClient(cl))
	require.NoError(t, err)

	// A record the script cannot read fails the call, and goes.
	cl.settles.add(l.budget, "k", "id x")
	assert.Error(t, cl.Flush(ctx))
	assert.Zero(t, cl.settles.queued.Load())
	mu.Lock()
	require.NotEmpty(t, events)
	assert.ErrorContains(t, events[len(events)-1].Err, `1 settles of key "k" dropped`)
	assert.Equal(t, 1, events[len(events)-1].Settles, "the event is a drop, not the breaker's")
	mu.Unlock()

	// Redis away: the settle stays for the next try.
	r := reserve(t, l, "k", 5, 0)
	require.True(t, r.OK)
	s.kill()
	require.NoError(t, r.Settle(ctx, 1))
	err = cl.Flush(ctx)
	assert.True(t, errors.Is(err, ErrUnavailable), "%v", err)
	assert.Equal(t, int64(1), cl.settles.queued.Load())
}

// TestPausesLeaveDueUnitsDue is throttle's test of the same name: a key
// is paused several times while a unit is due but its caller has not
// woken. The script places what is booked after the pauses where the
// process does; and a settle of the due unit, which no pause moved in
// the script, stays in its own window.
func TestPausesLeaveDueUnitsDue(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	type pause struct{ at, d time.Duration }
	tests := []struct {
		name       string
		givePauses []pause
		wantAhead  time.Duration // when a unit booked after the pauses is due (the due unit spent 1ms of the bucket)
	}{
		{name: "two at one instant", givePauses: []pause{{0, time.Second}, {0, 2 * time.Second}}, wantAhead: 2001 * time.Millisecond},
		{name: "overlapping, each longer", givePauses: []pause{{0, time.Second}, {100 * time.Millisecond, 3 * time.Second}, {200 * time.Millisecond, 5 * time.Second}}, wantAhead: 5201 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock(time.Hour)
			cl := quietClient(t, rdb, c)
			tb, err := NewTokenBucket(rdb, throttle.PerSecond(1000), 1, WithClient(cl))
			require.NoError(t, err)
			key := t.Name()
			due := reserve(t, tb, key, 1, -1)
			require.Equal(t, time.Duration(0), due.Delay)
			at := time.Duration(0)
			for _, p := range tt.givePauses {
				c.advance(p.at - at)
				at = p.at
				require.NoError(t, tb.Pause(ctx, key, p.d))
			}
			r := reserve(t, tb, key, 1, -1)
			assert.Equal(t, tt.wantAhead-at, r.Delay)
		})
	}
}

// TestSettleAfterPauses settles a booking that a pause found due: it
// stays in its own window, as in process, and its give-back does not go
// to the window the pause's shift would carry it to.
func TestSettleAfterPauses(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	c := newClock(500 * time.Millisecond)
	cl := quietClient(t, rdb, c)
	remote, err := NewFixedWindow(rdb, 10, time.Second, WithClient(cl))
	require.NoError(t, err)
	local, err := throttle.NewFixedWindow(10, time.Second, throttle.WithClock(c.now))
	require.NoError(t, err)
	key := t.Name()
	both := func(what string, n int) (*throttle.Reservation, *throttle.Reservation) {
		t.Helper()
		want := reserve(t, local, key, n, 0)
		got := reserve(t, remote, key, n, 0)
		assert.Equal(t, want.OK, got.OK, "%s: OK", what)
		assert.Equal(t, want.Delay, got.Delay, "%s: Delay", what)
		return want, got
	}
	wantDue, gotDue := both("due at once", 5)
	for _, d := range []time.Duration{time.Second, 1200 * time.Millisecond} {
		require.NoError(t, remote.Pause(ctx, key, d))
		require.NoError(t, local.Pause(ctx, key, d))
		c.advance(50 * time.Millisecond)
	}
	c.advance(1300 * time.Millisecond) // into the next window, past the pauses
	both("the next window in full", 10)
	require.NoError(t, wantDue.Settle(ctx, 0))
	require.NoError(t, gotDue.Settle(ctx, 0))
	both("after the settle of the due booking", 5)
}

// TestReservePartsShared: a limit found in several parts takes the
// largest of their costs, and settles to the largest of their actuals;
// a part that is itself an All gives its cost to each of its limits.
func TestReservePartsShared(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	c := newClock(time.Hour)
	b := newLLMBudget(t, rdb, c)
	inner, err := All(b.itpm, b.otpm)
	require.NoError(t, err)
	outer, err := All(b.rpm, inner, b.itpm)
	require.NoError(t, err)
	r, err := outer.ReserveParts(ctx, "k", []int{1, 50, 80}, 0)
	require.NoError(t, err)
	require.True(t, r.OK)
	assert.Equal(t, [3]int{4, 920, 450}, b.remaining(t, "k"))
	require.NoError(t, r.Settle(ctx, 1, 20, 30))
	assert.Equal(t, [3]int{4, 970, 480}, b.remaining(t, "k"))
}

// TestSettleThroughThrottleAll: throttle.All over this package's
// limiters books each in a call of its own, and settles each.
func TestSettleThroughThrottleAll(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	ctx := context.Background()
	c := newClock(time.Hour)
	b := newLLMBudget(t, rdb, c)
	all := throttle.All(b.rpm, b.itpm, b.otpm).(throttle.PartsReserver)
	r, err := all.ReserveParts(ctx, "k", []int{1, 300, 200}, 0)
	require.NoError(t, err)
	require.True(t, r.OK)
	assert.Equal(t, [3]int{4, 700, 300}, b.remaining(t, "k"))
	require.NoError(t, r.Settle(ctx, 1, 100, 50))
	// Each part's settle is queued on its own limiter, not b.all.
	require.NoError(t, b.client.Flush(ctx))
	assert.Equal(t, [3]int{4, 900, 450}, b.remaining(t, "k"))
}
