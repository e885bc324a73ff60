package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress/internal/upstream"
)

func TestMaxIn(t *testing.T) {
	at := func(ms ...int) []time.Time {
		base := time.Unix(0, 0)
		ts := make([]time.Time, len(ms))
		for i, m := range ms {
			ts[i] = base.Add(time.Duration(m) * time.Millisecond)
		}
		return ts
	}
	tests := []struct {
		name       string
		giveTimes  []time.Time
		giveWindow time.Duration
		want       int
	}{
		{name: "empty", giveTimes: nil, giveWindow: time.Second, want: 0},
		{name: "all in one window", giveTimes: at(0, 10, 999), giveWindow: time.Second, want: 3},
		{name: "half-open window", giveTimes: at(0, 1000, 2000), giveWindow: time.Second, want: 1},
		{name: "boundary burst", giveTimes: at(0, 900, 901, 1100, 1101, 2500), giveWindow: time.Second, want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, maxIn(tt.giveTimes, tt.giveWindow))
		})
	}
}

func TestQuantile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	tests := []struct {
		name  string
		giveQ float64
		want  time.Duration
	}{
		{name: "median", giveQ: 0.5, want: 5},
		{name: "p90", giveQ: 0.9, want: 9},
		{name: "max", giveQ: 1, want: 10},
		{name: "min", giveQ: 0, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, quantile(ds, tt.giveQ))
		})
	}
}

func TestParseMicro(t *testing.T) {
	out := `goos: linux
BenchmarkAllow/keys=1/lib=egress-tokenbucket-2   1000  50.0 ns/op  0 B/op  0 allocs/op
BenchmarkAllow/keys=1/lib=egress-tokenbucket-2   1000  70.0 ns/op  0 B/op  0 allocs/op
BenchmarkAllow/keys=1/lib=egress-tokenbucket-2   1000  60.0 ns/op  0 B/op  0 allocs/op
BenchmarkAllow/keys=1/lib=x-time-rate-2          1000 100.0 ns/op  0 B/op  0 allocs/op
BenchmarkMemoryPerKey/lib=x-time-rate-2             1   9.0 ns/op  135.5 B/key
BenchmarkRedisDecision/lib=redis_rate-2          1000  12.0 ns/op  1.000 roundtrips/op
BenchmarkAllowPaired/lib=egress-fixedwindow-2    5000  300000 ns/op  1.45 keys/1  0.62 x/time/rate
BenchmarkTransportOverheadMetrics/overhead=egress+egressotel-over-bare-base-2  1000  665.0 ns/op  1.000 added-allocs/op  6.779 ratio  512 B/op  5 allocs/op
PASS
`
	m := parseMicro(out)
	assert.Equal(t, []string{"BenchmarkAllow/keys=1", "BenchmarkMemoryPerKey", "BenchmarkRedisDecision", "BenchmarkAllowPaired", "BenchmarkTransportOverheadMetrics"}, m.order)
	assert.Equal(t, 0.62, m.get("BenchmarkAllowPaired", "egress-fixedwindow").vsPeer)
	assert.Equal(t, 1.45, m.get("BenchmarkAllowPaired", "egress-fixedwindow").vsOne)
	assert.Equal(t, []string{"egress-tokenbucket", "x-time-rate"}, m.libs["BenchmarkAllow/keys=1"])
	assert.Equal(t, 60.0, m.get("BenchmarkAllow/keys=1", "egress-tokenbucket").ns)
	assert.Equal(t, "x-time-rate", m.reference("BenchmarkAllow/keys=1"))
	assert.Equal(t, 135.5, m.get("BenchmarkMemoryPerKey", "x-time-rate").perKey)
	assert.Equal(t, 1.0, m.get("BenchmarkRedisDecision", "redis_rate").roundTrips)
	added := m.get("BenchmarkTransportOverheadMetrics", "overhead=egress+egressotel-over-bare-base")
	assert.Equal(t, 665.0, added.ns)
	assert.Equal(t, 1.0, added.allocs, "the allocations added, not the pair's")
}

