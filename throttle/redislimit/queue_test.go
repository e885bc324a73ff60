package redislimit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/throttle"
)

// queueInterface is queue.Interface as it is on main, which this branch
// predates: the Transport's WithQueue takes it.
type queueInterface interface {
	Acquire(ctx context.Context) (release func(), err error)
	TryAcquire() (release func(), ok bool)
	Stats() queue.Stats
}

var _ queueInterface = (*Queue)(nil)

// testLease is the lease of the tests' queues, on their frozen clocks.
const testLease = 2 * time.Second

// newTestQueue returns a queue on rdb with the clock's frozen time and no
// renewal goroutine, closed when the test ends, and past its first
// lease of grace.
func newTestQueue(t *testing.T, rdb redis.Scripter, c *clock, n, m int, opts ...Option) *Queue {
	t.Helper()
	opts = append([]Option{c.option(), withoutRenewals(), WithLease(testLease), WithRenewEvery(testLease / 4)}, opts...)
	q, err := NewQueue(rdb, "api", n, m, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	_, err = q.FleetStats(context.Background()) // creates the queue's state
	require.NoError(t, err)
	return q
}

// warm moves the clock past a new queue's lease of grace.
func warm(c *clock) { c.advance(testLease) }

func fleet(t *testing.T, q *Queue) queue.Stats {
	t.Helper()
	s, err := q.FleetStats(context.Background())
	require.NoError(t, err)
	return s
}

// acquireAsync starts an Acquire and returns where its result arrives.
// It returns once the caller is in line in Redis (wantWaiting callers in
// all) and in q's own line.
func acquireAsync(t *testing.T, ctx context.Context, q *Queue, wantWaiting int) <-chan acquired {
	t.Helper()
	local := q.Stats().Waiting
	ch := make(chan acquired, 1)
	go func() {
		r, err := q.Acquire(ctx)
		ch <- acquired{r, err}
	}()
	waitInLine(t, q, wantWaiting)
	// In this process's line too: Acquire records its place once Redis
	// has answered, and a renewal made before then would not carry it.
	require.Eventually(t, func() bool { return q.Stats().Waiting > local }, 30*time.Second, time.Millisecond)
	return ch
}

// waitInLine returns once want callers wait in q's line in Redis.
func waitInLine(t *testing.T, q *Queue, want int) {
	t.Helper()
	require.Eventually(t, func() bool {
		s, err := q.FleetStats(context.Background())
		return err == nil && s.Waiting == want
	}, 30*time.Second, time.Millisecond) // a bound for a busy machine only
}

type acquired struct {
	release func()
	err     error
}

func TestNewQueueBadInput(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	tests := []struct {
		name      string
		giveName  string
		giveN     int
		giveM     int
		giveOpts  []Option
		wantError string
	}{
		{"no permits", "api", 0, 0, nil, "maxInFlight must be at least 1, got 0"},
		{"negative line", "api", 1, -1, nil, "maxWaiting must be at least 0, got -1"},
		// Found by a user's test: math.MaxInt, for "no bound", was taken,
		// and once warm every call failed with a Lua error.
		{"unbounded in flight", "api", math.MaxInt, 0, nil, "maxInFlight 9223372036854775807 is above 2^53"},
		{"past 2^53 in flight", "api", 1<<53 + 1, 0, nil, "maxInFlight 9007199254740993 is above 2^53"},
		{"empty name", "", 1, 0, nil, `queue name must be non-empty and not start with '}', got ""`},
		{"lease not longer than renewals", "api", 1, 0, []Option{WithLease(time.Second), WithRenewEvery(time.Second)}, "WithLease (1s) must be longer than the renewal period, WithRenewEvery (1s)"},
		{"lease shorter than renewals", "api", 1, 0, []Option{WithLease(400 * time.Millisecond)}, "WithLease (400ms) must be longer than the renewal period, WithRenewEvery (500ms)"},
		{"no renewals", "api", 1, 0, []Option{WithRenewEvery(0 - time.Second)}, "WithRenewEvery must be positive, got -1s"},
		// Found by a user's test: accepted, the Queue then granted nothing
		// for the lease of grace, that is never.
		{"the largest lease", "api", 1, 0, []Option{WithLease(math.MaxInt64)}, "WithLease (2562047h47m16.854775807s) must be at most 24h0m0s"},
		{"a lease past a day", "api", 1, 0, []Option{WithLease(24*time.Hour + time.Nanosecond), WithRenewEvery(time.Hour)}, "WithLease (24h0m0.000000001s) must be at most 24h0m0s"},
		{"a limiter's option", "api", 1, 0, []Option{WithTolerance(time.Millisecond)}, "NewQueue does not take WithTolerance"},
		{"a limiter's fallback", "api", 1, 0, []Option{WithFailurePolicy(Fallback(nopLimiter{}))}, "NewQueue takes FailClosed, FailOpen or QueueFallback"},
		{"bad prefix", "api", 1, 0, []Option{WithPrefix("a{")}, "WithPrefix must not contain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := NewQueue(rdb, tt.giveName, tt.giveN, tt.giveM, tt.giveOpts...)
			require.Error(t, err)
			assert.Nil(t, q)
			assert.Contains(t, err.Error(), tt.wantError)
			assert.True(t, strings.HasPrefix(err.Error(), "redislimit: "), err.Error())
		})
	}
}

