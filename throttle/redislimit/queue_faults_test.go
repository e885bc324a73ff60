package redislimit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/queue"
)

// Close fails the callers waiting in line with ErrClosed, also when the
// line they wait in is QueueFallback's local queue while Redis is away:
// Close must not wait for them to be served.
func TestQueueCloseFailsFallbackWaiters(t *testing.T) {
	t.Parallel()
	local, err := queue.New(1, 4)
	require.NoError(t, err)
	srv := startRedis(t)
	q := newTestQueue(t, srv.client(t), newClock(0), 4, 4, WithFailurePolicy(QueueFallback(local)), WithTimeout(time.Second))
	srv.kill()
	holder, err := q.Acquire(context.Background()) // the local slot
	require.NoError(t, err)
	defer holder()
	res := make(chan acquired, 1)
	go func() {
		r, err := q.Acquire(context.Background())
		res <- acquired{r, err}
	}()
	require.Eventually(t, func() bool { return local.Stats().Waiting == 1 }, 30*time.Second, time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- q.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		holder() // unblock, so that the test ends
		<-closed
		t.Fatal("Close waited for a caller in the fallback's line")
	}
	a := receive(t, res)
	assert.ErrorIs(t, a.err, ErrClosed)
	assert.Nil(t, a.release)
}

// After the subscription's connection is killed, the Client subscribes
// again, and a waiter that no renewal wakes is still woken by pub/sub.
func TestQueueGrantAfterPubSubKilled(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	admin := srv.client(t)
	c := newClock(0)
	q := newTestQueue(t, srv.client(t), c, 1, 2)
	w := newTestQueue(t, srv.client(t), c, 1, 2)
	warm(c)
	holder, err := q.Acquire(context.Background())
	require.NoError(t, err)
	ch := q.client.channel
	require.Equal(t, int64(2), admin.PubSubNumSub(context.Background(), ch).Val()[ch])
	require.NoError(t, admin.Do(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub").Err())
	require.Eventually(t, func() bool {
		return admin.PubSubNumSub(context.Background(), ch).Val()[ch] == 2
	}, 30*time.Second, 10*time.Millisecond, "the Clients did not subscribe again")
	res := acquireAsync(t, context.Background(), w, 1)
	holder()
	a := receive(t, res) // w never renews: pub/sub only
	require.NoError(t, a.err)
	a.release()
	assert.Equal(t, queue.Stats{}, fleet(t, q))
}

// A grant message lost while the subscription is down costs at most one
// renewal period, with the real renewal goroutine.
func TestQueueGrantLostWhilePubSubDown(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	admin := srv.client(t)
	opts := []Option{WithLease(time.Second), WithRenewEvery(200 * time.Millisecond)}
	q, err := NewQueue(srv.client(t), "lost", 1, 2, opts...)
	require.NoError(t, err)
	defer q.Close()
	w, err := NewQueue(srv.client(t), "lost", 1, 2, opts...)
	require.NoError(t, err)
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holder, err := q.Acquire(ctx) // waits out the lease of grace
	require.NoError(t, err)
	res := acquireAsync(t, ctx, w, 1)
	// Keep the subscriptions down while the permit is handed over.
	stopKill := make(chan struct{})
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for {
			_ = admin.Do(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub").Err()
			select {
			case <-stopKill:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	holder()
	a := receive(t, res)
	close(stopKill)
	<-killed
	require.NoError(t, a.err)
	a.release()
	assert.Equal(t, queue.Stats{}, fleet(t, q))
}

// stress runs workers on qs, each taking and releasing permits until
// stop, and returns the most held at once and the errors by kind.
func stress(qs []*Queue, workers int, stop <-chan struct{}) (most int, errs map[string]int) {
	var mu sync.Mutex
	held := 0
	errs = map[string]int{}
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				release, err := qs[i%len(qs)].Acquire(ctx)
				cancel()
				if err != nil {
					mu.Lock()
					errs[err.Error()]++
					mu.Unlock()
					time.Sleep(5 * time.Millisecond)
					continue
				}
				mu.Lock()
				held++
				most = max(most, held)
				mu.Unlock()
				time.Sleep(time.Duration(1+i%5) * time.Millisecond)
				mu.Lock()
				held--
				mu.Unlock()
				release()
			}
		}()
	}
	wg.Wait()
	return most, errs
}

// SIGSTOP of Redis for less than a lease, and a restart with no data,
// never let the fleet hold more than n permits, and nothing hangs.
func TestQueueBoundAcrossStopAndRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real time")
	}
	srv := startRedis(t)
	const n = 3
	var qs []*Queue
	for range 3 {
		q, err := NewQueue(srv.client(t), "stress", n, 64, WithLease(2*time.Second), WithRenewEvery(250*time.Millisecond))
		require.NoError(t, err)
		qs = append(qs, q)
	}
	stop := make(chan struct{})
	type result struct {
		most int
		errs map[string]int
	}
	done := make(chan result, 1)
	go func() {
		m, e := stress(qs, 12, stop)
		done <- result{m, e}
	}()
	time.Sleep(3 * time.Second)
	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGSTOP))
	time.Sleep(time.Second)
	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGCONT))
	time.Sleep(2 * time.Second)
	srv.kill()
	srv.start()
	time.Sleep(4 * time.Second)
	close(stop)
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("workers hang")
	}
	t.Logf("most %d, errors %v", r.most, r.errs)
	assert.LessOrEqual(t, r.most, n)
	for _, q := range qs {
		assert.Equal(t, 0, q.Stats().InFlight)
		assert.Equal(t, 0, q.Stats().Waiting)
		require.NoError(t, q.Close())
	}
}

