package egressprom_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress/extra/egressprom"
	"github.com/egress-go/egress/throttle/redislimit"
)

// TestBreakerOpenFollowsEveryBreaker: egress_redis_breaker_open is 1
// while any circuit breaker is open and 0 once all have recovered. Before,
// one gauge was set by the last event heard: a drop of settles, which no
// recovery follows, left it at 1 for good, and one cluster node's
// recovery hid another's outage.
func TestBreakerOpenFollowsEveryBreaker(t *testing.T) {
	down := errors.New("dial: refused")
	tests := []struct {
		name        string
		give        []redislimit.Event
		giveOther   []redislimit.Event // heard through a second Client's func
		wantOpen    float64
		wantErrors  float64
		wantDropped float64
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
			m := egressprom.New()
			reg := prometheus.NewRegistry()
			reg.MustRegister(m)
			f, other := m.RedisObserver(nil), m.RedisObserver(nil)
			for _, e := range tt.give {
				f(e)
			}
			for _, e := range tt.giveOther {
				other(e)
			}
			assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(`
# HELP egress_redis_breaker_open 1 while calls to Redis are failing and the circuit breaker is open, else 0.
# TYPE egress_redis_breaker_open gauge
egress_redis_breaker_open %v
# HELP egress_redis_errors_total Calls to Redis that failed.
# TYPE egress_redis_errors_total counter
egress_redis_errors_total %v
# HELP egress_redis_settles_dropped_total Settles (units given back or charged once a request's cost is known) dropped unsent to Redis.
# TYPE egress_redis_settles_dropped_total counter
egress_redis_settles_dropped_total %v
`, tt.wantOpen, tt.wantErrors, tt.wantDropped)), "egress_redis_breaker_open", "egress_redis_errors_total", "egress_redis_settles_dropped_total"))
		})
	}
}
