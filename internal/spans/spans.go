// Package spans keeps what a stated quota's admitted answers said over
// the last two spans of its window, for the adaptive limiters in process
// (throttle) and through Redis (throttle/redislimit), so that both tell a
// sliding window the same way.
package spans

// Span sums the samples of one span.
type Span struct {
	N         int     // answers
	Sum, High float64 // of the samples
	Low       int     // the least spent (limit less remaining) stated
}

// Spans is the current span of a window and the one before. The zero
// value is empty.
type Spans struct {
	From int64 // when Cur began
	Cur  Span
	Prev Span // the span before Cur, if it ended less than a window ago
}

// Observe adds an answer that arrived at at (ns) for a quota of window w
// (ns), which stated spent, with a sample of the caller's.
func (s *Spans) Observe(at, w int64, spent int, sample float64) {
	if s.Cur.N == 0 || at-s.From >= w {
		s.Prev = Span{}
		if s.Cur.N > 0 && at-s.From < 2*w {
			s.Prev = s.Cur
		}
		s.Cur, s.From = Span{Low: spent}, at
	}
	s.Cur.N++
	s.Cur.Sum += sample
	s.Cur.High = max(s.Cur.High, sample)
	s.Cur.Low = min(s.Cur.Low, spent)
}

// Sliding reports whether the last whole span of a quota of limit never
// had less than half of it spent: a window that drains all the time. A
// fixed window falls to nothing at its boundary.
func (s *Spans) Sliding(limit int) bool {
	return s.Prev.N > 0 && s.Prev.Low >= limit/2
}
