package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/egress-go/egress/bench/internal/redisserver"
	"github.com/egress-go/egress/internal/upstream"
)

// scenario is one side-by-side run: every contender does the same work
// against the same upstream limit.
type scenario struct {
	id, title string
	part      string // what -run selects it by; its id when empty
	table     tableKind
	// limit is what the upstream enforces, or, with front, what it
	// publishes: the numbers the contenders are configured with.
	limit      upstream.Config
	front      front         // a third-party limiter that decides instead, if any
	phase      time.Duration // start this long after a boundary of the front's windows, which begin when it is built
	shares     []int         // requests per worker process
	goroutines int           // per process
	contenders []string
	redis      bool          // contenders share a redis-server; count its commands
	boundary   time.Duration // start this long before a window boundary (scenario 4)
	plot       plotKind
}

type tableKind int

const (
	tableRate   tableKind = iota // scenarios 1–3
	tableFollow                  // real upstreams and the leaky bucket (issue 13, issue 11 item 12)
	tableHidden                  // a headerless upstream with a hidden limit (issue 13)
)

type plotKind int

const (
	plotNone plotKind = iota
	plotPerBin
	plotTrailingWindow
)

// requests is the scenario's total work.
func (sc scenario) requests() int {
	n := 0
	for _, s := range sc.shares {
		n += s
	}
	return n
}

// minimum is the least wall time any client can need: the upstream's
// burst is spent at once and the rest flows at its rate; a pause adds
// its length and refills the burst.
func (sc scenario) minimum() time.Duration {
	if sc.table != tableRate {
		return best(sc, sc.requests())
	}
	l := sc.limit
	n := float64(sc.requests())
	if l.Window > 0 {
		return time.Duration(math.Ceil(n/float64(l.Limit))-1) * l.Window
	}
	bursts := 1.0
	if l.ThrottleAt > 0 {
		bursts = 2
	}
	return time.Duration((n-bursts*float64(l.Burst))/float64(l.Rate)*float64(time.Second)) + l.ThrottleFor
}

func scenarios(smoke bool) []scenario {
	scale := func(full, small int) int {
		if smoke {
			return small
		}
		return full
	}
	single := []string{"egress", "x/time/rate", "failsafe-go", "go-retryablehttp", "naive"}
	pause := 2 * time.Second
	if smoke {
		pause = time.Second
	}
	return []scenario{
		{
			id: "1", title: "Paid API, one process: 50 req/s, burst 5, 1 000 requests from 32 goroutines",
			limit:  upstream.Config{Rate: 50, Burst: 5},
			shares: []int{scale(1000, 60)}, goroutines: 32,
			contenders: single, plot: plotPerBin,
		},
		{
			id: "2", title: "Shared quota, 4 processes: 200 req/s in total (burst 10), 2 000 requests split 1 000/500/300/200",
			limit:  upstream.Config{Rate: 200, Burst: 10},
			shares: []int{scale(1000, 100), scale(500, 50), scale(300, 30), scale(200, 20)}, goroutines: 16,
			contenders: []string{"egress (redislimit)", "x/time/rate", "x/time/rate (rate/N)", "redis_rate"},
			redis:      true, plot: plotPerBin,
		},
		{
			id: "3", title: fmt.Sprintf("Retry-After storm: 50 req/s, burst 5; after %d requests one 429 with Retry-After: %d and %v of refusing everything",
				scale(200, 20), int(pause.Seconds()), pause),
			limit:  upstream.Config{Rate: 50, Burst: 5, ThrottleAt: scale(200, 20) + 1, ThrottleFor: pause},
			shares: []int{scale(600, 60)}, goroutines: 32,
			contenders: single, plot: plotPerBin,
		},
		{
			id: "4", title: "Window boundary: 100 requests per 1 s window (the upstream counts any 1 s), 250 requests starting 200 ms before a boundary",
			limit:  upstream.Config{Algorithm: upstream.SlidingLog, Limit: 100, Window: time.Second},
			shares: []int{250}, goroutines: 32, boundary: 200 * time.Millisecond,
			contenders: []string{"egress fixed window", "egress sliding log", "egress sliding counter", "egress token bucket"},
			plot:       plotTrailingWindow,
		},
	}
}

// row is one contender's result in one scenario.
type row struct {
	contender      string
	skipped        string // why it did not run, if it did not
	wall           time.Duration
	ok, failed     int
	admitted       int
	refused        int
	duringPause    int
	redisByCommand map[string]int64
	roundTrips     int64 // counted by the clients
	cpu            time.Duration
	maxInWindow    int // requests that reached the upstream in its busiest window
	start          time.Time
	arrivals       []time.Time // admitted
	allArrivals    []time.Time // admitted and refused, sorted
	contenderErr   string
	learned        []float64 // a learning contender's rate per 100 ms, of its first worker
}

