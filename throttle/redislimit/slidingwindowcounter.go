package redislimit

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// SlidingWindowCounter is [throttle.SlidingWindowCounter] with its state
// in Redis: the sliding window approximated from two counters, the
// current window's and the previous one's, weighted by how much of the
// previous window the sliding one still covers (see
// slidingwindowcounter.lua). It costs one small string per key, at
// prefix{key}:swc:<limit>/<window>.
//
// A SlidingWindowCounter is safe for concurrent use. Close it when done.
type SlidingWindowCounter struct {
	*budget
	limit  int
	window time.Duration
}

// NewSlidingWindowCounter returns an approximate sliding window per key,
// kept in rdb, of limit units per window.
func NewSlidingWindowCounter(rdb redis.Scripter, limit int, window time.Duration, opts ...Option) (*SlidingWindowCounter, error) {
	b, err := newSlidingWindow(rdb, "swc", limit, window, opts)
	if err != nil {
		return nil, err
	}
	return &SlidingWindowCounter{budget: b, limit: limit, window: window}, nil
}

// Limit returns how many units fit in one window.
func (w *SlidingWindowCounter) Limit() int { return w.limit }

// Window returns the window's length.
func (w *SlidingWindowCounter) Window() time.Duration { return w.window }
