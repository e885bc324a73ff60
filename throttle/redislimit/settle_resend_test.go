package redislimit

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lossy is a go-redis hook that, while on, loses each script call: its
// reply, after Redis ran it (a stall or a partition after the call was
// delivered), or the call itself (before).
type lossy struct {
	replies, calls atomic.Bool
}

func (h *lossy) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lossy) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		script := cmd.Name() == "evalsha" || cmd.Name() == "eval"
		if script && h.calls.Load() {
			return context.DeadlineExceeded
		}
		err := next(ctx, cmd)
		if script && h.replies.Load() {
			return context.DeadlineExceeded
		}
		return err
	}
}

func (h *lossy) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestSettleResent: Redis remembers an applied settle for a minute
// (settleMemory). A settle whose answer was lost is sent again, and
// applied once, while Redis remembers it. Later, a second application
// could give units back twice, so only its charges are sent on: a
// charge never lost, a give-back never applied twice.
func TestSettleResent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		giveActual    int  // of a booking of 6, with 3 more booked after it
		giveLostCall  bool // the call is lost, rather than its reply
		giveAfter     time.Duration
		wantRemaining int
		wantReported  bool
	}{
		{name: "give-back resent soon", giveActual: 1, giveAfter: time.Second, wantRemaining: 6},
		{name: "give-back resent past Redis's memory", giveActual: 1, giveAfter: 61 * time.Second, wantRemaining: 6, wantReported: true},
		{name: "charge resent soon", giveActual: 7, giveAfter: time.Second, wantRemaining: 0},
		{name: "charge never sent, resent late", giveActual: 7, giveLostCall: true, giveAfter: 61 * time.Second, wantRemaining: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startRedis(t)
			rdb := s.client(t)
			lost := &lossy{}
			rdb.AddHook(lost)
			ctx := context.Background()
			c := newClock(time.Hour)
			var mu sync.Mutex
			var events []Event
			cl, err := NewClient(rdb, c.option(), WithObserver(func(e Event) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, e)
			}))
			require.NoError(t, err)
			cl.settles.after = func(time.Duration, func()) {}
			defer cl.Close()
			l, err := NewFixedWindow(rdb, 10, 24*time.Hour, WithClient(cl))
			require.NoError(t, err)

			r := reserve(t, l, "k", 6, 0)
			require.True(t, r.OK)
			require.True(t, reserve(t, l, "k", 3, 0).OK)
			require.NoError(t, r.Settle(ctx, tt.giveActual))
			lost.replies.Store(!tt.giveLostCall)
			lost.calls.Store(tt.giveLostCall)
			assert.ErrorIs(t, cl.Flush(ctx), ErrUnavailable)
			lost.replies.Store(false)
			lost.calls.Store(false)
			c.advance(tt.giveAfter)
			_ = cl.Flush(ctx)

			st, err := l.Inspect(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, tt.wantRemaining, st.Remaining, "settled once")
			mu.Lock()
			defer mu.Unlock()
			reported := false
			for _, e := range events {
				reported = reported || (e.Err != nil && e.Settles > 0 && strings.Contains(e.Err.Error(), `settles of key "k"`))
			}
			assert.Equal(t, tt.wantReported, reported, "%v", events)
		})
	}
}