func (h *harness) runScenario(ctx context.Context, sc scenario) ([]row, error) {
	var rows []row
	for _, name := range sc.contenders {
		r, err := h.runOnce(ctx, sc, name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if r.skipped != "" {
			h.note("scenario %s: %s skipped: %s", sc.id, name, r.skipped)
		} else {
			fmt.Printf("   %-22s wall %7.3fs (min %.3fs)  ok %d  429s %d  during pause %d  redis round trips %d, scripts %d  cpu %v\n",
				name, r.wall.Seconds(), sc.minimum().Seconds(), r.ok, r.refused, r.duringPause, r.roundTrips, r.scripts(), r.cpu.Round(time.Millisecond))
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// runOnce runs one contender through sc in fresh worker processes.
func (h *harness) runOnce(ctx context.Context, sc scenario, name string) (row, error) {
	r := row{contender: name}
	if _, ok := contenders()[name]; !ok {
		r.skipped = "not built into this bench"
		return r, nil
	}
	if sc.redis {
		if h.rdb == nil {
			r.skipped = "redis-server is not installed"
			return r, nil
		}
		if err := redisserver.ResetStats(ctx, h.rdb); err != nil {
			return r, err
		}
	}
	cfg := sc.limit
	built := time.Now()
	if sc.front != nil {
		f, release, err := sc.front()
		if err != nil {
			return r, err
		}
		defer release()
		cfg = upstream.Config{Front: f}
	}
	h.up.Reset(cfg)
	start := time.Now().Add(700 * time.Millisecond)
	switch {
	case sc.boundary > 0:
		start = start.Truncate(sc.limit.Window).Add(2*sc.limit.Window - sc.boundary)
	case sc.phase > 0:
		// The front's windows start at the instant it was built.
		start = built.Add(sc.limit.Window + sc.phase)
	}
	// A contender that cannot finish in several times the minimum fails
	// its remaining requests, so that one stuck peer cannot stall the run.
	deadline := start.Add(3*sc.minimum() + 10*time.Second)
	if h.smoke {
		deadline = start.Add(2*sc.minimum() + 3*time.Second)
	}
	specs := make([]spec, len(sc.shares))
	for i, n := range sc.shares {
		specs[i] = spec{
			Contender: name, URL: h.up.URL() + "/api", Requests: n, Goroutines: sc.goroutines,
			StartAt: start.UnixNano(), Rate: float64(sc.limit.Rate), Burst: sc.limit.Burst,
			Limit: sc.limit.Limit, Window: sc.limit.Window, Procs: len(sc.shares),
			Algorithm: sc.limit.Algorithm, Deadline: deadline.UnixNano(),
		}
		if h.redis != nil {
			specs[i].Redis = h.redis.Addr
		}
	}
	results, err := spawn(specs)
	if err != nil {
		return r, err
	}
	st := h.up.Stats()
	if sc.redis {
		calls, err := redisserver.Calls(ctx, h.rdb)
		if err != nil {
			return r, err
		}
		r.redisByCommand = calls
	}
	r.start = start
	for _, res := range results {
		r.ok += res.OK
		r.failed += res.Failed
		r.cpu += res.CPU
		r.roundTrips += res.RoundTrips
		if end := time.Unix(0, res.End); end.Sub(start) > r.wall {
			r.wall = end.Sub(start)
		}
		if res.Err != "" && r.contenderErr == "" {
			r.contenderErr = res.Err
		}
		if r.learned == nil {
			r.learned = res.Learned
		}
	}
	r.admitted, r.refused, r.duringPause = st.Admitted, st.Refused, st.DuringPause
	r.arrivals = st.Arrivals
	r.allArrivals = append(append([]time.Time(nil), st.Arrivals...), st.Refusals...)
	slices.SortFunc(r.allArrivals, func(a, b time.Time) int { return a.Compare(b) })
	if sc.limit.Window > 0 && sc.table == tableRate {
		r.maxInWindow = maxIn(r.allArrivals, sc.limit.Window)
	}
	return r, check(sc, r)
}

// scripts is how many scripts Redis ran, EVAL and EVALSHA, from INFO
// commandstats.
func (r row) scripts() int64 { return r.redisByCommand["eval"] + r.redisByCommand["evalsha"] }

// usesRedis reports whether the contender sent anything to Redis.
func (r row) usesRedis() bool { return r.roundTrips > 0 || r.scripts() > 0 }

// check fails the run when the harness itself is broken: a request went
// missing, or the upstream's count disagrees with the clients'.
func check(sc scenario, r row) error {
	if got := r.ok + r.failed; got != sc.requests() {
		return fmt.Errorf("workers finished %d requests, want %d", got, sc.requests())
	}
	if r.ok > r.admitted {
		return fmt.Errorf("clients saw %d successes but the upstream admitted only %d", r.ok, r.admitted)
	}
	if r.admitted == 0 {
		return fmt.Errorf("the upstream admitted nothing (first error: %s)", r.contenderErr)
	}
	return nil
}

// maxIn returns the most times in sorted ts that fall in any half-open
// interval of length w.
func maxIn(ts []time.Time, w time.Duration) int {
	best, lo := 0, 0
	for hi := range ts {
		for ts[hi].Sub(ts[lo]) >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// utilization is the share of the upstream's quota a run used: what it
// admitted over what it would have admitted to a perfect client in the
// same wall time.
func utilization(sc scenario, r row) float64 {
	l := sc.limit
	if (l.Window > 0 && sc.table == tableRate) || r.wall <= 0 || sc.front != nil {
		return math.NaN()
	}
	bursts := 1.0
	if l.ThrottleAt > 0 {
		bursts = 2
	}
	capacity := bursts*float64(l.Burst) + float64(l.Rate)*(r.wall-l.ThrottleFor).Seconds()
	return float64(r.admitted) / capacity
}
