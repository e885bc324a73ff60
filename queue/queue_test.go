package queue_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/egress-go/egress/queue"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func newQueue(t *testing.T, maxInFlight, maxWaiting int) *queue.Queue {
	t.Helper()
	q, err := queue.New(maxInFlight, maxWaiting)
	require.NoError(t, err)
	return q
}

// recorder notes the order in which callers got a slot.
type recorder struct {
	mu  sync.Mutex
	ids []int
}

func (r *recorder) add(id int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
}

func (r *recorder) got() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int{}, r.ids...)
}

// goAcquire calls q.Acquire(ctx) in a new goroutine. If it gets a slot, it
// records id and releases the slot at once. The returned channel receives
// Acquire's error.
func goAcquire(ctx context.Context, q *queue.Queue, rec *recorder, id int) <-chan error {
	errc := make(chan error, 1)
	go func() {
		release, err := q.Acquire(ctx)
		if err == nil {
			rec.add(id)
			release()
		}
		errc <- err
	}()
	return errc
}

// seq returns the ints from lo to hi-1.
func seq(lo, hi int) []int {
	s := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		s = append(s, i)
	}
	return s
}

func TestNew(t *testing.T) {
	tests := []struct {
		name            string
		giveMaxInFlight int
		giveMaxWaiting  int
	}{
		{name: "one slot, no waiting", giveMaxInFlight: 1, giveMaxWaiting: 0},
		{name: "several slots", giveMaxInFlight: 4, giveMaxWaiting: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := queue.New(tt.giveMaxInFlight, tt.giveMaxWaiting)
			require.NoError(t, err)
			assert.Equal(t, queue.Stats{}, q.Stats())

			for range tt.giveMaxInFlight {
				_, ok := q.TryAcquire()
				require.True(t, ok)
			}
			_, ok := q.TryAcquire()
			assert.False(t, ok, "a slot beyond maxInFlight")
			assert.Equal(t, queue.Stats{InFlight: tt.giveMaxInFlight}, q.Stats())
		})
	}
}

func TestNewInvalid(t *testing.T) {
	tests := []struct {
		name            string
		giveMaxInFlight int
		giveMaxWaiting  int
		wantErr         string
	}{
		{
			name:            "no slots",
			giveMaxInFlight: 0,
			giveMaxWaiting:  1,
			wantErr:         "queue: maxInFlight must be at least 1, got 0",
		},
		{
			name:            "negative slots",
			giveMaxInFlight: -3,
			giveMaxWaiting:  0,
			wantErr:         "queue: maxInFlight must be at least 1, got -3",
		},
		{
			name:            "negative waiting",
			giveMaxInFlight: 1,
			giveMaxWaiting:  -1,
			wantErr:         "queue: maxWaiting must be at least 0, got -1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := queue.New(tt.giveMaxInFlight, tt.giveMaxWaiting)
			assert.EqualError(t, err, tt.wantErr)
			assert.Nil(t, q)
		})
	}
}

func TestTryAcquire(t *testing.T) {
	q := newQueue(t, 2, 0)

	r1, ok := q.TryAcquire()
	require.True(t, ok)
	r2, ok := q.TryAcquire()
	require.True(t, ok)

	r3, ok := q.TryAcquire()
	assert.False(t, ok)
	assert.Nil(t, r3)
	assert.Equal(t, queue.Stats{InFlight: 2}, q.Stats(), "a failed TryAcquire is not a rejection")

	r1()
	assert.Equal(t, queue.Stats{InFlight: 1}, q.Stats())
	r4, ok := q.TryAcquire()
	require.True(t, ok)

	r2()
	r4()
	assert.Equal(t, queue.Stats{}, q.Stats())
}

func TestAcquireFree(t *testing.T) {
	q := newQueue(t, 2, 0)

	r1, err := q.Acquire(t.Context())
	require.NoError(t, err)
	r2, err := q.Acquire(t.Context())
	require.NoError(t, err)
	assert.Equal(t, queue.Stats{InFlight: 2}, q.Stats())

	r1()
	r2()
	assert.Equal(t, queue.Stats{}, q.Stats())
}

func TestAcquireDoneContext(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()

	tests := []struct {
		name    string
		giveCtx context.Context
		wantErr error
	}{
		{name: "canceled", giveCtx: canceled, wantErr: context.Canceled},
		{name: "deadline passed", giveCtx: expired, wantErr: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newQueue(t, 1, 1)

			release, err := q.Acquire(tt.giveCtx)
			assert.ErrorIs(t, err, tt.wantErr)
			assert.Nil(t, release)
			assert.Equal(t, queue.Stats{}, q.Stats(), "a free slot must not be taken")
		})
	}
}

