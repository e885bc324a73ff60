package redislimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFixedWindowTolerance checks what WithTolerance's doc says: a unit
// is still booked in the last d of a window, and counts against the next
// window too.
func TestFixedWindowTolerance(t *testing.T) {
	rdb := startRedis(t).client(t)
	c := newClock(time.Minute - 400*ms) // 400 ms before a reset
	l, err := NewFixedWindow(rdb, 2, time.Minute, c.option(), WithTolerance(800*ms))
	require.NoError(t, err)
	closeAll(t, l)

	now := reserve(t, l, "k", 1, -1)
	require.True(t, now.OK)
	assert.Equal(t, time.Duration(0), now.Delay, "booked in the last d of the window")
	next := reserve(t, l, "k", 1, -1)
	assert.Equal(t, time.Duration(0), next.Delay)
	assert.Equal(t, 0, next.Remaining)

	c.advance(400 * ms) // the next window
	spent := reserve(t, l, "k", 1, -1)
	assert.Equal(t, time.Minute, spent.Delay, "the two units count in this window too")
}