func TestQueueFallbackNilPanics(t *testing.T) {
	t.Parallel()
	assert.PanicsWithValue(t, "redislimit: QueueFallback given a nil queue", func() { QueueFallback(nil) })
	var rq *Queue // a nil pointer of another type than queue.Queue
	assert.PanicsWithValue(t, "redislimit: QueueFallback given a nil queue", func() { QueueFallback(rq) })
}

func TestQueueKeysShareOneHashTag(t *testing.T) {
	t.Parallel()
	c := newClock(0)
	q := newTestQueue(t, startRedis(t).client(t), c, 1, 0, WithPrefix("p:"))
	assert.Equal(t, []string{"p:{api}:queue:holders", "p:{api}:queue:line", "p:{api}:queue:waitexp", "p:{api}:queue:meta", "p:{api}:queue:released"}, q.keys)
}

// A new queue (or one whose data Redis lost) grants nothing for a lease,
// then grants up to n, then refuses or queues.
func TestQueueGrantsUpToNAfterGrace(t *testing.T) {
	t.Parallel()
	c := newClock(0)
	q := newTestQueue(t, startRedis(t).client(t), c, 2, 0)
	_, ok := q.TryAcquire()
	require.False(t, ok, "granted during the lease of grace")
	warm(c)
	r1, ok1 := q.TryAcquire()
	r2, ok2 := q.TryAcquire()
	_, ok3 := q.TryAcquire()
	assert.Equal(t, []bool{true, true, false}, []bool{ok1, ok2, ok3})
	_, err := q.Acquire(context.Background())
	assert.ErrorIs(t, err, queue.ErrFull)
	assert.Equal(t, queue.Stats{InFlight: 2, Waiting: 0, Rejected: 1}, q.Stats())
	assert.Equal(t, queue.Stats{InFlight: 2, Waiting: 0, Rejected: 1}, fleet(t, q))
	r1()
	r2()
	assert.Equal(t, queue.Stats{InFlight: 0, Waiting: 0, Rejected: 1}, fleet(t, q))
}

// A queue of the most permits NewQueue takes, 2^53, grants, queues and
// counts as a small one does.
func TestQueueLargestMaxInFlight(t *testing.T) {
	t.Parallel()
	c := newClock(0)
	q := newTestQueue(t, startRedis(t).client(t), c, 1<<53, 4)
	waiter := acquireAsync(t, context.Background(), q, 1) // in line: the lease of grace
	c.advance(testLease / 2)
	q.renew(context.Background())
	c.advance(testLease / 2)
	q.renew(context.Background()) // warm: promotes the waiter
	a := receive(t, waiter)
	require.NoError(t, a.err)
	release, ok := q.TryAcquire()
	require.True(t, ok)
	assert.Equal(t, queue.Stats{InFlight: 2}, fleet(t, q))
	release()
	a.release()
	assert.Equal(t, queue.Stats{}, fleet(t, q))
}

// A release, however late or repeated, frees only its own permit.
func TestQueueDoubleRelease(t *testing.T) {
	t.Parallel()
	c := newClock(0)
	q := newTestQueue(t, startRedis(t).client(t), c, 1, 0)
	warm(c)
	release, err := q.Acquire(context.Background())
	require.NoError(t, err)
	release()
	release()
	next, err := q.Acquire(context.Background())
	require.NoError(t, err)
	release()
	q.giveUp(q.proc + ":1") // a resent release of the first permit, as go-redis may send
	_, ok := q.TryAcquire()
	assert.False(t, ok, "a repeated release freed another caller's permit")
	assert.Equal(t, 1, fleet(t, q).InFlight)
	next()
	assert.Equal(t, 0, fleet(t, q).InFlight)
}

