package throttle_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// TestSlidingWindowReturns checks when a log says more than is left now
// comes back: when its oldest unit counted leaves the window.
func TestSlidingWindowReturns(t *testing.T) {
	type step struct {
		sleep time.Duration
		take  int
	}
	tests := []struct {
		name      string
		giveSteps []step
		want      time.Duration
	}{
		{name: "a key never seen", want: 0},
		{name: "units spread", giveSteps: []step{{take: 3}, {sleep: 20 * time.Second, take: 3}}, want: 40 * time.Second},
		{name: "full", giveSteps: []step{{take: 4}, {sleep: 30 * time.Second, take: 6}}, want: 30 * time.Second},
		{name: "the oldest gone", giveSteps: []step{{take: 4}, {sleep: 30 * time.Second, take: 6}, {sleep: 31 * time.Second}}, want: 29 * time.Second},
		{name: "all gone", giveSteps: []step{{take: 4}, {sleep: 2 * time.Minute}}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				l, err := throttle.NewSlidingWindow(10, time.Minute)
				require.NoError(t, err)
				for _, s := range tt.giveSteps {
					time.Sleep(s.sleep)
					if s.take > 0 {
						ok, err := l.AllowN(ctx, "k", s.take)
						require.NoError(t, err)
						require.True(t, ok)
					}
				}
				got, err := l.Returns(ctx, "k")
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
			})
		})
	}
}
