package egressotel_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress/throttle/redislimit"
)

// TestBreakerStateFollowsEveryBreaker: egress.redis.breaker.state is 1
// while any circuit breaker is open and 0 once all have recovered. Before,
// one flag was set by the last event heard: a drop of settles, which no
// recovery follows, left it at 1 for good, and one cluster node's
// recovery hid another's outage.
func TestBreakerStateFollowsEveryBreaker(t *testing.T) {
	down := errors.New("dial: refused")
	tests := []struct {
		name        string
		give        []redislimit.Event
		giveOther   []redislimit.Event // heard through a second Client's func
		wantOpen    int64
		wantErrors  int64
		wantDropped int64
	}{
		{
			name:        "settles dropped while Redis answers",
			give:        []redislimit.Event{{Err: errors.New(`redislimit: 2 settles of key "k" dropped: ERR bad record`), Settles: 2}},
			wantOpen:    0,
			wantDropped: 2,
		},
		{
			name: "one node recovers, another still down",
			give: []redislimit.Event{
				{Err: down, Node: "10.0.0.1:6379"},
				{Err: down, Node: "10.0.0.2:6379"},
				{Recovered: true, Node: "10.0.0.1:6379"},
			},
			wantOpen:   1,
			wantErrors: 2,
		},
		{
			name: "every node recovers",
			give: []redislimit.Event{
				{Err: down, Node: "10.0.0.1:6379"},
				{Err: down, Node: "10.0.0.2:6379"},
				{Recovered: true, Node: "10.0.0.2:6379"},
				{Recovered: true, Node: "10.0.0.1:6379"},
			},
			wantOpen:   0,
			wantErrors: 2,
		},
		{
			name:       "another Client recovers",
			give:       []redislimit.Event{{Err: down}},
			giveOther:  []redislimit.Event{{Err: down}, {Recovered: true}},
			wantOpen:   1,
			wantErrors: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, reader := newMetrics(t)
			f, other := m.RedisObserver(nil), m.RedisObserver(nil)
			for _, e := range tt.give {
				f(e)
			}
			for _, e := range tt.giveOther {
				other(e)
			}
			got := read(t, reader)
			assert.Equal(t, tt.wantOpen, got.value(t, "egress.redis.breaker.state"))
			assert.Equal(t, tt.wantErrors, got.value(t, "egress.redis.errors"))
			assert.Equal(t, tt.wantDropped, got.value(t, "egress.redis.settles.dropped"))
		})
	}
}
