package tolerance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestBucket(t *testing.T) {
	tests := []struct {
		name         string
		giveInterval time.Duration
		giveBurst    int
		giveD        time.Duration
		wantInterval time.Duration
		wantKeep     int
	}{
		{"none", 20 * time.Millisecond, 5, 0, 20 * time.Millisecond, 0},
		{"one unit of a burst of 5", 20 * time.Millisecond, 5, 10 * time.Millisecond, 20 * time.Millisecond, 1},
		{"rounds up", 5 * time.Millisecond, 10, 11 * time.Millisecond, 5 * time.Millisecond, 3},
		{"burst too small", 20 * time.Millisecond, 1, 10 * time.Millisecond, 30 * time.Millisecond, 0},
		{"burst exactly used up", 5 * time.Millisecond, 2, 10 * time.Millisecond, 15 * time.Millisecond, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			interval, keep := Bucket(tt.giveInterval, tt.giveBurst, tt.giveD)
			assert.Equal(t, tt.wantInterval, interval)
			assert.Equal(t, tt.wantKeep, keep)
		})
	}
}
