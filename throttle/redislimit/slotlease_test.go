package redislimit

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// leased builds a token bucket of 100/s with a burst of 20 on rdb,
// leasing for 100 ms (so it keeps 10 of the burst in reserve), for one
// simulated process: a Client of its own on the test's clock.
func leased(t *testing.T, rdb redis.Scripter, clk *clock, extra ...Option) *TokenBucket {
	t.Helper()
	c, err := NewClient(rdb, clk.option())
	require.NoError(t, err)
	opts := append([]Option{WithClient(c), WithSlotLease(100 * ms)}, extra...)
	l, err := NewTokenBucket(rdb, throttle.PerSecond(100), 20, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = l.Close()
		_ = c.Close()
	})
	return l
}

// settle waits for the lease calls l has on the wire.
func settle(l *TokenBucket) { l.leases.wg.Wait() }

// conforms reports the first of the sorted times (µs) that a GCRA of
// interval and burst would not admit, or -1.
func conforms(times []int64, interval, burst int64) int {
	tat := int64(0)
	for i, at := range times {
		if i > 0 && at < tat+(1-burst)*interval {
			return i
		}
		tat = max(tat, at) + interval
	}
	return -1
}

// TestSlotLeaseExact drives four processes with skewed, shifting demand on
// a frozen clock, some callers cancelling: whatever they lease, every
// unit goes at a slot the bucket admits, and the fleet still uses most of
// the budget.
func TestSlotLeaseExact(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	clk := newClock(0)
	procs := make([]*TokenBucket, 4)
	for i := range procs {
		procs[i] = leased(t, rdb, clk)
	}
	// every[p][phase]: process p asks for one unit every so many ms.
	every := [][]int{{1, 50}, {50, 1}, {7, 7}, {1000, 3}}
	var admitted []int64
	perPhase := make([]int, 2)
	ctx := context.Background()
	for step := range 4000 {
		phase := step / 2000
		for p, l := range procs {
			if step%every[p][phase] != 0 {
				continue
			}
			r, err := l.Reserve(ctx, "api", 1, 20*ms)
			require.NoError(t, err)
			switch {
			case r.OK && step%5 == 0: // the caller gives up: its unit goes back
				require.NoError(t, r.Cancel(ctx))
			case r.OK:
				admitted = append(admitted, clk.us.Load()+r.Delay.Microseconds())
				perPhase[phase]++
			}
			settle(l)
		}
		clk.advance(ms)
	}
	for p, l := range procs {
		t.Logf("process %d dropped %d", p, l.leases.key("api").dropped)
	}
	slices.Sort(admitted)
	assert.Equal(t, -1, conforms(admitted, 10000, 20), "a unit went out where the configured bucket would refuse it")
	// 2 s of 100/s plus the burst is the most; demand is far above it.
	for phase, n := range perPhase {
		assert.GreaterOrEqual(t, n, 170, "phase %d admitted %d of at most 210", phase, n)
	}
}

// TestSlotLeaseRoundTrips counts the lease calls of one steady process.
func TestSlotLeaseRoundTrips(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	clk := newClock(0)
	var calls int
	rdb.AddHook(countHook{&calls})
	l := leased(t, rdb, clk)
	ok := 0
	for range 2000 { // 50/s for 40 s
		r, err := l.Reserve(context.Background(), "api", 1, 50*ms)
		require.NoError(t, err)
		if r.OK {
			ok++
		}
		settle(l)
		clk.advance(20 * ms)
	}
	assert.Equal(t, 2000, ok)
	assert.Less(t, float64(calls)/float64(ok), 0.3, "%d calls for %d units", calls, ok)
}

type countHook struct{ n *int }

func (countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" || cmd.Name() == "eval" {
			*h.n++
		}
		return next(ctx, cmd)
	}
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		*h.n += len(cmds)
		return next(ctx, cmds)
	}
}

