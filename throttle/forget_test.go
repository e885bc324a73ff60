package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// A full record whose keys are all live (paused) refuses a new key with
// ErrTooManyKeys; with WithForget it forgets the key answered longest
// ago instead, and books the new one.
func TestUpstreamForgetsWhenFull(t *testing.T) {
	tests := []struct {
		name      string
		giveOpts  []throttle.Option
		wantErr   error
		wantKnown []bool // whether "a" and "b" are still paused after "c" books
	}{
		{name: "default: refused", wantErr: throttle.ErrTooManyKeys, wantKnown: []bool{true, true}},
		{name: "WithForget: the oldest is forgotten", giveOpts: []throttle.Option{throttle.WithForget()}, wantKnown: []bool{false, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			u, err := throttle.NewUpstream(append([]throttle.Option{throttle.WithMaxKeys(2), throttle.WithClock(clk.Now)}, tt.giveOpts...)...)
			require.NoError(t, err)
			ctx := context.Background()
			stated := throttle.Outcome{Statements: []throttle.Statement{{Limit: 10, Remaining: 0, Reset: 30 * time.Second}}}
			require.NoError(t, u.Learn(ctx, "a", stated))
			clk.Advance(time.Second)
			require.NoError(t, u.Learn(ctx, "b", stated))

			r, err := u.Reserve(ctx, "c", 1, 0)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
				assert.True(t, r.OK, "a new key books at once")
			}
			for i, key := range []string{"a", "b"} {
				assert.Equal(t, tt.wantKnown[i], u.Stated(key) != nil, "key %s still recorded", key)
			}
		})
	}
}
