package llmupstream

import (
	"slices"
	"time"
)

// Stats is what the API has counted since it started.
type Stats struct {
	Start  time.Time     // when the API started; Windows count from here
	Period time.Duration // the limits' period, and the length of each Window

	Requests     int // requests admitted
	InputTokens  int // input tokens of the requests admitted
	OutputTokens int // output tokens of the replies completed
	TooMany      int // 429s sent
	Invalid      int // malformed requests refused with 400

	InFlight    int // admitted requests whose reply is not complete
	MaxInFlight int // the most in flight at once

	// Windows counts per Period from Start: Windows[i] covers
	// [Start+i·Period, Start+(i+1)·Period). A request counts in the
	// window it was admitted in, its output tokens too.
	Windows []Window
}

// Window is what the API counted in one period.
type Window struct {
	Requests     int
	InputTokens  int
	OutputTokens int
	TooMany      int
}

// window returns the index of now's window, growing Windows to hold it.
func (s *Stats) window(now time.Time) int {
	i := max(int(now.Sub(s.Start)/s.Period), 0)
	for len(s.Windows) <= i {
		s.Windows = append(s.Windows, Window{})
	}
	return i
}

// Stats returns a copy of what the API has counted.
func (a *API) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.stats
	s.Windows = slices.Clone(s.Windows)
	return s
}
