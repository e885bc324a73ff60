package redislimit

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/queue"
)

// A Transport given a shared Queue holds the permit until the body is
// closed, or until the request's context ends, and a full line refuses
// at once with queue.ErrFull.
func TestQueueThroughTransport(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	c := newClock(0)
	qa := newTestQueue(t, srv.client(t), c, 1, 1)
	qb := newTestQueue(t, srv.client(t), c, 1, 1)
	warm(c)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello")
	}))
	defer upstream.Close()
	a := egress.NewClient(egress.WithQueue(qa))
	b := egress.NewClient(egress.WithQueue(qb))
	defer a.CloseIdleConnections()
	defer b.CloseIdleConnections()

	resp, err := a.Get(upstream.URL)
	require.NoError(t, err)
	assert.Equal(t, [2]int{1, 0}, inLine(t, qa), "held while the body is open")

	type got struct {
		resp *http.Response
		err  error
	}
	res := make(chan got, 1)
	go func() {
		r, err := b.Get(upstream.URL)
		res <- got{r, err}
	}()
	waitInLine(t, qa, 1)
	// The line is full: a third caller is refused at once.
	_, err = a.Get(upstream.URL)
	assert.True(t, errors.Is(err, queue.ErrFull), "got %v", err)

	require.NoError(t, resp.Body.Close())
	var g got
	select {
	case g = <-res:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken by the body's close")
	}
	require.NoError(t, g.err)
	body, err := io.ReadAll(g.resp.Body) // EOF releases
	require.NoError(t, err)
	assert.Equal(t, "hello", string(body))
	assert.Equal(t, [2]int{}, inLine(t, qa))
	_ = g.resp.Body.Close()

	// The context's end releases a body left open.
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, upstream.URL, nil)
	require.NoError(t, err)
	resp, err = a.Do(req)
	require.NoError(t, err)
	assert.Equal(t, [2]int{1, 0}, inLine(t, qa))
	cancel()
	require.Eventually(t, func() bool { return inLine(t, qa) == [2]int{} }, 10*time.Second, time.Millisecond)
	assert.Equal(t, queue.Stats{Rejected: 1}, qa.Stats())
	_ = resp.Body.Close()
	assert.Equal(t, [2]int{}, inLine(t, qa))
}

// inLine returns the fleet's permits held and callers in line.
func inLine(t *testing.T, q *Queue) [2]int {
	s := fleet(t, q)
	return [2]int{s.InFlight, s.Waiting}
}

// queueScriptCounter counts the scripts a redis client runs.
type queueScriptCounter struct{ n atomic.Int64 }

func (h *queueScriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *queueScriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *queueScriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A request through a Transport costs the shared queue's two round
// trips, an acquire and a release, also when it waits for its permit
// (issue 16: at most 2 per request).
func TestQueueTransportRoundTrips(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	c := newClock(0)
	rdb := srv.client(t)
	q := newTestQueue(t, rdb, c, 1, 64)
	warm(c)
	var h queueScriptCounter
	rdb.AddHook(&h)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond)
		_, _ = io.WriteString(w, "hello")
	}))
	defer upstream.Close()
	client := egress.NewClient(egress.WithQueue(q))
	defer client.CloseIdleConnections()
	const workers, each = 4, 10
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				resp, err := client.Get(upstream.URL)
				if !assert.NoError(t, err) {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	perRequest := float64(h.n.Load()) / (workers * each)
	t.Logf("%.2f scripts per request", perRequest)
	assert.LessOrEqual(t, perRequest, 2.0)
}

// Through a Transport, Observer.Waited hears of a request that waited
// for the shared queue's permit, and not of one that took a free one.
func TestQueueTransportWaited(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	c := newClock(0)
	q := newTestQueue(t, srv.client(t), c, 1, 4)
	warm(c)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello")
	}))
	defer upstream.Close()
	var waited atomic.Int64
	client := egress.NewClient(egress.WithQueue(q), egress.WithObserver(&egress.Observer{
		Waited: func(w egress.WaitInfo) {
			if w.Queue > 0 {
				waited.Add(1)
			}
		},
	}))
	defer client.CloseIdleConnections()
	first, err := client.Get(upstream.URL)
	require.NoError(t, err)
	assert.Equal(t, int64(0), waited.Load(), "a free permit is no wait")
	done := make(chan error, 1)
	go func() {
		resp, err := client.Get(upstream.URL)
		if err == nil {
			_ = resp.Body.Close()
		}
		done <- err
	}()
	waitInLine(t, q, 1)
	require.NoError(t, first.Body.Close())
	require.NoError(t, <-done)
	assert.Equal(t, int64(1), waited.Load())
}