// TestSlotLeasePause: a pause voids the slots a process holds, its next
// lease comes back empty with the pause's end as Delay, and nothing is
// admitted inside the pause.
func TestSlotLeasePause(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	clk := newClock(0)
	a, b := leased(t, rdb, clk), leased(t, rdb, clk)
	ctx := context.Background()
	for range 30 { // a holds a block ahead
		reserve(t, a, "api", 1, time.Second)
		settle(a)
		clk.advance(5 * ms)
	}
	require.NotZero(t, a.leases.key("api").held())
	require.NoError(t, b.Pause(ctx, "api", time.Second))
	_, err := a.Inspect(ctx, "api") // a reply teaches a of the pause, as pub/sub would
	require.NoError(t, err)
	pauseEnd := clk.us.Load() + time.Second.Microseconds()
	for range 20 {
		r := reserve(t, a, "api", 1, 100*ms)
		settle(a)
		assert.False(t, r.OK)
		assert.GreaterOrEqual(t, r.Delay, 800*ms)
		clk.advance(ms)
	}
	clk.advance(time.Second)                  // past the pause and the units it moved
	r := reserve(t, a, "api", 1, time.Second) // behind the units the pause moved
	require.True(t, r.OK, "%v", r.Delay)
	assert.GreaterOrEqual(t, clk.us.Load()+r.Delay.Microseconds(), pauseEnd)
}

// TestSlotLeaseCloseGivesBack: Close hands the unused tail back.
func TestSlotLeaseCloseGivesBack(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	clk := newClock(0)
	a := leased(t, rdb, clk)
	taken := 0
	for range 5 {
		reserve(t, a, "api", 1, time.Second)
		taken++
		settle(a)
	}
	held := a.leases.key("api").held()
	require.NotZero(t, held)
	require.NoError(t, a.Close())
	one, err := NewTokenBucket(rdb, throttle.PerSecond(100), 20, clk.option(), WithSlotLease(100*ms)) // Inspect goes to Redis
	require.NoError(t, err)
	closeAll(t, one)
	st, err := one.Inspect(context.Background(), "api")
	require.NoError(t, err)
	assert.Equal(t, 10-taken, st.Remaining)
}

// TestSlotLeaseAbandoned: a process that dies holding a lease loses what
// it held, and no more: the others get the rest of the budget.
func TestSlotLeaseAbandoned(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	clk := newClock(0)
	c, err := NewClient(rdb, clk.option())
	require.NoError(t, err)
	dead, err := NewTokenBucket(rdb, throttle.PerSecond(100), 20, WithClient(c), WithSlotLease(100*ms))
	require.NoError(t, err)
	for range 8 {
		reserve(t, dead, "api", 1, time.Second)
		settle(dead)
	}
	held := dead.leases.key("api").held()
	require.NoError(t, c.Close()) // killed: nothing given back
	b := leased(t, rdb, clk)
	ok := 0
	for range 1000 { // 1 s, asking every ms
		if reserve(t, b, "api", 1, 0).OK {
			ok++
		}
		settle(b)
		clk.advance(ms)
	}
	// 100 in the second plus the burst it may use (10), less the units
	// the dead one took or held, and those b's own leases dropped.
	assert.GreaterOrEqual(t, ok, 100+10-8-held-10)
	assert.LessOrEqual(t, held, 10)
}

// TestSlotLeaseOutage: with FailShare, a process serves its lease, then
// waits two spans, then takes the limit over the processes Redis counted.
func TestSlotLeaseOutage(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := srv.client(t)
	clk := newClock(0)
	a := leased(t, rdb, clk, WithFailurePolicy(FailShare))
	b := leased(t, rdb, clk, WithFailurePolicy(FailShare))
	for range 20 {
		reserve(t, a, "api", 1, time.Second)
		reserve(t, b, "api", 1, time.Second)
		settle(a)
		settle(b)
		clk.advance(5 * ms)
	}
	require.Equal(t, int64(2), a.leases.key("api").live)
	srv.kill()
	start := clk.us.Load()
	var times []int64
	for range 2000 { // 2 s, asking every ms
		r, err := a.Reserve(context.Background(), "api", 1, 0)
		require.NoError(t, err)
		if r.OK {
			times = append(times, clk.us.Load())
		}
		settle(a)
		clk.advance(ms)
	}
	var share []int64
	for _, at := range times {
		if at >= start+time.Second.Microseconds() {
			share = append(share, at)
		}
	}
	// By then the units leased before are gone: the share, 50/s with a
	// burst of 5.
	assert.Equal(t, -1, conforms(share, 20000, 5))
	assert.InDelta(t, 50, len(share), 1)
}

