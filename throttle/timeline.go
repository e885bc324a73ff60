package throttle

import "time"

// timeline measures time in nanoseconds since a limiter was built, on the
// monotonic clock unless WithClock replaced it. Window alignment needs
// wall time too: it is read once, at the start, and advanced by the
// timeline from then on.
type timeline struct {
	now   func() time.Time // nil means time.Now
	start time.Time
}

func newTimeline(now func() time.Time) timeline {
	if now == nil {
		return timeline{start: time.Now()}
	}
	return timeline{now: now, start: now()}
}

// read returns the current offset. It may run backwards when an injected
// clock does; callers clamp it against the newest reading they have seen.
func (t *timeline) read() int64 {
	if t.now == nil {
		return int64(time.Since(t.start))
	}
	return int64(t.now().Sub(t.start))
}

// unixNano returns the wall time at offset at, in Unix nanoseconds.
func (t *timeline) unixNano(at int64) int64 {
	return t.start.UnixNano() + at
}
