package redislimit

import (
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress/throttle"
)

// SlidingWindow is [throttle.SlidingWindow] with its state in Redis: at
// most limit units in any window of the given length, exactly. It keeps
// a log of slots, future ones included, in a sorted set at
// prefix{key}:sl:<limit>/<window> (see slidingwindow.lua), trimmed on each
// call to the last limit entries, so a call does work bounded by the
// limit.
//
// A SlidingWindow is safe for concurrent use. Close it when done.
type SlidingWindow struct {
	*budget
	limit  int
	window time.Duration
}

// NewSlidingWindow returns an exact sliding window per key, kept in rdb,
// that admits at most limit units in any window.
func NewSlidingWindow(rdb redis.Scripter, limit int, window time.Duration, opts ...Option) (*SlidingWindow, error) {
	b, err := newSlidingWindow(rdb, "sl", limit, window, opts)
	if err != nil {
		return nil, err
	}
	return &SlidingWindow{budget: b, limit: limit, window: window}, nil
}

// newSlidingWindow builds the budget of a sliding window (sl or swc):
// the one constructor of both.
func newSlidingWindow(rdb redis.Scripter, algo string, limit int, window time.Duration, opts []Option) (*budget, error) {
	l, cfg, err := windowLimit(algo, limit, window, opts)
	if err != nil {
		return nil, err
	}
	return newBudget(rdb, cfg, l)
}

// windowLimit checks what the windowed limiters share and builds their
// limit. The sliding ones treat their window as [WithTolerance] longer.
func windowLimit(algo string, perWindow int, window time.Duration, opts []Option) (limit, config, error) {
	if perWindow < 1 {
		return limit{}, config{}, fmt.Errorf("redislimit: limit must be at least 1, got %d", perWindow)
	}
	if perWindow > 1<<53 {
		// The scripts count in doubles: a count past 2^53 came back as
		// Remaining -9223372036854775808.
		return limit{}, config{}, fmt.Errorf("redislimit: limit %d is above 2^53, the most a window counts exactly", perWindow)
	}
	if window <= 0 {
		return limit{}, config{}, fmt.Errorf("redislimit: window must be positive, got %v", window)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return limit{}, config{}, err
	}
	w := window
	if algo != "fw" {
		if cfg.tolerance > math.MaxInt64-window {
			return limit{}, config{}, fmt.Errorf("redislimit: WithTolerance of %v is out of range for a window of %v", cfg.tolerance, window)
		}
		w += cfg.tolerance
	}
	us, err := checkSpan("window", 4, w)
	if err != nil {
		return limit{}, config{}, err
	}
	name := throttle.Rate{N: perWindow, Per: window}.String()
	return limit{algo: algo, suffix: algo + ":" + name, most: perWindow, perWindow: int64(perWindow), window: us}, cfg, nil
}

// Limit returns how many units fit in one window.
func (w *SlidingWindow) Limit() int { return w.limit }

// Window returns the window's length.
func (w *SlidingWindow) Window() time.Duration { return w.window }