const queueDefaultHolderEnv = "REDISLIMIT_TEST_QUEUE_DEFAULT_HOLDER"

// TestQueueDefaultHolderProcess runs only as the child of
// TestQueueKilledHolderDefaults: with the default lease and renewal, it
// takes both permits and a place in line, and holds them until killed.
func TestQueueDefaultHolderProcess(t *testing.T) {
	addr := os.Getenv(queueDefaultHolderEnv)
	if addr == "" {
		t.Skip("the holder process of TestQueueKilledHolderDefaults")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	q, err := NewQueue(rdb, "killed-defaults", 2, 4)
	require.NoError(t, err)
	for range 2 {
		_, err := q.Acquire(context.Background())
		require.NoError(t, err)
	}
	go func() { _, _ = q.Acquire(context.Background()) }()
	require.Eventually(t, func() bool { return q.Stats().Waiting == 1 }, 30*time.Second, time.Millisecond)
	fmt.Println("holding")
	select {}
}

func TestQueueKilledHolderDefaults(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a process")
	}
	srv := startRedis(t)
	rdb := srv.client(t)
	q, err := NewQueue(rdb, "killed-defaults", 2, 4)
	require.NoError(t, err)
	defer q.Close()
	warmUp, err := q.Acquire(context.Background())
	require.NoError(t, err)
	warmUp()
	cmd := exec.Command(os.Args[0], "-test.run=^TestQueueDefaultHolderProcess$", "-test.v")
	cmd.Env = append(os.Environ(), queueDefaultHolderEnv+"="+srv.addr())
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "holding" {
	}
	go func() { _, _ = io.Copy(io.Discard, out); _ = cmd.Wait(); close(exited) }()
	require.Equal(t, queue.Stats{InFlight: 2, Waiting: 1}, fleet(t, q))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	got := make([]error, 2)
	var back [2]time.Duration
	origin := time.Now()
	started := make(chan struct{}, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			release, err := q.Acquire(ctx)
			got[i] = err
			if err == nil {
				back[i] = time.Since(origin)
				release()
			}
		}()
	}
	<-started
	<-started
	waitInLine(t, q, 3)
	require.NoError(t, cmd.Process.Kill())
	<-exited
	killed := time.Since(origin)
	wg.Wait()
	assert.Equal(t, []error{nil, nil}, got)
	t.Logf("permits back %v and %v after the SIGKILL", back[0]-killed, back[1]-killed)
	assert.Equal(t, queue.Stats{}, fleet(t, q))
}

