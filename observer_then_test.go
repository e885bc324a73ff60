package egress_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress"
)

func TestObserverThen(t *testing.T) {
	tests := []struct {
		name      string
		giveFirst bool
		giveNext  bool
		want      []string
	}{
		{name: "both", giveFirst: true, giveNext: true, want: []string{"first", "next"}},
		{name: "first only", giveFirst: true, want: []string{"first"}},
		{name: "next only", giveNext: true, want: []string{"next"}},
		{name: "neither"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			var first, next *egress.Observer
			if tt.giveFirst {
				first = &egress.Observer{Paused: func(egress.PauseInfo) { got = append(got, "first") }}
			}
			if tt.giveNext {
				next = &egress.Observer{Paused: func(egress.PauseInfo) { got = append(got, "next") }}
			}
			o := first.Then(next)
			if o.Paused != nil {
				o.Paused(egress.PauseInfo{})
			}
			assert.Equal(t, tt.want, got)
			assert.Nil(t, o.Waited, "a func neither has stays nil")
		})
	}
}