// Waiters in two processes (two Clients) are served in the order they
// joined the line in Redis, each woken by the release that frees its
// permit, through pub/sub.
func TestQueueFIFOAcrossClients(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	c := newClock(0)
	qs := []*Queue{newTestQueue(t, srv.client(t), c, 1, 10), newTestQueue(t, srv.client(t), c, 1, 10)}
	warm(c)
	holder, err := qs[0].Acquire(context.Background())
	require.NoError(t, err)
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := qs[i%2].Acquire(context.Background())
			errs[i] = err
			if err != nil {
				return
			}
			mu.Lock()
			order = append(order, i) // the permit is exclusive: in grant order
			mu.Unlock()
			release()
		}()
		waitInLine(t, qs[0], i+1)
	}
	_, ok := qs[1].TryAcquire()
	require.False(t, ok, "TryAcquire barged past the line")
	holder()
	wg.Wait()
	assert.Equal(t, make([]error, 6), errs)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, order)
	assert.Equal(t, queue.Stats{}, fleet(t, qs[0]))
}

// hiddenSubscribe hides Subscribe: the Client hears no grant messages.
type hiddenSubscribe struct{ redis.Scripter }

// A waiter whose grant message is lost learns of its permit at its
// Queue's next renewal.
func TestQueueLostGrantMessageRenewalWakes(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	c := newClock(0)
	rdb := srv.client(t)
	deaf := newTestQueue(t, hiddenSubscribe{rdb}, c, 1, 1)
	other := newTestQueue(t, rdb, c, 1, 1)
	warm(c)
	holder, err := other.Acquire(context.Background())
	require.NoError(t, err)
	res := acquireAsync(t, context.Background(), deaf, 1)
	holder()
	require.Equal(t, queue.Stats{InFlight: 1}, fleet(t, other), "the release did not hand the permit over")
	select {
	case <-res:
		t.Fatal("woken without a message")
	default:
	}
	deaf.renew(context.Background())
	a := <-res
	require.NoError(t, a.err)
	assert.Equal(t, queue.Stats{InFlight: 1}, deaf.Stats())
	a.release()
	assert.Equal(t, queue.Stats{}, fleet(t, other))
}

// A holder that stops renewing (its process died) loses its permits once
// the lease runs out, and the next in line gets them from the first call
// after: here, the waiter's own renewal.
func TestQueueDeadHolderLeaseRunsOut(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	c := newClock(0)
	dead := newTestQueue(t, srv.client(t), c, 2, 2)
	live := newTestQueue(t, srv.client(t), c, 2, 2)
	warm(c)
	for range 2 {
		_, err := dead.Acquire(context.Background())
		require.NoError(t, err)
	}
	w1 := acquireAsync(t, context.Background(), live, 1)
	w2 := acquireAsync(t, context.Background(), live, 2)

	tests := []struct {
		name         string
		giveAdvance  time.Duration
		wantInFlight int
		wantWaiting  int
	}{
		{"one renewal period in", testLease / 4, 2, 2},
		{"a microsecond before the lease ends", testLease - testLease/4 - time.Microsecond, 2, 2},
		{"as the lease ends", time.Microsecond, 2, 0}, // the permits went to the waiters
	}
	for _, tt := range tests {
		c.advance(tt.giveAdvance)
		live.renew(context.Background())
		assert.Equal(t, queue.Stats{InFlight: tt.wantInFlight, Waiting: tt.wantWaiting}, fleet(t, live), tt.name)
	}
	for _, w := range []<-chan acquired{w1, w2} {
		a := <-w
		require.NoError(t, a.err)
		a.release()
	}
	assert.Equal(t, queue.Stats{}, fleet(t, live))
}

// A holder that renews keeps its permit past many leases.
func TestQueueRenewalKeepsPermit(t *testing.T) {
	t.Parallel()
	c := newClock(0)
	q := newTestQueue(t, startRedis(t).client(t), c, 1, 0)
	warm(c)
	release, err := q.Acquire(context.Background())
	require.NoError(t, err)
	for range 10 {
		c.advance(testLease / 2)
		q.renew(context.Background())
	}
	assert.Equal(t, 1, fleet(t, q).InFlight)
	_, ok := q.TryAcquire()
	assert.False(t, ok)
	release()
	assert.Equal(t, 0, fleet(t, q).InFlight)
}