// A caller whose place in line ran out while its process could not renew
// (the process stalled for a lease: a long GC pause, a frozen container),
// while Redis answers all along, is no outage: FailOpen must not let it
// through past the holders, over maxInFlight.
func TestQueuePlaceExpiredWithRedisUpIsNoOutage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		givePolicy FailurePolicy
	}{
		{"FailClosed", FailClosed},
		{"FailOpen", FailOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startRedis(t)
			c := newClock(0)
			holders := newTestQueue(t, srv.client(t), c, 1, 1)
			q := newTestQueue(t, srv.client(t), c, 1, 1, WithFailurePolicy(tt.givePolicy))
			warm(c)
			holder, err := holders.Acquire(context.Background())
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res := acquireAsync(t, ctx, q, 1)
			// q's process stalls for a lease; the holder's renews.
			for range 4 {
				c.advance(testLease / 4)
				holders.renew(context.Background())
			}
			assert.Equal(t, [2]int{1, 0}, inLine(t, holders), "the stalled caller's place ran out")
			q.renew(context.Background()) // the process runs again: Redis answers
			select {
			case a := <-res:
				if a.err == nil {
					a.release()
				}
				t.Fatalf("the caller went on with err %v while the permit is held", a.err)
			case <-time.After(100 * time.Millisecond):
			}
			holder()
			q.renew(context.Background())
			a := receive(t, res)
			require.NoError(t, a.err, "the caller should have joined the line again")
			a.release()
			assert.Equal(t, [2]int{}, inLine(t, holders))
		})
	}
}

// With every permit held, callers from several Clients at once: exactly
// maxWaiting wait, the rest get ErrFull at once.
func TestQueueLineBoundAcrossClients(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	c := newClock(0)
	qs := []*Queue{newTestQueue(t, srv.client(t), c, 2, 3), newTestQueue(t, srv.client(t), c, 2, 3), newTestQueue(t, srv.client(t), c, 2, 3)}
	warm(c)
	var holders []func()
	for range 2 {
		r, err := qs[0].Acquire(context.Background())
		require.NoError(t, err)
		holders = append(holders, r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	full, other := 0, 0
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := qs[i%3].Acquire(ctx)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, queue.ErrFull):
				full++
			case err == nil:
				r()
				other++
			default:
				other++
			}
		}()
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return full == 27
	}, 30*time.Second, time.Millisecond)
	assert.Equal(t, [2]int{2, 3}, inLine(t, qs[0]))
	w := 0
	for _, q := range qs {
		w += q.Stats().Waiting
	}
	assert.Equal(t, 3, w)
	for _, r := range holders {
		r()
	}
	cancel()
	wg.Wait()
	assert.Equal(t, 3, other)
	assert.Equal(t, [2]int{}, inLine(t, qs[0]))
}

// Under QueueFallback, Stats counts the fallback's slots held, its
// callers in line and its refusals, as it does Redis's.
func TestQueueStatsUnderFallback(t *testing.T) {
	t.Parallel()
	local, err := queue.New(1, 1)
	require.NoError(t, err)
	srv := startRedis(t)
	q := newTestQueue(t, srv.client(t), newClock(0), 4, 4, WithFailurePolicy(QueueFallback(local)), WithTimeout(time.Second))
	srv.kill()
	release, err := q.Acquire(context.Background())
	require.NoError(t, err)
	assert.Equal(t, queue.Stats{InFlight: 1}, q.Stats())
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan acquired, 1)
	go func() {
		r, err := q.Acquire(ctx)
		res <- acquired{r, err}
	}()
	require.Eventually(t, func() bool { return local.Stats().Waiting == 1 }, 30*time.Second, time.Millisecond)
	assert.Equal(t, queue.Stats{InFlight: 1, Waiting: 1}, q.Stats())
	_, err = q.Acquire(context.Background())
	assert.ErrorIs(t, err, queue.ErrFull)
	assert.Equal(t, queue.Stats{InFlight: 1, Waiting: 1, Rejected: 1}, q.Stats())
	cancel()
	a := receive(t, res)
	assert.ErrorIs(t, a.err, context.Canceled)
	release()
	release()
	assert.Equal(t, queue.Stats{Rejected: 1}, q.Stats())
	assert.Equal(t, queue.Stats{Rejected: 1}, local.Stats())
}

