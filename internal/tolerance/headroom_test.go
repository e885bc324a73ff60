package tolerance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// feed gives h n answers, one every 20 ms from *now, each sent late and
// answered after latency plus wave on every other answer.
func feed(h *Headroom, now *int64, n int, late, latency, wave time.Duration) {
	for i := range n {
		*now += int64(20 * time.Millisecond)
		h.Learn(*now, late, latency+time.Duration(i%2)*wave, false)
	}
}

func TestHeadroom(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name                  string
		giveLate, giveWave    time.Duration
		wantCalm, wantSettled time.Duration // after 4 s of answers; after a refusal and 4 s more
	}{
		{name: "steady path", wantCalm: 0, wantSettled: 0},
		{name: "jitter is kept only after a refusal", giveLate: ms, giveWave: 2 * ms, wantCalm: 0, wantSettled: 3 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHeadroom(10 * ms)
			assert.Equal(t, int64(10*ms), h.Get(), "starts at the cap")
			now := int64(0)
			feed(h, &now, 200, tt.giveLate, 5*ms, tt.giveWave)
			assert.InDelta(t, int64(tt.wantCalm), h.Get(), float64(20*time.Microsecond))
			now += int64(20 * ms)
			h.Learn(now, 0, 5*ms, true)
			assert.Equal(t, int64(10*ms), h.Get(), "a refusal raises it to the cap")
			feed(h, &now, 200, tt.giveLate, 5*ms, tt.giveWave)
			assert.InDelta(t, int64(tt.wantSettled), h.Get(), float64(20*time.Microsecond))
		})
	}
}

func TestHeadroomForgetsASpike(t *testing.T) {
	const ms = time.Millisecond
	h := NewHeadroom(10 * ms)
	now := int64(0)
	h.Learn(now, 0, 5*ms, true) // refused: from now on the jitter counts
	feed(h, &now, 10, 0, 5*ms, 0)
	feed(h, &now, 1, 0, 13*ms, 0) // a spike of 8 ms
	assert.Greater(t, h.Get(), int64(7*ms), "the spike holds the headroom up")
	assert.Equal(t, int64(8*ms), int64(h.jitter), "a spike is the jitter at once")
	feed(h, &now, 1500, 0, 5*ms, 0) // 30 s later
	assert.Less(t, h.Get(), int64(50*time.Microsecond), "and forgotten after")
	assert.LessOrEqual(t, h.Get(), int64(10*ms))
}

func TestHeadroomCapsTheJitter(t *testing.T) {
	const ms = time.Millisecond
	h := NewHeadroom(10 * ms)
	now := int64(0)
	h.Learn(now, 0, 5*ms, true)
	feed(h, &now, 100, 50*ms, 5*ms, 0)
	assert.Equal(t, int64(10*ms), h.Get())
}

func TestNilHeadroom(t *testing.T) {
	var h *Headroom
	h.Learn(1, time.Millisecond, time.Millisecond, true)
	assert.Equal(t, int64(0), h.Get())
	assert.Equal(t, time.Duration(0), h.Cap())
	assert.Nil(t, NewHeadroom(0))
}

func TestSpan(t *testing.T) {
	const ms = int64(time.Millisecond)
	tests := []struct {
		name                   string
		giveInterval           int64
		giveBurst              int
		giveHeadroom           int64
		wantInterval, wantSpan int64
	}{
		{name: "no headroom", giveInterval: 20 * ms, giveBurst: 5, giveHeadroom: 0, wantInterval: 20 * ms, wantSpan: 100 * ms},
		{name: "out of the burst", giveInterval: 20 * ms, giveBurst: 5, giveHeadroom: 10 * ms, wantInterval: 20 * ms, wantSpan: 90 * ms},
		{name: "burst of one lengthens the interval", giveInterval: 20 * ms, giveBurst: 1, giveHeadroom: 10 * ms, wantInterval: 30 * ms, wantSpan: 30 * ms},
		{name: "what the burst cannot spare", giveInterval: 20 * ms, giveBurst: 2, giveHeadroom: 30 * ms, wantInterval: 30 * ms, wantSpan: 30 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			interval, span := Span(tt.giveInterval, tt.giveBurst, tt.giveHeadroom)
			assert.Equal(t, tt.wantInterval, interval)
			assert.Equal(t, tt.wantSpan, span)
		})
	}
}
