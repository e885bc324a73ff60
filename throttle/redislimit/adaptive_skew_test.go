package redislimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestAdaptiveSkew: a key's slots are mapped with the least offset of the
// replies over the last one to two seconds, so that a reply held up on
// its way back does not make its unit leave late; a server clock that
// steps forward is followed at once, one that steps back within two
// seconds.
func TestAdaptiveSkew(t *testing.T) {
	t.Parallel()
	type reply struct{ at, offset time.Duration }
	tests := []struct {
		name  string
		give  []reply
		wants []time.Duration
	}{
		{
			name:  "a held-up reply keeps the least offset",
			give:  []reply{{0, 5 * ms}, {100 * ms, 13 * ms}, {200 * ms, 6 * ms}},
			wants: []time.Duration{5 * ms, 5 * ms, 5 * ms},
		},
		{
			name:  "a lower offset is taken at once",
			give:  []reply{{0, 5 * ms}, {100 * ms, -time.Second}},
			wants: []time.Duration{5 * ms, -time.Second},
		},
		{
			name:  "the least of the last window stays one more",
			give:  []reply{{0, 5 * ms}, {1100 * ms, 9 * ms}, {1900 * ms, 9 * ms}, {2200 * ms, 9 * ms}},
			wants: []time.Duration{5 * ms, 5 * ms, 5 * ms, 9 * ms},
		},
		{
			name:  "a gap of two windows starts over",
			give:  []reply{{0, 5 * ms}, {2 * time.Second, time.Second}},
			wants: []time.Duration{5 * ms, time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var s adaptiveSkew
			got := make([]time.Duration, len(tt.give))
			for i, r := range tt.give {
				got[i] = time.Duration(s.add(int64(time.Hour+r.at), int64(r.offset)))
			}
			assert.Equal(t, tt.wants, got)
		})
	}
}