// A caller whose context ends in line leaves it, and a permit handed to
// it goes on to the next.
func TestQueueCancelInLine(t *testing.T) {
	t.Parallel()
	c := newClock(0)
	q := newTestQueue(t, startRedis(t).client(t), c, 1, 2)
	warm(c)
	holder, err := q.Acquire(context.Background())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	gone := acquireAsync(t, ctx, q, 1)
	next := acquireAsync(t, context.Background(), q, 2)
	cancel()
	a := <-gone
	assert.ErrorIs(t, a.err, context.Canceled)
	assert.Nil(t, a.release)
	assert.Equal(t, queue.Stats{InFlight: 1, Waiting: 1}, fleet(t, q))
	holder()
	b := <-next
	require.NoError(t, b.err)
	b.release()
	assert.Equal(t, queue.Stats{}, fleet(t, q))
}

// When Redis loses its data, holders claim their permits back and
// waiters their places through their renewals during the lease of grace,
// and nobody is granted a permit meanwhile: the bound holds across the
// loss.
func TestQueueDataLossKeepsBound(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	c := newClock(0)
	rdb := srv.client(t)
	holders := newTestQueue(t, rdb, c, 2, 4)
	other := newTestQueue(t, srv.client(t), c, 2, 4)
	warm(c)
	r1, err := holders.Acquire(context.Background())
	require.NoError(t, err)
	r2, err := holders.Acquire(context.Background())
	require.NoError(t, err)
	first := acquireAsync(t, context.Background(), other, 1)
	require.NoError(t, rdb.FlushAll(context.Background()).Err())

	c.advance(testLease / 2)
	holders.renew(context.Background()) // a lease of grace begins
	other.renew(context.Background())
	assert.Equal(t, queue.Stats{InFlight: 2, Waiting: 1}, fleet(t, other))
	second := acquireAsync(t, context.Background(), other, 2)
	for range 2 { // and ends
		c.advance(testLease / 2)
		holders.renew(context.Background())
		other.renew(context.Background())
	}
	assert.Equal(t, queue.Stats{InFlight: 2, Waiting: 2}, fleet(t, other), "granted past the claimed permits")
	r1()
	a := receive(t, first)
	require.NoError(t, a.err)
	r2()
	b := receive(t, second)
	require.NoError(t, b.err)
	a.release()
	b.release()
	assert.Equal(t, queue.Stats{}, fleet(t, other))
}

// receive returns what ch brings, failing the test after 5 s.
func receive(t *testing.T, ch <-chan acquired) acquired {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(5 * time.Second):
		t.Fatal("no grant")
		return acquired{}
	}
}

func TestQueueFailurePolicy(t *testing.T) {
	t.Parallel()
	local, err := queue.New(1, 0)
	require.NoError(t, err)
	tests := []struct {
		name       string
		givePolicy FailurePolicy
		wantErr    error
		wantTry    bool
	}{
		{"FailClosed", FailClosed, ErrUnavailable, false},
		{"FailOpen", FailOpen, nil, true},
		{"QueueFallback", QueueFallback(local), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startRedis(t)
			c := newClock(0)
			q := newTestQueue(t, srv.client(t), c, 1, 0, WithFailurePolicy(tt.givePolicy), WithTimeout(time.Second))
			srv.kill()
			release, err := q.Acquire(context.Background())
			assert.ErrorIs(t, err, tt.wantErr)
			if release != nil {
				release()
				release()
			}
			tryRelease, ok := q.TryAcquire()
			assert.Equal(t, tt.wantTry, ok)
			if ok {
				tryRelease()
			}
		})
	}
	assert.Equal(t, queue.Stats{}, local.Stats(), "the fallback's slots were not given back")
}

// The fallback queue bounds the process while Redis is away.
func TestQueueFallbackBounds(t *testing.T) {
	t.Parallel()
	local, err := queue.New(1, 0)
	require.NoError(t, err)
	srv := startRedis(t)
	q := newTestQueue(t, srv.client(t), newClock(0), 4, 0, WithFailurePolicy(QueueFallback(local)))
	srv.kill()
	release, err := q.Acquire(context.Background())
	require.NoError(t, err)
	_, err = q.Acquire(context.Background())
	assert.ErrorIs(t, err, queue.ErrFull)
	release()
}

