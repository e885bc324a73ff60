package tolerance

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Half-lives of the headroom's decay, and of the jitter's and the
// latency floor's memories.
const (
	// settleHalfLife is how fast the headroom falls back towards the
	// jitter it needs: halfway every 100 ms of answers without a refusal.
	settleHalfLife = 100 * time.Millisecond
	// jitterHalfLife is how fast the measured jitter forgets a spike.
	jitterHalfLife = 2 * time.Second
	// floorSpan is how long the least latency seen is remembered (two
	// spans at most): a path that became slower raises it after that.
	floorSpan = 2 * time.Second
)

// Headroom is the tolerance a bucket keeps in use, up to a cap (the
// WithTolerance of a limiter), when its burst cannot spare the cap and
// so pays it on every interval. It starts at the cap and follows what
// the upstream shows:
//
//   - Answers without a refusal let it fall, by half every 100 ms: to
//     nothing until the upstream has refused an attempt the budget
//     admitted (an upstream whose own burst absorbs the jitter costs it
//     nothing), and from then on towards the jitter measured on the path.
//   - Each refusal of an attempt the budget admitted raises it to the cap
//     at once.
//
// The measured jitter is how much closer together than booked two
// attempts may reach the upstream: a decaying maximum of the lateness of
// a send after its slot plus its latency above the least latency seen
// lately.
//
// A nil *Headroom is a tolerance of 0. Get is one atomic load; Learn
// takes a mutex. A Headroom is safe for concurrent use.
type Headroom struct {
	cap int64
	cur atomic.Int64

	mu      sync.Mutex
	strict  bool  // the upstream refused an attempt the budget admitted
	at      int64 // when Learn last ran, in the caller's nanoseconds
	seen    bool  // at is set
	jitter  float64
	lowNow  int64 // least latency in the current span, 0 when none yet
	lowPrev int64 // least latency in the span before, 0 when none
	spanAt  int64 // when the current span began
}

// NewHeadroom returns a headroom of at most limit, which starts at limit.
// It returns nil for a limit of 0 or less.
func NewHeadroom(limit time.Duration) *Headroom {
	if limit <= 0 {
		return nil
	}
	h := &Headroom{cap: int64(limit)}
	h.cur.Store(int64(limit))
	return h
}

// Cap returns the most the headroom may be.
func (h *Headroom) Cap() time.Duration {
	if h == nil {
		return 0
	}
	return time.Duration(h.cap)
}

// Get returns the headroom in use, in nanoseconds.
func (h *Headroom) Get() int64 {
	if h == nil {
		return 0
	}
	return h.cur.Load()
}

// Learn updates the headroom with one attempt's outcome at now (in
// nanoseconds on any monotonic timeline of the caller's): how late it
// was sent after its slot, its latency (0 when unknown), and whether the
// upstream refused it to slow the client down.
func (h *Headroom) Learn(now int64, late, latency time.Duration, throttled bool) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	dt := int64(0)
	if h.seen {
		dt = max(now-h.at, 0)
	}
	h.at, h.seen = max(now, h.at), true
	h.jitter *= decay(dt, jitterHalfLife)
	if latency > 0 {
		if now-h.spanAt >= int64(floorSpan) {
			h.lowPrev, h.lowNow, h.spanAt = h.lowNow, 0, now
		}
		if h.lowNow == 0 || int64(latency) < h.lowNow {
			h.lowNow = int64(latency)
		}
	}
	sample := max(int64(late), 0)
	if low := h.low(); latency > 0 && low > 0 {
		sample += int64(latency) - low
	}
	h.jitter = max(h.jitter, float64(sample))
	if throttled {
		h.strict = true
		h.cur.Store(h.cap)
		return
	}
	floor := min(h.jitter, float64(h.cap))
	if !h.strict {
		floor = 0
	}
	cur := float64(h.cur.Load())
	next := max(floor+(cur-floor)*decay(dt, settleHalfLife), floor)
	h.cur.Store(min(int64(math.Ceil(next)), h.cap))
}

// low returns the least latency remembered, 0 when none.
func (h *Headroom) low() int64 {
	switch {
	case h.lowPrev == 0:
		return h.lowNow
	case h.lowNow == 0:
		return h.lowPrev
	}
	return min(h.lowNow, h.lowPrev)
}

// decay returns the share of a quantity left after dt nanoseconds of a
// decay that halves it every half.
func decay(dt int64, half time.Duration) float64 {
	if dt <= 0 {
		return 1
	}
	return math.Exp2(-float64(dt) / float64(half))
}

// Span returns the interval and the span of burst (in nanoseconds; a
// GCRA's tolerance plus one interval) of a token bucket with the given
// interval and burst that keeps a headroom of h: the burst's span less
// h, so that the sustained rate is untouched, as long as at least one
// interval of it is left; beyond that, a burst of one interval, longer
// by what is left of h.
func Span(interval int64, burst int, h int64) (int64, int64) {
	span := int64(burst) * interval
	if h <= 0 {
		return interval, span
	}
	if span-h >= interval {
		return interval, span - h
	}
	longer := interval + h - (span - interval)
	return longer, longer
}