func TestAcquireFull(t *testing.T) {
	tests := []struct {
		name            string
		giveMaxInFlight int
		giveMaxWaiting  int
	}{
		{name: "no waiting allowed", giveMaxInFlight: 1, giveMaxWaiting: 0},
		{name: "no waiting, several slots", giveMaxInFlight: 3, giveMaxWaiting: 0},
		{name: "one waiter", giveMaxInFlight: 1, giveMaxWaiting: 1},
		{name: "several waiters", giveMaxInFlight: 2, giveMaxWaiting: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newQueue(t, tt.giveMaxInFlight, tt.giveMaxWaiting)
				var held []func()
				for range tt.giveMaxInFlight {
					release, ok := q.TryAcquire()
					require.True(t, ok)
					held = append(held, release)
				}
				var rec recorder
				var waiting []<-chan error
				for i := range tt.giveMaxWaiting {
					waiting = append(waiting, goAcquire(t.Context(), q, &rec, i))
					synctest.Wait()
				}

				// Inside the bubble, an Acquire that blocked would be
				// reported as a deadlock rather than hang the test.
				release, err := q.Acquire(t.Context())
				assert.ErrorIs(t, err, queue.ErrFull)
				assert.Nil(t, release)
				_, err = q.Acquire(t.Context())
				assert.ErrorIs(t, err, queue.ErrFull)
				assert.Equal(t, queue.Stats{
					InFlight: tt.giveMaxInFlight,
					Waiting:  tt.giveMaxWaiting,
					Rejected: 2,
				}, q.Stats())

				for _, release := range held {
					release()
				}
				for _, errc := range waiting {
					assert.NoError(t, <-errc)
				}
				// Several slots serve waiters in parallel; TestAcquireFIFO
				// checks the order.
				assert.ElementsMatch(t, seq(0, tt.giveMaxWaiting), rec.got())
				assert.Equal(t, queue.Stats{Rejected: 2}, q.Stats())
			})
		})
	}
}

func TestAcquireFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 20
		q := newQueue(t, 1, n)
		hold, ok := q.TryAcquire()
		require.True(t, ok)

		var rec recorder
		var waiting []<-chan error
		for i := range n {
			waiting = append(waiting, goAcquire(t.Context(), q, &rec, i))
			synctest.Wait() // i is in line before i+1 starts
		}
		assert.Equal(t, queue.Stats{InFlight: 1, Waiting: n}, q.Stats())

		hold()
		for _, errc := range waiting {
			assert.NoError(t, <-errc)
		}
		assert.Equal(t, seq(0, n), rec.got())
		assert.Equal(t, queue.Stats{}, q.Stats())
	})
}

func TestNoBarging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t, 1, 2)
		hold, ok := q.TryAcquire()
		require.True(t, ok)

		var rec recorder
		finish := make(chan struct{})
		first := make(chan error, 1)
		go func() {
			release, err := q.Acquire(t.Context())
			if err == nil {
				rec.add(0)
				<-finish
				release()
			}
			first <- err
		}()
		synctest.Wait()

		// The slot goes to the waiter at once, before it even runs, so
		// a newcomer cannot take it in between.
		hold()
		release, ok := q.TryAcquire()
		assert.False(t, ok, "TryAcquire overtook a waiter")
		assert.Nil(t, release)
		assert.Equal(t, queue.Stats{InFlight: 1}, q.Stats())

		second := goAcquire(t.Context(), q, &rec, 1)
		synctest.Wait()
		assert.Equal(t, queue.Stats{InFlight: 1, Waiting: 1}, q.Stats())

		close(finish)
		assert.NoError(t, <-first)
		assert.NoError(t, <-second)
		assert.Equal(t, []int{0, 1}, rec.got())
		assert.Equal(t, queue.Stats{}, q.Stats())
	})
}