// Close fails the callers in line with ErrClosed and gives their places
// up.
func TestQueueCloseFailsWaiters(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	c := newClock(0)
	q := newTestQueue(t, srv.client(t), c, 1, 1)
	other := newTestQueue(t, srv.client(t), c, 1, 1)
	warm(c)
	holder, err := other.Acquire(context.Background())
	require.NoError(t, err)
	res := acquireAsync(t, context.Background(), q, 1)
	require.NoError(t, q.Close())
	a := <-res
	assert.ErrorIs(t, a.err, ErrClosed)
	assert.Equal(t, queue.Stats{InFlight: 1}, fleet(t, other), "Close left its waiter in line")
	holder()
	assert.Equal(t, queue.Stats{}, fleet(t, other))
	_, err = q.Acquire(context.Background())
	assert.ErrorIs(t, err, ErrClosed)
}

// queueHolderEnv makes TestQueueHolderProcess the holder process of
// TestQueueKilledHolder.
const queueHolderEnv = "REDISLIMIT_TEST_QUEUE_HOLDER"

// TestQueueHolderProcess runs only as the child of TestQueueKilledHolder:
// it takes every permit, says so, and holds them, renewing, until killed.
func TestQueueHolderProcess(t *testing.T) {
	t.Parallel()
	addr := os.Getenv(queueHolderEnv)
	if addr == "" {
		t.Skip("the holder process of TestQueueKilledHolder")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	q, err := NewQueue(rdb, "killed", 2, 0, WithLease(time.Second), WithRenewEvery(250*time.Millisecond))
	require.NoError(t, err)
	for range 2 {
		_, err := q.Acquire(context.Background())
		require.NoError(t, err)
	}
	fmt.Println("holding")
	select {} // until SIGKILL
}

// A holder killed with SIGKILL has its permits back in the fleet once its
// lease runs out; a waiter in another process gets them, woken by its
// own renewal. The time is logged, not asserted: it is lease + renewal
// period by construction (1.25 s here; 2.5 s with the defaults).
func TestQueueKilledHolder(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a process")
	}
	srv := startRedis(t)
	rdb := srv.client(t)
	// Past the lease of grace before the holder starts.
	q, err := NewQueue(rdb, "killed", 2, 2, WithLease(time.Second), WithRenewEvery(250*time.Millisecond))
	require.NoError(t, err)
	defer q.Close()
	warmUp, err := q.Acquire(context.Background())
	require.NoError(t, err)
	warmUp()

	cmd := exec.Command(os.Args[0], "-test.run=^TestQueueHolderProcess$", "-test.v")
	cmd.Env = append(os.Environ(), queueHolderEnv+"="+srv.addr())
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "holding" {
	}
	go func() { _, _ = io.Copy(io.Discard, out); _ = cmd.Wait(); close(exited) }()
	require.Equal(t, 2, fleet(t, q).InFlight)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	got := make([]error, 2)
	var back [2]time.Time
	require.NoError(t, cmd.Process.Kill())
	<-exited
	killed := time.Now()
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := q.Acquire(ctx)
			got[i] = err
			back[i] = time.Now()
			if err == nil {
				release()
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, []error{nil, nil}, got)
	t.Logf("permits back %v and %v after the SIGKILL", back[0].Sub(killed), back[1].Sub(killed))
}

// Many callers in two processes never hold more than n permits at once.
func TestQueueNeverOverAdmits(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	c := newClock(0)
	qs := []*Queue{newTestQueue(t, srv.client(t), c, 3, 64), newTestQueue(t, srv.client(t), c, 3, 64)}
	warm(c)
	var mu sync.Mutex
	held, most := 0, 0
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				release, err := qs[i%2].Acquire(context.Background())
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				held++
				most = max(most, held)
				mu.Unlock()
				mu.Lock()
				held--
				mu.Unlock()
				release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, most, 3)
	assert.Equal(t, queue.Stats{}, fleet(t, qs[0]))
}

// nopLimiter is a limiter that is never called.
type nopLimiter struct{}

func (nopLimiter) Reserve(context.Context, string, int, time.Duration) (*throttle.Reservation, error) {
	return nil, errors.New("not called")
}

