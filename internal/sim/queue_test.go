package sim_test

import (
	"fmt"
	"time"

	"github.com/egress-go/egress/internal/sim"
)

// Events come out earliest first; of two at one instant, the first
// pushed.
func ExampleQueue() {
	var q sim.Queue
	q.Push(20*time.Millisecond, 1, sim.Answer)
	q.Push(10*time.Millisecond, 2, sim.Wake)
	q.Push(10*time.Millisecond, 0, sim.Book)
	for q.Len() > 0 {
		e := q.Pop()
		fmt.Println(e.At, e.Caller, e.Kind)
	}
	// Output:
	// 10ms 2 1
	// 10ms 0 0
	// 20ms 1 3
}
