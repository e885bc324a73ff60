package redislimit

import (
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/internal/sim"
	"github.com/egress-go/egress/throttle"
)

// This file holds a discrete-event simulation of a fleet of processes
// learning one key's rate through the script against a hidden token
// bucket, as throttle/adaptive_internal_test.go does in process (see
// package sim): the frozen clock jumps from event to event, and each
// process hears of the others' changes before the next event.

// fleetConfig describes one simulated run.
type fleetConfig struct {
	hidden, burst  int           // the upstream's token bucket, per second
	procs, callers int           // callers per process: each sends, waits for the answer, and books again
	way, back      time.Duration // the way to the upstream (drawn up to way) and back
	run            time.Duration
	seed           uint64
	// stop, when set, is when every process but the first stops booking,
	// as processes that finished their share of a job do: their last
	// answers are never carried to Redis.
	stop time.Duration
	// refuse, when set, is when the upstream refuses the first unit of
	// the first process that arrives at or after it, whatever its bucket
	// holds: a lone 429, as jitter draws one.
	refuse time.Duration
}

// fleetResult counts per 100 ms.
type fleetResult struct {
	admitted, throttled []int
	rates               []float64 // the first process's view of the rate at the end of each 100 ms
}

// simulateFleet runs c on s and returns what it counted. Each process
// is an Adaptive on its own Client, and hears of the others' cuts
// through pub/sub before the clock moves on (hear). A throttled caller
// retries after a backoff drawn from 50-150 ms, as a Transport's first
// retry without a server delay does.
func simulateFleet(t *testing.T, s *server, key string, c fleetConfig) fleetResult {
	t.Helper()
	clk := newClock(time.Hour)
	start := clk.us.Load()
	ctx := context.Background()
	procs := make([]*Adaptive, c.procs)
	for i := range procs {
		a, err := NewAdaptive(s.client(t), throttle.PerSecond(1000), clk.option())
		require.NoError(t, err)
		t.Cleanup(func() { _ = a.Close() })
		procs[i] = a
	}
	rng := rand.New(rand.NewPCG(c.seed, 7))
	bins := int(c.run / (100 * time.Millisecond))
	res := fleetResult{admitted: make([]int, bins), throttled: make([]int, bins), rates: make([]float64, bins)}
	tokens, last := float64(c.burst), time.Duration(0)

	type caller struct {
		a    *Adaptive
		b    *adaptiveBooking
		sent time.Duration
		ok   bool
	}
	callers := make([]caller, c.procs*c.callers)
	q := &sim.Queue{}
	push := q.Push
	for i := range callers {
		callers[i].a = procs[i%c.procs]
		push(0, i, sim.Book)
	}
	nextBin := 0
	for q.Len() > 0 {
		e := q.Pop()
		for nextBin < bins && time.Duration(nextBin+1)*100*time.Millisecond <= e.At {
			res.rates[nextBin] = procs[0].Rate(key)
			nextBin++
		}
		if e.At >= c.run {
			break
		}
		now := e.At
		clk.us.Store(start + now.Microseconds())
		cl := &callers[e.Caller]
		switch e.Kind {
		case sim.Book:
			_, b, err := cl.a.reserve(ctx, key, 1, 0, -1)
			require.NoError(t, err)
			cl.b = b
			hear(procs, cl.a, key)
			push(now+max(b.Until(), 0), e.Caller, sim.Wake)
		case sim.Wake:
			if d := cl.b.Until(); d > 0 {
				push(now+d, e.Caller, sim.Wake) // moved by a cut the process heard of
				continue
			}
			cl.sent = now
			push(now+time.Duration(rng.Int64N(int64(c.way)+1)), e.Caller, sim.Arrive)
		case sim.Arrive:
			tokens = min(float64(c.burst), tokens+(now-last).Seconds()*float64(c.hidden))
			last = now
			cl.ok = tokens >= 1
			if c.refuse > 0 && now >= c.refuse && cl.a == procs[0] {
				cl.ok, c.refuse = false, 0
			}
			bin := int(now / (100 * time.Millisecond))
			if cl.ok {
				tokens--
				res.admitted[bin]++
			} else {
				res.throttled[bin]++
			}
			push(now+c.back, e.Caller, sim.Answer)
		case sim.Answer:
			require.NoError(t, cl.a.Learn(ctx, key, throttle.Outcome{N: 1, Throttled: !cl.ok, Latency: now - cl.sent}))
			if c.stop > 0 && now >= c.stop && cl.a != procs[0] {
				continue // done: this answer is never carried
			}
			next := now
			if !cl.ok {
				next += 50*time.Millisecond + time.Duration(rng.Int64N(int64(100*time.Millisecond)))
			}
			push(next, e.Caller, sim.Book)
		}
	}
	return res
}

// hear waits until every process of procs has heard, through pub/sub, of
// the changes from's last reply told it of, as they would within
// milliseconds in the time a fleet paces at: the frozen clock stands
// still meanwhile. A process that missed a message hears of the change
// from its next reply; the wait for it gives up after 10 s.
func hear(procs []*Adaptive, from *Adaptive, key string) {
	from.mu.Lock()
	v := from.views[key]
	born, gen := v.born, v.gen
	from.mu.Unlock()
	for _, p := range procs {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Microsecond) {
			p.mu.Lock()
			w := p.views[key]
			heard := w == nil || w.born != born || w.gen >= gen
			p.mu.Unlock()
			if heard {
				break
			}
		}
	}
}