// On a three-node cluster, a queue's keys share one slot, and a waiter
// on another client is woken through the cluster's pub/sub.
func TestQueueCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	rdb := startCluster(t)
	other := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rdb.Options().Addrs})
	t.Cleanup(func() { _ = other.Close() })
	c := newClock(0)
	tests := []string{"a", "b", "api.example.com"}
	for _, name := range tests {
		t.Run(name, func(t *testing.T) {
			q, err := NewQueue(rdb, name, 1, 1, c.option(), withoutRenewals(), WithLease(testLease), WithRenewEvery(testLease/4))
			require.NoError(t, err)
			w, err := NewQueue(other, name, 1, 1, c.option(), withoutRenewals(), WithLease(testLease), WithRenewEvery(testLease/4))
			require.NoError(t, err)
			closeAll(t, q, w)
			_, err = q.FleetStats(context.Background())
			require.NoError(t, err)
			warm(c)
			want, err := rdb.ClusterKeySlot(context.Background(), q.keys[0]).Result()
			require.NoError(t, err)
			for _, k := range q.keys[1:] {
				got, err := rdb.ClusterKeySlot(context.Background(), k).Result()
				require.NoError(t, err)
				assert.Equal(t, want, got, k)
			}
			holder, err := q.Acquire(context.Background())
			require.NoError(t, err)
			res := acquireAsync(t, context.Background(), w, 1)
			holder()
			a := receive(t, res) // through pub/sub: w never renews
			require.NoError(t, a.err)
			a.release()
			assert.Equal(t, queue.Stats{}, fleet(t, q))
		})
	}
}

// A permit handed to a waiter whose process died keeps that waiter's
// lease: it comes back when the lease the dead process last renewed runs
// out, not a fresh lease after the hand-over.
func TestQueueDeadWaiterKeepsItsLease(t *testing.T) {
	t.Parallel()
	c := newClock(0)
	q := newTestQueue(t, startRedis(t).client(t), c, 1, 2)
	warm(c)
	holder, err := q.Acquire(context.Background())
	require.NoError(t, err)
	_, err = q.call(context.Background(), "acquire", "ghost:1", 1, 2) // in line, never renewed
	require.NoError(t, err)
	live := acquireAsync(t, context.Background(), q, 2)
	c.advance(testLease / 2)
	q.renew(context.Background())
	holder() // the permit goes to the ghost, first in line
	require.Equal(t, queue.Stats{InFlight: 1, Waiting: 1}, fleet(t, q))

	tests := []struct {
		name        string
		giveAdvance time.Duration
		wantWaiting int
	}{
		{"a microsecond before the ghost's lease ends", testLease/2 - time.Microsecond, 1},
		{"as it ends", time.Microsecond, 0},
	}
	for _, tt := range tests {
		c.advance(tt.giveAdvance)
		q.renew(context.Background())
		assert.Equal(t, queue.Stats{InFlight: 1, Waiting: tt.wantWaiting}, fleet(t, q), tt.name)
	}
	a := receive(t, live)
	require.NoError(t, a.err)
	a.release()
	assert.Equal(t, queue.Stats{}, fleet(t, q))
}

// A caller in line whose Queue cannot reach Redis for a whole lease has
// lost its place: the failure policy answers for it.
func TestQueuePlaceLostWhileRedisAway(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		givePolicy FailurePolicy
		wantErr    error
	}{
		{"FailClosed", FailClosed, ErrUnavailable},
		{"FailOpen", FailOpen, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startRedis(t)
			c := newClock(0)
			q := newTestQueue(t, srv.client(t), c, 1, 1, WithFailurePolicy(tt.givePolicy))
			warm(c)
			_, err := q.Acquire(context.Background())
			require.NoError(t, err)
			res := acquireAsync(t, context.Background(), q, 1)
			q.renew(context.Background())
			srv.kill()
			q.renew(context.Background()) // fails, but within the lease
			c.advance(testLease - time.Microsecond)
			q.renew(context.Background())
			select {
			case <-res:
				t.Fatal("gave up within the lease")
			default:
			}
			c.advance(time.Microsecond)
			q.renew(context.Background())
			a := receive(t, res)
			assert.ErrorIs(t, a.err, tt.wantErr)
			assert.Equal(t, tt.wantErr == nil, a.release != nil)
		})
	}
}
