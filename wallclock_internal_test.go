package egress

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestNowFollowsTheClocks checks the wall clock that responses are read
// against: the time of the monotonic reading given, from a wall clock
// read again once a second has passed.
func TestNowFollowsTheClocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(http.DefaultTransport)
		tests := []struct {
			name      string
			giveSleep time.Duration
			wantRead  bool // the wall clock was read again
		}{
			{name: "first", wantRead: true},
			{name: "same instant", giveSleep: 0},
			{name: "within a second", giveSleep: 999 * time.Millisecond},
			{name: "a second on", giveSleep: time.Millisecond, wantRead: true},
			{name: "long after", giveSleep: time.Hour, wantRead: true},
		}
		for _, tt := range tests {
			time.Sleep(tt.giveSleep)
			before := tr.wall.Load()
			got := tr.now(time.Since(tr.epoch))
			assert.True(t, time.Now().Equal(got), "%s: %v", tt.name, got)
			assert.Equal(t, tt.wantRead, tr.wall.Load() != before, tt.name)
		}
	})
}
