package throttle

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAdaptiveOthersUnits(t *testing.T) {
	const w, limit = 1000, 48
	type sample struct {
		at     int64
		spent  int
		sample float64
	}
	tests := []struct {
		name string
		give []sample
		want float64
	}{
		{name: "fixed window: what was spent falls at the boundary, the highest sample counts",
			give: []sample{{0, 2, 1}, {500, 26, 5}, {990, 47, 10}, {1000, 1, 0}, {1500, 25, 4}}, want: 10},
		{name: "sliding window: what was spent stays high, the mean of the last span counts",
			give: []sample{{0, 45, 8}, {300, 46, 12}, {600, 47, 10}, {900, 46, 10}, {1000, 46, 14}}, want: 10},
		{name: "a span that ended a window ago or more is forgotten",
			give: []sample{{0, 2, 9}, {2500, 3, 3}}, want: 3},
		{name: "below two units it is noise",
			give: []sample{{0, 40, 1}, {500, 47, 1.5}}, want: 0},
		{name: "at most nine tenths of the limit",
			give: []sample{{0, 48, 48}}, want: 0.9 * limit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o adaptiveOthers
			for _, s := range tt.give {
				o.spans.Observe(s.at, w, s.spent, s.sample)
			}
			assert.InDelta(t, tt.want, o.units(limit), 1e-9)
		})
	}
}

func TestAdaptiveOthersPin(t *testing.T) {
	type sample struct{ spent, own int }
	tests := []struct {
		name string
		give []sample
		want bool
	}{
		{name: "a bucket stating its burst: spent stays put while own units grow from one",
			give: []sample{{39, 1}, {39, 2}, {39, 3}, {39, 4}}, want: true},
		{name: "a window: every own unit adds to what was spent",
			give: []sample{{39, 1}, {40, 2}, {41, 3}, {42, 4}, {43, 5}}},
		{name: "a fixed window's boundary while own units grow",
			give: []sample{{46, 46}, {47, 47}, {1, 47}, {2, 48}, {3, 49}, {4, 50}}},
		{name: "a sliding counter at its limit, own units wobbling",
			give: []sample{{48, 45}, {48, 44}, {48, 46}, {48, 47}, {48, 48}}},
		{name: "a counter's window before decaying as fast as own units come",
			give: []sample{{30, 1}, {30, 2}, {29, 3}, {29, 4}, {29, 5}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o adaptiveOthers
			for _, s := range tt.give {
				o.pin(s.spent, s.own)
			}
			assert.Equal(t, tt.want, o.pinned)
		})
	}
}