func TestAcquireCancelWhileWaiting(t *testing.T) {
	const timeout = time.Second
	tests := []struct {
		name       string
		giveAhead  int // waiters in line before the one that gives up
		giveBehind int // waiters in line after it
		giveEnd    func(cancel context.CancelFunc)
		wantErr    error
	}{
		{
			name:    "canceled, alone",
			giveEnd: func(cancel context.CancelFunc) { cancel() },
			wantErr: context.Canceled,
		},
		{
			name:       "canceled, at the front",
			giveBehind: 2,
			giveEnd:    func(cancel context.CancelFunc) { cancel() },
			wantErr:    context.Canceled,
		},
		{
			name:       "canceled, in the middle",
			giveAhead:  2,
			giveBehind: 2,
			giveEnd:    func(cancel context.CancelFunc) { cancel() },
			wantErr:    context.Canceled,
		},
		{
			name:      "canceled, at the back",
			giveAhead: 2,
			giveEnd:   func(cancel context.CancelFunc) { cancel() },
			wantErr:   context.Canceled,
		},
		{
			name:       "deadline passes, at the front",
			giveBehind: 2,
			giveEnd:    func(context.CancelFunc) { time.Sleep(timeout) },
			wantErr:    context.DeadlineExceeded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newQueue(t, 1, tt.giveAhead+1+tt.giveBehind)
				hold, ok := q.TryAcquire()
				require.True(t, ok)

				var rec recorder
				var waiting []<-chan error
				for i := range tt.giveAhead {
					waiting = append(waiting, goAcquire(t.Context(), q, &rec, i))
					synctest.Wait()
				}
				before := q.Stats()

				ctx, cancel := context.WithTimeout(t.Context(), timeout)
				defer cancel()
				gaveUp := goAcquire(ctx, q, &rec, -1)
				synctest.Wait()
				for i := range tt.giveBehind {
					waiting = append(waiting, goAcquire(t.Context(), q, &rec, tt.giveAhead+i))
					synctest.Wait()
				}

				tt.giveEnd(cancel)
				synctest.Wait()
				assert.ErrorIs(t, <-gaveUp, tt.wantErr)
				assert.Equal(t, queue.Stats{
					InFlight: before.InFlight,
					Waiting:  before.Waiting + tt.giveBehind,
					Rejected: before.Rejected,
				}, q.Stats(), "as if the call had never been made")

				hold()
				for _, errc := range waiting {
					assert.NoError(t, <-errc)
				}
				assert.Equal(t, seq(0, tt.giveAhead+tt.giveBehind), rec.got())
				assert.Equal(t, queue.Stats{}, q.Stats())
			})
		})
	}
}

// TestAcquireCancelAsGranted ends a waiter's context and hands it the slot
// before it can run, so that it wakes up with both done. It must fail and
// pass the slot on to the next waiter.
func TestAcquireCancelAsGranted(t *testing.T) {
	for range 50 {
		synctest.Test(t, func(t *testing.T) {
			q := newQueue(t, 1, 2)
			hold, ok := q.TryAcquire()
			require.True(t, ok)

			var rec recorder
			ctx, cancel := context.WithCancel(t.Context())
			first := goAcquire(ctx, q, &rec, 0)
			synctest.Wait()
			second := goAcquire(t.Context(), q, &rec, 1)
			synctest.Wait()

			cancel()
			hold()
			assert.ErrorIs(t, <-first, context.Canceled)
			assert.NoError(t, <-second)
			assert.Equal(t, []int{1}, rec.got())
			assert.Equal(t, queue.Stats{}, q.Stats())
		})
	}
}

func TestReleaseTwice(t *testing.T) {
	t.Run("free slot", func(t *testing.T) {
		q := newQueue(t, 1, 0)
		release, ok := q.TryAcquire()
		require.True(t, ok)
		release()
		release()
		assert.Equal(t, queue.Stats{}, q.Stats())

		// A stale release must not free a slot granted since.
		next, ok := q.TryAcquire()
		require.True(t, ok)
		release()
		assert.Equal(t, queue.Stats{InFlight: 1}, q.Stats())
		_, ok = q.TryAcquire()
		assert.False(t, ok)
		next()
		assert.Equal(t, queue.Stats{}, q.Stats())
	})

	t.Run("slot handed to a waiter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			q := newQueue(t, 1, 1)
			hold, ok := q.TryAcquire()
			require.True(t, ok)

			got := make(chan func(), 1)
			go func() {
				release, err := q.Acquire(t.Context())
				assert.NoError(t, err)
				got <- release
			}()
			synctest.Wait()

			hold()
			next := <-got
			hold()
			assert.Equal(t, queue.Stats{InFlight: 1}, q.Stats())
			_, ok = q.TryAcquire()
			assert.False(t, ok)

			next()
			next()
			assert.Equal(t, queue.Stats{}, q.Stats())
		})
	})

	t.Run("concurrent", func(t *testing.T) {
		q := newQueue(t, 1, 0)
		release, ok := q.TryAcquire()
		require.True(t, ok)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(release)
		}
		wg.Wait()
		assert.Equal(t, queue.Stats{}, q.Stats())
	})
}

func TestAllocs(t *testing.T) {
	q := newQueue(t, 1, 0)
	ctx := context.Background()

	tests := []struct {
		name       string
		give       func()
		wantAllocs float64
	}{
		{
			name: "TryAcquire",
			give: func() {
				release, _ := q.TryAcquire()
				release()
			},
			wantAllocs: 1,
		},
		{
			name: "Acquire",
			give: func() {
				release, _ := q.Acquire(ctx)
				release()
			},
			wantAllocs: 1,
		},
		{
			name: "TryAcquireSlot",
			give: func() {
				s, _ := q.TryAcquireSlot()
				s.Release()
			},
		},
		{
			name: "AcquireSlot",
			give: func() {
				s, _ := q.AcquireSlot(ctx)
				s.Release()
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.LessOrEqual(t, testing.AllocsPerRun(100, tt.give), tt.wantAllocs)
		})
	}
}

