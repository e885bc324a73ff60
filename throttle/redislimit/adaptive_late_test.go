package redislimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// TestAdaptiveLateSlack: at intervals of 20 ms or more, a unit that
// leaves late in one process widens the spacing of the fleet's next
// bookings by as much, at most 5% of an interval, for 5 s; at shorter
// intervals the spacing is the rate's alone.
func TestAdaptiveLateSlack(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		giveRate throttle.Rate
		giveLate time.Duration // how late b's unit leaves
		wantNext time.Duration // a's booking after b's next, from then
	}{
		{name: "10/s, 3 ms late", giveRate: throttle.PerSecond(10), giveLate: 3 * ms, wantNext: 200 * ms},
		{name: "10/s, 50 ms late: 5 ms of slack", giveRate: throttle.PerSecond(10), giveLate: 50 * ms, wantNext: 155 * ms},
		{name: "100/s: no slack", giveRate: throttle.PerSecond(100), giveLate: 3 * ms, wantNext: 17 * ms},
	}
	s := startRedis(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClock(time.Hour)
			a := newAdaptiveRate(t, s, c, tt.giveRate)
			b := newAdaptiveRate(t, s, c, tt.giveRate)
			key := "late " + tt.name
			interval, err := tt.giveRate.Interval()
			require.NoError(t, err)

			assert.Equal(t, time.Duration(0), adaptiveBook(t, a, key).Until())
			second := adaptiveBook(t, b, key)
			require.Equal(t, interval, second.Until())
			c.advance(interval + tt.giveLate)
			require.Equal(t, -tt.giveLate, second.Until(), "b's unit leaves late")
			assert.Equal(t, interval-tt.giveLate, adaptiveBook(t, b, key).Until(), "b's call carries it: its own slot was booked before")
			assert.Equal(t, tt.wantNext, adaptiveBook(t, a, key).Until())
		})
	}
}

// TestAdaptiveLateKeep: the fleet's lateness is kept 5 s, then the next
// report replaces it, even a lower one.
func TestAdaptiveLateKeep(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := newClock(time.Hour)
	a := newAdaptiveRate(t, s, c, throttle.PerSecond(10))
	const key = "keep"

	adaptiveBook(t, a, key)
	late := adaptiveBook(t, a, key)
	c.advance(104 * ms)
	require.Equal(t, -4*ms, late.Until())
	assert.Equal(t, 96*ms, adaptiveBook(t, a, key).Until())
	assert.Equal(t, 200*ms, adaptiveBook(t, a, key).Until(), "4 ms of slack")

	c.advance(4 * time.Second)
	assert.Equal(t, time.Duration(0), adaptiveBook(t, a, key).Until())
	assert.Equal(t, 104*ms, adaptiveBook(t, a, key).Until(), "kept, though the call reported 0")

	c.advance(1500 * ms)
	assert.Equal(t, time.Duration(0), adaptiveBook(t, a, key).Until())
	assert.Equal(t, 100*ms, adaptiveBook(t, a, key).Until(), "replaced after 5 s")
}

// newAdaptiveRate is newAdaptive with the ceiling r.
func newAdaptiveRate(t *testing.T, s *server, c *clock, r throttle.Rate) *Adaptive {
	t.Helper()
	a, err := NewAdaptive(hiddenSubscribe{s.client(t)}, r, c.option())
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	return a
}