func TestMicroRatio(t *testing.T) {
	// Pass 2 ran on a busy machine: both sides took twice as long. The
	// ratio of the medians (60/150) would say 0.40×, each pass says 0.50×.
	out := `BenchmarkAllow/keys=1/lib=egress-tokenbucket-2   1000  50.0 ns/op
BenchmarkAllow/keys=1/lib=x-time-rate-2          1000 100.0 ns/op
BenchmarkAllow/keys=1/lib=egress-tokenbucket-2   1000 120.0 ns/op
BenchmarkAllow/keys=1/lib=x-time-rate-2          1000 240.0 ns/op
BenchmarkAllow/keys=1/lib=egress-tokenbucket-2   1000  60.0 ns/op
BenchmarkAllow/keys=1/lib=x-time-rate-2          1000 150.0 ns/op
BenchmarkAllow/keys=10000/lib=egress-tokenbucket-2 1000  80.0 ns/op
BenchmarkAllow/keys=10000/lib=egress-tokenbucket-2 1000 150.0 ns/op
`
	tests := []struct {
		name              string
		giveGroup, give   string
		giveRefGroup, ref string
		want              float64
		wantOK            bool
	}{
		{name: "paired by pass", giveGroup: "BenchmarkAllow/keys=1", give: "egress-tokenbucket", giveRefGroup: "BenchmarkAllow/keys=1", ref: "x-time-rate", want: 0.5, wantOK: true},
		{name: "unequal passes: ratio of medians", giveGroup: "BenchmarkAllow/keys=10000", give: "egress-tokenbucket", giveRefGroup: "BenchmarkAllow/keys=1", ref: "egress-tokenbucket", want: 150.0 / 60, wantOK: true},
		{name: "missing", giveGroup: "BenchmarkAllow/keys=1", give: "egress-fixedwindow", giveRefGroup: "BenchmarkAllow/keys=1", ref: "x-time-rate", want: 0, wantOK: false},
	}
	m := parseMicro(out)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := m.ratio(tt.giveGroup, tt.give, tt.giveRefGroup, tt.ref)
			assert.Equal(t, tt.wantOK, ok)
			assert.InDelta(t, tt.want, got, 1e-9)
		})
	}
}

func TestSlidingCounterBest(t *testing.T) {
	tests := []struct {
		name      string
		giveN     int
		givePhase time.Duration
		want      time.Duration
	}{
		{name: "the limit goes at once", giveN: 2, want: 0},
		{name: "the next waits until the estimate rounds below the limit", giveN: 3, want: 1250*time.Millisecond + 100*time.Microsecond},
		{name: "a later phase shortens the first window", giveN: 3, givePhase: 500 * time.Millisecond, want: 750*time.Millisecond + 100*time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, slidingCounterBest(tt.giveN, 2, time.Second, tt.givePhase))
		})
	}
}

func TestBest(t *testing.T) {
	tests := []struct {
		name   string
		giveSc scenario
		giveN  int
		want   time.Duration
	}{
		{name: "token bucket: the burst at once, the rest at the rate", giveSc: scenario{limit: upstream.Config{Rate: 48, Burst: 9}}, giveN: 600, want: 12312500 * time.Microsecond},
		{name: "nginx leaky bucket: 1+burst at once", giveSc: scenario{limit: upstream.Config{Algorithm: upstream.LeakyBucket, Rate: 48, Burst: 8}}, giveN: 600, want: 12312500 * time.Microsecond},
		{name: "go-limiter: whole windows", giveSc: scenario{id: "5c", limit: upstream.Config{Limit: 48, Window: time.Second}}, giveN: 600, want: 12 * time.Second},
		{name: "go-limiter: one window", giveSc: scenario{id: "5c", limit: upstream.Config{Limit: 48, Window: time.Second}}, giveN: 48, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, best(tt.giveSc, tt.giveN))
		})
	}
}

func TestNotBestComparesWallOfFinishedRuns(t *testing.T) {
	rows := []row{
		{contender: "egress (README)", wall: 12640 * time.Millisecond, ok: 600, cpu: 300 * time.Millisecond},
		{contender: "failsafe-go", wall: 12498 * time.Millisecond, ok: 600, refused: 1, cpu: 300 * time.Millisecond},
		{contender: "go-retryablehttp", wall: 899 * time.Millisecond, ok: 48, failed: 552, refused: 6072, cpu: 300 * time.Millisecond},
	}
	got := notBest(scenario{id: "5c"}, rows)
	assert.Equal(t, []string{"wall time: failsafe-go has 12.498 s, egress 12.640 s."}, got)
}

// A run without a peer (FOLLOW_CONTENDERS naming egress rows only) cannot
// tell whether the README row's wall is at or under the best peer's: that
// goal is left unjudged, not met against no one.
func TestPublishedLimitGoalNeedsAPeer(t *testing.T) {
	sc := scenario{id: "5c", part: "5", table: tableFollow, limit: upstream.Config{Limit: 48, Window: time.Second}, shares: []int{600}}
	readme := row{contender: "egress (README)", wall: 12161 * time.Millisecond, ok: 600, admitted: 600}
	peer := row{contender: "failsafe-go", wall: 12500 * time.Millisecond, ok: 600, admitted: 600}
	published := func(rows []row) goal {
		for _, g := range followGoals(sc, rows) {
			if strings.Contains(g.what, "published limit") {
				return g
			}
		}
		t.Fatal("no published-limit goal")
		return goal{}
	}
	assert.False(t, published([]row{readme}).known, "no peer ran")
	g := published([]row{readme, peer})
	assert.True(t, g.known)
	assert.True(t, g.met, "12.161 s under failsafe-go's 12.5 s: %s", g.measured)
}