func TestSlot(t *testing.T) {
	t.Run("zero", func(t *testing.T) {
		q := newQueue(t, 1, 0)
		hold, ok := q.TryAcquireSlot()
		require.True(t, ok)
		queue.Slot{}.Release()
		assert.Equal(t, queue.Stats{InFlight: 1}, q.Stats())
		hold.Release()
		assert.Equal(t, queue.Stats{}, q.Stats())
	})

	t.Run("copies release once", func(t *testing.T) {
		q := newQueue(t, 1, 0)
		s, ok := q.TryAcquireSlot()
		require.True(t, ok)
		copied := s
		_, ok = q.TryAcquireSlot()
		assert.False(t, ok, "the slot is held")
		copied.Release()
		s.Release()
		assert.Equal(t, queue.Stats{}, q.Stats())

		// A stale Slot must not free a slot granted since.
		next, ok := q.TryAcquireSlot()
		require.True(t, ok)
		s.Release()
		assert.Equal(t, queue.Stats{InFlight: 1}, q.Stats())
		next.Release()
		assert.Equal(t, queue.Stats{}, q.Stats())
	})

	t.Run("AcquireSlot waits in line", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			q := newQueue(t, 1, 1)
			hold, err := q.AcquireSlot(t.Context())
			require.NoError(t, err)

			got := make(chan queue.Slot, 1)
			go func() {
				s, err := q.AcquireSlot(t.Context())
				assert.NoError(t, err)
				got <- s
			}()
			synctest.Wait()
			assert.Equal(t, queue.Stats{InFlight: 1, Waiting: 1}, q.Stats())
			_, err = q.AcquireSlot(t.Context())
			assert.ErrorIs(t, err, queue.ErrFull)

			hold.Release()
			next := <-got
			hold.Release()
			assert.Equal(t, queue.Stats{InFlight: 1, Rejected: 1}, q.Stats())
			next.Release()
			assert.Equal(t, queue.Stats{Rejected: 1}, q.Stats())
		})
	})
}

// TestStress runs many goroutines that take and release slots, some giving up
// at random, and checks that the bound always holds and that everything is
// given back.
func TestStress(t *testing.T) {
	const (
		maxInFlight = 4
		maxWaiting  = 16
		goroutines  = 64
		rounds      = 200
	)
	q := newQueue(t, maxInFlight, maxWaiting)

	var (
		inFlight atomic.Int64
		peak     atomic.Int64
		full     atomic.Uint64
		wg       sync.WaitGroup
	)
	hold := func(release func()) {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		runtime.Gosched()
		inFlight.Add(-1)
		release()
		if rand.IntN(4) == 0 {
			release() // a no-op
		}
	}
	for range goroutines {
		wg.Go(func() {
			for range rounds {
				if rand.IntN(4) == 0 {
					if release, ok := q.TryAcquire(); ok {
						hold(release)
					}
					continue
				}
				ctx, cancel := context.WithCancel(t.Context())
				if rand.IntN(3) == 0 {
					ctx, cancel = context.WithTimeout(t.Context(), time.Duration(rand.IntN(50))*time.Microsecond)
				}
				release, err := q.Acquire(ctx)
				cancel()
				switch {
				case err == nil:
					hold(release)
				case errors.Is(err, queue.ErrFull):
					full.Add(1)
				default:
					assert.ErrorIs(t, err, context.DeadlineExceeded)
				}
			}
		})
	}
	wg.Wait()

	assert.LessOrEqual(t, peak.Load(), int64(maxInFlight))
	assert.Equal(t, queue.Stats{Rejected: full.Load()}, q.Stats())

	// Every slot is free again.
	var held []func()
	for range maxInFlight {
		release, ok := q.TryAcquire()
		require.True(t, ok)
		held = append(held, release)
	}
	for _, release := range held {
		release()
	}
}

// A nil context panicked in Acquire (nil pointer dereference on
// ctx.Done()), where every limiter in package throttle returns an error
// for it. Acquire returns an error, takes nothing, and counts nothing.
func TestAcquireNilContext(t *testing.T) {
	q := newQueue(t, 1, 1)
	var ctx context.Context // a caller's unset field
	release, err := q.Acquire(ctx)
	require.Error(t, err)
	assert.Nil(t, release)
	_, err = q.AcquireSlot(ctx)
	require.Error(t, err)
	st := q.Stats()
	assert.Zero(t, st.InFlight)
	assert.Zero(t, st.Waiting)
	assert.Zero(t, st.Rejected)
}
