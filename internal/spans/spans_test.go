package spans

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSpans(t *testing.T) {
	const w, limit = 1000, 48
	tests := []struct {
		name  string
		spent []int // one answer every 100 ns
		want  bool
	}{
		{name: "no whole span yet", spent: []int{46, 47, 46}, want: false},
		{name: "a sliding window: never below half", spent: []int{46, 47, 46, 45, 47, 46, 47, 46, 46, 47, 46, 47}, want: true},
		{name: "a fixed window: spent falls at its boundary", spent: []int{46, 47, 47, 2, 5, 9, 14, 20, 25, 30, 35, 40}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Spans
			for i, sp := range tt.spent {
				s.Observe(int64(i)*100, w, sp, float64(sp))
			}
			assert.Equal(t, tt.want, s.Sliding(limit))
		})
	}
}

func TestSpansForgetASpanLongAgo(t *testing.T) {
	var s Spans
	s.Observe(0, 1000, 40, 1)
	s.Observe(999, 1000, 40, 3)
	s.Observe(5000, 1000, 40, 2) // two windows and more later: the span before says nothing
	assert.Zero(t, s.Prev.N)
	assert.Equal(t, Span{N: 1, Sum: 2, High: 2, Low: 40}, s.Cur)
}
