package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// Answers to requests in flight together reach the record in any order.
// Of one window's statements the lowest remaining wins, less what is in
// flight now: an answer that arrives after the lowest, stating more, was
// handled before it, and counting it in flight against the lowest took
// it twice (the README recipe against a fixed window, IETF and x delta,
// lost units of its first windows so, and a whole window at the end).
func TestUpstreamUnorderedAnswersCountOnce(t *testing.T) {
	tests := []struct {
		name       string
		giveLate   []int // the remaining each late answer states, after the lowest
		wantDelays []time.Duration
	}{
		{name: "no late answer", wantDelays: ms(0, 1000, 1100, 1200)},
		{name: "one late answer", giveLate: []int{6}, wantDelays: ms(0, 0, 1000, 1100)},
		{name: "two late answers", giveLate: []int{7, 6}, wantDelays: ms(0, 0, 0, 1000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, u := clockedUpstream(t)
			ctx := context.Background()
			assert.Equal(t, ms(0, 0, 0, 0), delays(t, u, 4), "four in flight")
			// The last handled is answered first: 4 left of 10 (a
			// window of 1 s, reset in 1 s), 3 more in flight.
			learn := func(remaining int) {
				require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{N: 1, Statements: []throttle.Statement{requests(10, remaining, time.Second, time.Second)}}))
			}
			learn(4)
			for _, r := range tt.giveLate {
				learn(r)
			}
			assert.Equal(t, tt.wantDelays, delays(t, u, 4))
		})
	}
}
