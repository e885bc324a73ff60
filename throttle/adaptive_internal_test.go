package throttle

import (
	"container/heap"
	"context"
	"math/rand/v2"
	"time"
)

// This file holds a discrete-event simulation of callers of an Adaptive
// limiter against a hidden token bucket: one goroutine, a clock that
// jumps from event to event, and seeded draws, so that every run of a
// test gives the same numbers.

// simEvent is something that happens to one caller at one instant.
type simEvent struct {
	at     time.Duration
	seq    int // breaks ties in the order the events were made
	caller int
	kind   int // simBook, simWake, simArrive or simAnswer
}

const (
	simBook = iota
	simWake
	simArrive
	simAnswer
)

type simQueue []simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// simConfig describes one simulated run.
type simConfig struct {
	hidden, burst int           // the upstream's token bucket, per second
	callers       int           // each sends, waits for the answer, and books again
	way, back     time.Duration // the way to the upstream (drawn up to way) and back
	run           time.Duration
	seed          uint64
	ceiling       Rate
	change        func(at time.Duration) (hidden int, ok bool) // a hidden limit that moves, if set
}

// simResult counts per 100 ms.
type simResult struct {
	admitted, throttled []int
	rates               []float64 // the key's rate at the end of each 100 ms
}

// simulate runs c and returns what it counted.
func simulate(c simConfig) simResult {
	var now time.Duration
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	a, err := NewAdaptive(c.ceiling, WithClock(func() time.Time { return start.Add(now) }))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(c.seed, 7))
	bins := int(c.run / (100 * time.Millisecond))
	res := simResult{admitted: make([]int, bins), throttled: make([]int, bins), rates: make([]float64, bins)}

	hidden := float64(c.hidden)
	tokens, last := float64(c.burst), time.Duration(0)
	take := func() bool {
		if c.change != nil {
			if h, ok := c.change(now); ok {
				hidden = float64(h)
			}
		}
		tokens = min(float64(c.burst), tokens+(now-last).Seconds()*hidden)
		last = now
		if tokens < 1 {
			return false
		}
		tokens--
		return true
	}

	type caller struct {
		r    *Reservation
		sent time.Duration
		ok   bool
	}
	callers := make([]caller, c.callers)
	q := &simQueue{}
	seq := 0
	push := func(at time.Duration, who, kind int) {
		seq++
		heap.Push(q, simEvent{at: at, seq: seq, caller: who, kind: kind})
	}
	for i := range callers {
		push(0, i, simBook)
	}
	nextBin := 0
	for q.Len() > 0 {
		e := heap.Pop(q).(simEvent)
		for nextBin < bins && time.Duration(nextBin+1)*100*time.Millisecond <= e.at {
			now = time.Duration(nextBin+1) * 100 * time.Millisecond
			res.rates[nextBin] = a.Rate("k")
			nextBin++
		}
		now = e.at
		if now >= c.run {
			break
		}
		cl := &callers[e.caller]
		switch e.kind {
		case simBook:
			r, err := a.Reserve(ctx, "k", 1, -1)
			if err != nil || !r.OK {
				panic("simulate: Reserve refused")
			}
			cl.r = r
			push(now+r.Delay, e.caller, simWake)
		case simWake:
			if d := cl.r.booking.Until(); d > 0 {
				push(now+d, e.caller, simWake) // moved by a cut or a pause
				continue
			}
			cl.sent = now
			push(now+time.Duration(rng.Int64N(int64(c.way)+1)), e.caller, simArrive)
		case simArrive:
			cl.ok = take()
			bin := int(now / (100 * time.Millisecond))
			if cl.ok {
				res.admitted[bin]++
			} else {
				res.throttled[bin]++
			}
			push(now+c.back, e.caller, simAnswer)
		case simAnswer:
			_ = a.Learn(ctx, "k", Outcome{N: 1, Throttled: !cl.ok, Latency: now - cl.sent})
			push(now, e.caller, simBook)
		}
	}
	return res
}

// after sums from from on, and returns the range of the rate there.
func (s simResult) after(from time.Duration) (admitted, throttled int, lo, hi float64) {
	lo = -1
	for i := int(from / (100 * time.Millisecond)); i < len(s.admitted); i++ {
		admitted += s.admitted[i]
		throttled += s.throttled[i]
		if lo < 0 || s.rates[i] < lo {
			lo = s.rates[i]
		}
		hi = max(hi, s.rates[i])
	}
	return admitted, throttled, lo, hi
}
