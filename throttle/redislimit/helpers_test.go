package redislimit

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

const ms = time.Millisecond

// epoch is where every frozen clock starts: a midnight UTC, so that
// windows of a day or less begin there.
var epoch = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// clock is a test's frozen time: the scripts read it instead of TIME,
// the Client's local clock follows it, and an in-process twin reads it
// through throttle.WithClock. It moves only when the test moves it.
type clock struct {
	us atomic.Int64 // microseconds since the Unix epoch
}

// newClock returns a clock at epoch plus at.
func newClock(at time.Duration) *clock {
	c := &clock{}
	c.us.Store(epoch.Add(at).UnixMicro())
	return c
}

func (c *clock) advance(d time.Duration) { c.us.Add(d.Microseconds()) }

func (c *clock) now() time.Time { return time.UnixMicro(c.us.Load()) }

// option freezes the scripts' time at the clock's, and lets calls take
// a minute: on a busy machine a slow call is no outage, unless the test
// says otherwise with a WithTimeout after it.
func (c *clock) option() Option { return options{withFrozenTime(&c.us), WithTimeout(time.Minute)} }

// options applies several options as one.
type options []Option

func (o options) apply(c *config) {
	for _, x := range o {
		x.apply(c)
	}
}

// reserve reserves and fails the test on error.
func reserve(t testing.TB, l throttle.Limiter, key string, n int, maxWait time.Duration) *throttle.Reservation {
	t.Helper()
	r, err := l.Reserve(context.Background(), key, n, maxWait)
	require.NoError(t, err)
	return r
}

// book reserves n units with no bound and returns the booking.
func book(t testing.TB, p Part, key string, n int) *booking {
	t.Helper()
	r, b, err := p.part().reserve(context.Background(), key, n, 0, -1, true)
	require.NoError(t, err)
	require.True(t, r.OK)
	require.NotNil(t, b)
	return b
}

func closeAll(t testing.TB, cs ...interface{ Close() error }) {
	t.Cleanup(func() {
		for _, c := range cs {
			_ = c.Close()
		}
	})
}