// TestAdaptiveFleetFindsHiddenLimit: four processes of eight callers
// each, sharing a key's learned rate through the script, against hidden
// token buckets: after 5 s, within ±10% of the limit, at most 1%
// throttled and at least 90% of the limit used (issue 13's goals, bench
// scenarios 6d-6f).
//
// With answers 10 ms back, the first second's burst inflates the
// estimate a little over a bucket of burst 1's limit, where every other
// unit is refused; the nudges bring it down, but before calm (see
// throttle/adaptive.go) the run of refusals at 3 s was taken for a limit
// that fell, and the rate was cut to the bisect of half the rate and the
// rate, 7.9-8.2/s, for the rest of the run.
func TestAdaptiveFleetFindsHiddenLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		giveHidden int
		giveBurst  int           // a tenth of the hidden limit when 0
		giveBack   time.Duration // how long an answer takes back; 2 ms when 0
		giveSeed   uint64
	}{
		{name: "10/s", giveHidden: 10, giveSeed: 1},
		{name: "10/s, another draw", giveHidden: 10, giveSeed: 2},
		{name: "10/s, a third draw", giveHidden: 10, giveSeed: 3},
		{name: "10/s, a fourth draw", giveHidden: 10, giveSeed: 4},
		{name: "10/s, 10 ms back", giveHidden: 10, giveBack: 10 * time.Millisecond, giveSeed: 1},
		{name: "10/s, 10 ms back, another draw", giveHidden: 10, giveBack: 10 * time.Millisecond, giveSeed: 2},
		{name: "100/s", giveHidden: 100, giveSeed: 1},
		{name: "100/s, another draw", giveHidden: 100, giveSeed: 2},
		{name: "100/s, a third draw", giveHidden: 100, giveSeed: 3},
		// A second of burst: the first second admits twice the limit,
		// and settled there the fleet was at 11.7-18/s with 27-29%
		// throttled after 5 s (see throttle/adaptive.go, cut).
		{name: "10/s, burst 10", giveHidden: 10, giveBurst: 10, giveSeed: 1},
		{name: "10/s, burst 10, 10 ms back", giveHidden: 10, giveBurst: 10, giveBack: 10 * time.Millisecond, giveSeed: 2},
		{name: "10/s, burst 5", giveHidden: 10, giveBurst: 5, giveSeed: 3},
		{name: "100/s, burst 100", giveHidden: 100, giveBurst: 100, giveSeed: 2},
	}
	s := startRedis(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const run, settle = 20 * time.Second, 5 * time.Second
			res := simulateFleet(t, s, "fleet "+tt.name, fleetConfig{
				hidden: tt.giveHidden, burst: cmp.Or(tt.giveBurst, max(tt.giveHidden/10, 1)), procs: 4, callers: 8,
				way: 4 * time.Millisecond, back: cmp.Or(tt.giveBack, 2*time.Millisecond), run: run, seed: tt.giveSeed,
			})
			admitted, throttled := 0, 0
			lo, hi := res.rates[settle/(100*time.Millisecond)], 0.0
			for i := int(settle / (100 * time.Millisecond)); i < len(res.rates); i++ {
				admitted += res.admitted[i]
				throttled += res.throttled[i]
				lo, hi = min(lo, res.rates[i]), max(hi, res.rates[i])
			}
			hidden := float64(tt.giveHidden)
			utilization := float64(admitted) / (hidden * (run - settle).Seconds())
			refused := float64(throttled) / float64(max(admitted+throttled, 1))
			t.Logf("rate after %v in [%.2f, %.2f], utilization %.3f, throttled %.4f (%d of %d)",
				settle, lo, hi, utilization, refused, throttled, admitted+throttled)
			assert.GreaterOrEqual(t, lo, 0.9*hidden, "learned rate too low")
			assert.LessOrEqual(t, hi, 1.1*hidden, "learned rate too high")
			assert.GreaterOrEqual(t, utilization, 0.9, "utilization")
			assert.LessOrEqual(t, refused, 0.01, "throttled answers")
		})
	}
}

// TestAdaptiveFleetWhileProcessesStop: three of four processes finish
// their share at 8 s, and the first goes on with units booked seconds
// ahead; a lone 429 at 9 s costs the fleet a nudge, not a cut. The
// answers of the processes that stopped are never carried, so the
// script counted a quarter of what was sent, took the rate for more than
// the callers' pace, and cut it to what those answers admitted: 9.3/s
// to 7.0/s, 9.9/s to 4.9/s, late in bench 6d's runs.
func TestAdaptiveFleetWhileProcessesStop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		giveSeed uint64
	}{
		{name: "10/s", giveSeed: 1},
		{name: "10/s, another draw", giveSeed: 2},
		{name: "10/s, a third draw", giveSeed: 3},
	}
	s := startRedis(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const run, settle, stop, refuse = 12 * time.Second, 5 * time.Second, 8 * time.Second, 9 * time.Second
			res := simulateFleet(t, s, "stop "+tt.name, fleetConfig{
				hidden: 10, burst: 1, procs: 4, callers: 8, way: 4 * time.Millisecond, back: 2 * time.Millisecond,
				run: run, seed: tt.giveSeed, stop: stop, refuse: refuse,
			})
			before, lo := res.rates[refuse/(100*time.Millisecond)-1], math.Inf(1)
			for i := int(settle / (100 * time.Millisecond)); i < len(res.rates); i++ {
				lo = min(lo, res.rates[i])
			}
			t.Logf("rate %.2f before the 429, lowest from %v %.2f", before, settle, lo)
			assert.GreaterOrEqual(t, lo, adaptiveNudgeFloor*before, "cut by more than a nudge")
		})
	}
}

// adaptiveNudgeFloor is the least a lone throttled answer at the settled
// rate leaves of it: a nudge of 2% (throttle/adaptive.go).
const adaptiveNudgeFloor = 0.98 - 1e-9
