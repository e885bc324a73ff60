// Package sim is the event queue of the discrete-event simulations that
// test the adaptive limiters (throttle/adaptive_internal_test.go and
// throttle/redislimit/adaptive_sim_test.go): callers of a limiter against
// a hidden upstream, on one goroutine, with a clock that jumps from event
// to event, so that every run of a test gives the same numbers.
package sim

import (
	"container/heap"
	"time"
)

// The kinds of event in a caller's round: it books a slot, wakes at it
// (again, if the slot moved), its request arrives at the upstream, and
// the answer comes back.
const (
	Book = iota
	Wake
	Arrive
	Answer
)

// Event is something that happens to one caller at one instant.
type Event struct {
	At     time.Duration
	Caller int
	Kind   int // Book, Wake, Arrive or Answer
	seq    int // breaks ties in the order the events were pushed
}

// Queue holds the events to come, earliest first. The zero Queue is
// empty and ready to use.
type Queue struct {
	h   events
	seq int
}

// Push adds an event of kind for caller at at.
func (q *Queue) Push(at time.Duration, caller, kind int) {
	q.seq++
	heap.Push(&q.h, Event{At: at, Caller: caller, Kind: kind, seq: q.seq})
}

// Pop removes and returns the earliest event; of events at one instant,
// the first pushed.
func (q *Queue) Pop() Event { return heap.Pop(&q.h).(Event) }

// Len returns how many events are to come.
func (q *Queue) Len() int { return q.h.Len() }

type events []Event

func (h events) Len() int { return len(h) }
func (h events) Less(i, j int) bool {
	if h[i].At != h[j].At {
		return h[i].At < h[j].At
	}
	return h[i].seq < h[j].seq
}
func (h events) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *events) Push(x any)   { *h = append(*h, x.(Event)) }
func (h *events) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
