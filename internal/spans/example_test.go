package spans_test

import (
	"fmt"
	"time"

	"github.com/egress-go/egress/internal/spans"
)

// A quota of 48 a second whose answers, 100 ms apart, state 45 to 47
// spent for two seconds: a window that never gives its units back at a
// boundary.
func ExampleSpans_Sliding() {
	var s spans.Spans
	w := int64(time.Second)
	for i := range 20 {
		s.Observe(int64(i)*int64(100*time.Millisecond), w, 45+i%3, 0)
	}
	fmt.Println(s.Sliding(48))
	// Output: true
}