// A caller in line on a Queue whose shared Client was closed first (a
// shutdown in the wrong order) fails with ErrClosed: a closed Client is
// no outage, and FailOpen must not let it through.
func TestQueueWaiterOnClosedClient(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	c := newClock(0)
	holders := newTestQueue(t, srv.client(t), c, 1, 1)
	rdb := srv.client(t)
	client, err := NewClient(rdb, c.option())
	require.NoError(t, err)
	q, err := NewQueue(rdb, "api", 1, 1, WithClient(client), withoutRenewals(), WithLease(testLease), WithRenewEvery(testLease/4), WithFailurePolicy(FailOpen))
	require.NoError(t, err)
	defer q.Close()
	warm(c)
	holder, err := holders.Acquire(context.Background())
	require.NoError(t, err)
	defer holder()
	res := acquireAsync(t, context.Background(), q, 1)
	require.NoError(t, client.Close())
	q.renew(context.Background())
	c.advance(testLease)
	q.renew(context.Background())
	a := receive(t, res)
	if a.release != nil {
		a.release()
	}
	assert.ErrorIs(t, a.err, ErrClosed)
	assert.Nil(t, a.release, "FailOpen let a caller through on a closed Client")
}

// Under QueueFallback, a caller waiting in the local line while Redis is
// away asks Redis again every renewal period: once Redis is back it waits
// in Redis's line, and the local line hands out no more slots. Left in
// the local line, it was handed the slot a local holder gave back after
// Redis was back, while another caller held Redis's only permit: 2 in
// flight of 1 (found by a user's test).
func TestQueueFallbackLineGoesBackToRedis(t *testing.T) {
	t.Parallel()
	local, err := queue.New(1, 4)
	require.NoError(t, err)
	srv := startRedis(t)
	q, err := NewQueue(srv.client(t), "api", 1, 4, WithLease(testLease), WithRenewEvery(testLease/4),
		WithFailurePolicy(QueueFallback(local)), WithTimeout(200*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	srv.kill()
	holder, err := q.Acquire(context.Background()) // the local slot
	require.NoError(t, err)
	waiter := make(chan acquired, 1)
	go func() {
		r, err := q.Acquire(context.Background())
		waiter <- acquired{r, err}
	}()
	require.Eventually(t, func() bool { return local.Stats().Waiting == 1 }, 30*time.Second, time.Millisecond)
	srv.start() // back, empty
	var w acquired
	select {
	case w = <-waiter: // Redis's permit, once the breaker lets a call through and the new state grants
	case <-time.After(30 * time.Second):
		t.Fatal("the caller in the local line did not go back to Redis")
	}
	require.NoError(t, w.err)

	next := make(chan acquired, 1)
	go func() {
		r, err := q.Acquire(context.Background())
		next <- acquired{r, err}
	}()
	holder() // the local slot comes back: nobody waits for it there
	select {
	case a := <-next:
		if a.release != nil {
			a.release()
		}
		t.Fatalf("admitted while Redis's only permit is held (err %v)", a.err)
	case <-time.After(testLease):
	}
	assert.Equal(t, queue.Stats{}, local.Stats(), "the local line is empty")
	w.release()
	n := receive(t, next)
	require.NoError(t, n.err)
	n.release()
}

// A caller in Redis's line whose renewals fail for a lease gets an
// UnavailableError that says so once (found by a user's test: "redis
// unavailable: redislimit: redis unavailable: ...").
func TestQueueWaiterLostToAnOutageSaysItOnce(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	q, err := NewQueue(srv.client(t), "api", 1, 4, WithLease(testLease), WithRenewEvery(testLease/4), WithTimeout(200*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	holder, err := q.Acquire(context.Background())
	require.NoError(t, err)
	defer holder()
	waiter := make(chan acquired, 1)
	go func() {
		r, err := q.Acquire(context.Background())
		waiter <- acquired{r, err}
	}()
	require.Eventually(t, func() bool { return q.Stats().Waiting == 1 }, 30*time.Second, time.Millisecond)
	srv.kill()
	var w acquired
	select {
	case w = <-waiter:
	case <-time.After(30 * time.Second):
		t.Fatal("the caller in line was not told of the outage")
	}
	require.ErrorIs(t, w.err, ErrUnavailable)
	assert.Equal(t, 1, strings.Count(w.err.Error(), "redis unavailable"), "said once: %v", w.err)
}