func TestSlotLeaseBadInput(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	tests := []struct {
		name    string
		build   func() (interface{ Close() error }, error)
		wantErr string
	}{
		{"zero span", func() (interface{ Close() error }, error) {
			return NewTokenBucket(rdb, throttle.PerSecond(1), 1, WithSlotLease(0))
		}, "WithSlotLease must be positive, got 0s"},
		{"window", func() (interface{ Close() error }, error) {
			return NewFixedWindow(rdb, 10, time.Second, WithSlotLease(time.Second))
		}, "WithSlotLease takes a TokenBucket or a LeakyBucket"},
		{"share alone", func() (interface{ Close() error }, error) {
			return NewLeakyBucket(rdb, throttle.PerSecond(1), 1, WithFailurePolicy(FailShare))
		}, "FailShare needs WithSlotLease"},
		{"a span of centuries", func() (interface{ Close() error }, error) {
			// Its reserve overflowed to a negative count, which raised the
			// burst to 46 billion and made Reserve spin (found by a user's test).
			return NewTokenBucket(rdb, throttle.PerSecond(5), 10, WithSlotLease(math.MaxInt64))
		}, "WithSlotLease of 2562047h47m16.854775807s keeps 46116860185 units in reserve, more than the burst of 10 allows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.build()
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// TestSlotLeaseError: a lease call that fails for a reason other than
// Redis being away comes back to the caller waiting for it.
func TestSlotLeaseError(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	clk := newClock(0)
	c, err := NewClient(rdb, clk.option())
	require.NoError(t, err)
	l, err := NewTokenBucket(rdb, throttle.PerSecond(100), 20, WithClient(c), WithSlotLease(100*ms))
	require.NoError(t, err)
	require.NoError(t, c.Close())
	_, err = l.Reserve(context.Background(), "api", 1, time.Second)
	assert.ErrorIs(t, err, ErrClosed)
	require.NoError(t, l.Close())
}

// TestSlotLeaseDemandDrops: when a process asks for far fewer units than
// it holds, it gives back the tail of its newest block, which is still
// the bucket's latest booking, and the bucket has those units again.
func TestSlotLeaseDemandDrops(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	clk := newClock(0)
	a := leased(t, rdb, clk)
	kl := a.leases.key("api")
	// 1000/s asked for 100 ms or more, waiting up to 1 s: leases top the
	// units held up to 10; stop when more than 3 are held.
	for i := 0; i < 100 || kl.held() <= 3; i++ {
		require.Less(t, i, 200)
		reserve(t, a, "api", 1, time.Second)
		settle(a)
		clk.advance(ms)
	}
	held := kl.held()
	require.Greater(t, held, 3)
	before, err := a.Inspect(context.Background(), "api")
	require.NoError(t, err)
	// Nothing asked for a span after the last caller's unit came: the
	// rate drops.
	kl.mu.Lock()
	quiet := time.Duration(kl.lastDue - clk.us.Load()*1000 + int64(100*ms))
	kl.mu.Unlock()
	clk.advance(quiet)
	reserve(t, a, "api", 1, time.Second)
	settle(a)
	kl.mu.Lock()
	given, left := kl.given, kl.held()
	kl.mu.Unlock()
	assert.Positive(t, given)
	assert.LessOrEqual(t, left, held-int(given))
	after, err := a.Inspect(context.Background(), "api")
	require.NoError(t, err)
	assert.Less(t, after.Ahead, before.Ahead-int(given)+1, "the units given back are no longer booked")
}

// TestSlotLeaseLeakyBucket: a leaky bucket leases as the token bucket
// does, within its bound, and n units go together.
func TestSlotLeaseLeakyBucket(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	clk := newClock(0)
	l, err := NewLeakyBucket(rdb, throttle.PerSecond(100), 20, clk.option(), WithSlotLease(100*ms))
	require.NoError(t, err)
	closeAll(t, l)
	var admitted []int64
	for step := range 2000 {
		n := 1 + step%3
		r, err := l.Reserve(context.Background(), "api", n, 50*ms)
		require.NoError(t, err)
		if r.OK {
			for range n {
				admitted = append(admitted, clk.us.Load()+r.Delay.Microseconds())
			}
		}
		l.leases.wg.Wait()
		clk.advance(ms)
	}
	slices.Sort(admitted)
	// capacity 20: GCRA burst 21.
	assert.Equal(t, -1, conforms(admitted, 10000, 21))
	assert.GreaterOrEqual(t, len(admitted), 180, "2 s at 100/s")
}

// TestSlotLeaseExactLate: a process stops asking while it holds units
// whose slots then pass, and takes them all at once, most of a span
// late, just as another process takes what the bucket has left: the
// fleet still goes only where the configured bucket admits, because the
// bucket keeps a span's units of its burst in reserve. Without the
// reserve (keep = 0 in newLeases) this test fails.
func TestSlotLeaseExactLate(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	clk := newClock(0)
	procs := make([]*TokenBucket, 4)
	for i := range procs {
		procs[i] = leased(t, rdb, clk)
	}
	var admitted []int64
	ctx := context.Background()
	// take makes calls calls for n units each and returns the units
	// admitted.
	take := func(l *TokenBucket, calls, n int, maxWait time.Duration) int {
		got := 0
		for range calls {
			r, err := l.Reserve(ctx, "api", n, maxWait)
			require.NoError(t, err)
			settle(l)
			if !r.OK {
				continue
			}
			for range n {
				admitted = append(admitted, clk.us.Load()+r.Delay.Microseconds())
			}
			got += n
		}
		return got
	}
	for cycle := range 4 { // each process plays each part
		late, other := procs[cycle], procs[(cycle+1)%4]
		kl := late.leases.key("api")
		// 83/s, each unit on time, for 3 s, and on until late holds 6
		// units or more.
		for i := 0; i < 250 || kl.held() < 6; i++ {
			require.Less(t, i, 300)
			take(late, 1, 1, 100*ms)
			clk.advance(12 * ms)
		}
		// late now holds units slotted in the next few ms. It asks for nothing
		// for most of a span (too short to count as demand dropping)...
		clk.advance(85 * ms)
		// ...while another process takes what the bucket has...
		require.Positive(t, take(other, 8, 5, 0))
		// ...and then late hands out its units, all ~97 ms late.
		require.GreaterOrEqual(t, take(late, 40, 1, 0), 5)
		clk.advance(time.Second)
	}
	slices.Sort(admitted)
	assert.Equal(t, -1, conforms(admitted, 10000, 20), "a unit went out where the configured bucket would refuse it")
}

// TestSlotLeaseCancel: a cancelled leased unit goes back to the process's
// lease at its own slot, and the next caller takes it without a lease
// call; one whose slot passed a span ago does not come back.
func TestSlotLeaseCancel(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	clk := newClock(0)
	var calls int
	rdb.AddHook(countHook{&calls})
	a := leased(t, rdb, clk)
	ctx := context.Background()
	for range 12 { // past the burst: units slotted ahead
		reserve(t, a, "api", 1, time.Second)
		settle(a)
	}
	kl := a.leases.key("api")
	r := reserve(t, a, "api", 1, time.Second)
	settle(a)
	require.True(t, r.OK)
	require.Positive(t, r.Delay)
	kl.mu.Lock()
	held := kl.held()
	kl.mu.Unlock()
	require.NoError(t, r.Cancel(ctx))
	kl.mu.Lock()
	assert.Equal(t, held+1, kl.held(), "the unit is back in the lease")
	kl.mu.Unlock()
	before := calls
	again := reserve(t, a, "api", 1, time.Second)
	assert.Equal(t, r.Delay, again.Delay, "the next caller takes it, at its slot")
	assert.Equal(t, before, calls, "with no lease call")

	late := reserve(t, a, "api", 1, time.Second)
	settle(a)
	require.True(t, late.OK)
	clk.advance(late.Delay + 101*ms) // a span past its slot
	kl.mu.Lock()
	held = kl.held()
	kl.mu.Unlock()
	require.NoError(t, late.Cancel(ctx))
	kl.mu.Lock()
	assert.Equal(t, held, kl.held(), "a unit a span past its slot does not come back")
	kl.mu.Unlock()
}

// TestSlotLeaseAllowFair: a process whose callers all use maxWait 0
// (Allow), asking every 3 ms, still gets its share of a budget that the
// other processes, hot with callers who wait up to a span or less, keep
// booking ahead; and so do the hot ones. Each process asks far above the
// 100/s the bucket gives, so a fair share is 1/procs of what the fleet
// admits: every process must admit at least half of it. Before a local
// refusal leased the units from when the next one fits, with 4 processes
// the Allow-only process admitted 2 of about 310, and with callers who
// wait 100 ms so did one hot process (4).
func TestSlotLeaseAllowFair(t *testing.T) {
	t.Parallel()
	for _, procs := range []int{2, 3, 4} {
		for _, hotWait := range []time.Duration{30 * ms, 100 * ms} {
			t.Run(fmt.Sprintf("%d processes, hot wait %v", procs, hotWait), func(t *testing.T) {
				rdb := startRedis(t).client(t)
				clk := newClock(0)
				ls := make([]*TokenBucket, procs)
				for i := range ls {
					ls[i] = leased(t, rdb, clk)
				}
				allow := procs - 1 // it asks last in each ms
				ctx := context.Background()
				var admitted []int64
				got := make([]int, procs)
				for step := range 3000 { // 3 s
					for p, l := range ls {
						maxWait := hotWait
						if p == allow && step%3 != 0 {
							continue
						}
						var at int64 = -1
						if p == allow {
							ok, err := throttle.Allow(ctx, l, "api", 1)
							require.NoError(t, err)
							if ok {
								at = clk.us.Load()
							}
						} else {
							r, err := l.Reserve(ctx, "api", 1, maxWait)
							require.NoError(t, err)
							if r.OK {
								at = clk.us.Load() + r.Delay.Microseconds()
							}
						}
						if at >= 0 {
							admitted = append(admitted, at)
							got[p]++
						}
						settle(l)
					}
					clk.advance(ms)
				}
				slices.Sort(admitted)
				assert.Equal(t, -1, conforms(admitted, 10000, 20), "a unit went out where the configured bucket would refuse it")
				t.Logf("admitted per process (the last Allow-only): %v of %d", got, len(admitted))
				assert.GreaterOrEqual(t, len(admitted), 290, "3 s at 100/s")
				for p, n := range got {
					assert.GreaterOrEqual(t, n*2*procs, len(admitted), "process %d admitted %d of %d", p, n, len(admitted))
				}
			})
		}
	}
}

// TestSlotLeaseAllowSparse: a process whose Allow callers come less than
// twice a span books nothing ahead when refused, so that it loses no
// units and makes no more calls than before it could book ahead (10 here,
// where booking ahead made 16 and lost 5 units).
func TestSlotLeaseAllowSparse(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	clk := newClock(0)
	hot := leased(t, srv.client(t), clk)
	rdb := srv.client(t)
	var calls int
	rdb.AddHook(countHook{&calls})
	sparse := leased(t, rdb, clk)
	ctx := context.Background()
	asks := 0
	for step := range 3000 { // 3 s
		_, err := hot.Reserve(ctx, "api", 1, 100*ms)
		require.NoError(t, err)
		settle(hot)
		if step%500 == 250 {
			_, err := throttle.Allow(ctx, sparse, "api", 1)
			require.NoError(t, err)
			settle(sparse)
			asks++
		}
		clk.advance(ms)
	}
	assert.LessOrEqual(t, calls, 2*asks, "calls of the sparse process")
	assert.Zero(t, sparse.leases.key("api").dropped, "units the sparse process leased and lost")
}

// TestSlotLeaseOutagePause: a pause made while Redis is away (a 429 with
// Retry-After) holds the process's share, as Fallback pauses its local
// limiter: nothing is admitted from the share inside the pause. The
// pause failed as under FailClosed and the share went on admitting at its
// rate, into the upstream's Retry-After (found by a user's test).
func TestSlotLeaseOutagePause(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := srv.client(t)
	clk := newClock(0)
	a := leased(t, rdb, clk, WithFailurePolicy(FailShare))
	for range 20 {
		reserve(t, a, "api", 1, time.Second)
		settle(a)
		clk.advance(5 * ms)
	}
	srv.kill()
	ctx := context.Background()
	for range 1000 { // a second into the outage: the share serves
		_, err := a.Reserve(ctx, "api", 1, 0)
		require.NoError(t, err)
		settle(a)
		clk.advance(ms)
	}
	r := reserve(t, a, "api", 1, time.Second)
	require.True(t, r.OK, "the share serves")
	clk.advance(time.Second) // the share's burst back
	assert.NoError(t, a.Pause(ctx, "api", 500*ms))
	var admitted []time.Duration // from the pause
	for at := time.Duration(0); at < time.Second; at += ms {
		r, err := a.Reserve(ctx, "api", 1, 0)
		require.NoError(t, err)
		if r.OK {
			admitted = append(admitted, at)
		}
		settle(a)
		clk.advance(ms)
	}
	require.NotEmpty(t, admitted, "the share serves after the pause")
	assert.GreaterOrEqual(t, admitted[0], 500*ms, "admitted inside the pause")
}
