package redislimit

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress/throttle"
)

// SlidingWindow is [throttle.SlidingWindow] with its state in Redis: at
// most limit units in any window of the given length, exactly. It keeps
// a log of slots, future ones included, in a sorted set at
// prefix{key}:sl:<limit>/<window>, trimmed on each call to the last
// limit entries, so a call does work bounded by the limit.
//
// A SlidingWindow is safe for concurrent use. Close it when done.
type SlidingWindow struct {
	*limiter
	limit  int
	window time.Duration
}

// NewSlidingWindow returns an exact sliding window per key, kept in rdb,
// that admits at most limit units in any window.
func NewSlidingWindow(rdb redis.Scripter, limit int, window time.Duration, opts ...Option) (*SlidingWindow, error) {
	cfg, s, err := windowed(rdb, "sl", limit, window, opts)
	if err != nil {
		return nil, err
	}
	return &SlidingWindow{limiter: newLimiter(newCore(rdb, cfg), s), limit: limit, window: window}, nil
}

// windowed checks what the windowed limiters share and builds their spec.
func windowed(rdb redis.Scripter, algo string, limit int, window time.Duration, opts []Option) (config, spec, error) {
	if limit < 1 {
		return config{}, spec{}, fmt.Errorf("redislimit: limit must be at least 1, got %d", limit)
	}
	if window <= 0 {
		return config{}, spec{}, fmt.Errorf("redislimit: window must be positive, got %v", window)
	}
	cfg, err := newConfig(rdb, opts)
	if err != nil {
		return config{}, spec{}, err
	}
	w := window
	if algo != "fw" {
		w += cfg.tolerance
	}
	us, err := checkSpan("window", 4, w)
	if err != nil {
		return config{}, spec{}, err
	}
	name := throttle.Rate{N: limit, Per: window}.String()
	return cfg, spec{algo: algo, x: int64(limit), y: us, suffix: algo + ":" + name, most: limit}, nil
}

// Limit returns how many units fit in one window.
func (w *SlidingWindow) Limit() int { return w.limit }

// Window returns the window's length.
func (w *SlidingWindow) Window() time.Duration { return w.window }
