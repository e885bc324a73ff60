package redislimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSlotLeaseRemainingIsDueNow: a leased reservation's Remaining counts
// only the units a caller could take right away, as Reservation documents
// ("how many units of the budget are left once these are taken"), not the
// leased units whose slots lie ahead. The middleware states it as the
// RateLimit field's r: a client that sends r more requests at once must be
// admitted.
func TestSlotLeaseRemainingIsDueNow(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	clk := newClock(0)
	l := leased(t, rdb, clk)
	checked := 0
	for i := range 60 {
		r := reserve(t, l, "api", 1, 0)
		settle(l)
		if r.OK && r.Remaining > 0 {
			checked++
			for j := range r.Remaining {
				next := reserve(t, l, "api", 1, 0)
				settle(l)
				require.True(t, next.OK, "round %d: %d of the %d units stated left was refused (delay %v)", i, j+1, r.Remaining, next.Delay)
			}
		}
		clk.advance(30 * time.Millisecond)
	}
	assert.NotZero(t, checked, "some reservation stated units left")
}
