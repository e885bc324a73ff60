package redislimit

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// clock moves the scripts' time for one test, and aligns it with a
// manual clock for an in-process twin.
type clock struct {
	shift atomic.Int64 // ns added to server time
	base  time.Time    // server time when the test began, plus the first shift
	moved time.Duration
}

// newClock returns a clock whose time starts phase into a window of w
// (when w > 0), so that window boundaries fall where the test expects.
func newClock(t testing.TB, rdb redis.Scripter, w, phase time.Duration) *clock {
	t.Helper()
	c := &clock{}
	now := serverTime(t, rdb)
	first := time.Duration(0)
	if w > 0 {
		first = w - time.Duration(now.UnixNano()%int64(w)) + phase
	}
	c.shift.Store(int64(first))
	c.base = now.Add(first)
	return c
}

func serverTime(t testing.TB, rdb redis.Scripter) time.Time {
	t.Helper()
	v, err := rdb.Eval(context.Background(), "return redis.call('TIME')", nil).StringSlice()
	require.NoError(t, err)
	var sec, usec int64
	_, err = fmtSscan(v[0], &sec)
	require.NoError(t, err)
	_, err = fmtSscan(v[1], &usec)
	require.NoError(t, err)
	return time.Unix(sec, usec*1000)
}

// advance moves both clocks by d.
func (c *clock) advance(d time.Duration) {
	c.shift.Add(int64(d))
	c.moved += d
}

// now is the in-process twin's clock.
func (c *clock) now() time.Time { return c.base.Add(c.moved) }

func (c *clock) option() Option { return withTimeShift(&c.shift) }

// reserve reserves and fails the test on error.
func reserve(t testing.TB, l throttle.Limiter, key string, n int, maxWait time.Duration) *throttle.Reservation {
	t.Helper()
	r, err := l.Reserve(context.Background(), key, n, maxWait)
	require.NoError(t, err)
	return r
}

func closeAll(t testing.TB, cs ...interface{ Close() error }) {
	t.Cleanup(func() {
		for _, c := range cs {
			_ = c.Close()
		}
	})
}

func fmtSscan(s string, v *int64) (int, error) { return fmt.Sscan(s, v) }
