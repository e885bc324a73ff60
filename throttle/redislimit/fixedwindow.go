package redislimit

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// FixedWindow is [throttle.FixedWindow] with its state in Redis: at most
// limit units per window, windows aligned to the Unix epoch on the
// server's clock (plus [WithWindowOffset]), as daily quotas that reset at
// midnight UTC are. A full window books into a later one: callers get a
// slot at its start. Its key is prefix{key}:fw:<limit>/<window>, with
// "+<offset>" appended when there is one.
//
// A FixedWindow is safe for concurrent use. Close it when done.
type FixedWindow struct {
	*limiter
	limit  int
	window time.Duration
}

// NewFixedWindow returns a fixed window per key, kept in rdb, of limit
// units per window. [WithTolerance] must be shorter than the window.
func NewFixedWindow(rdb redis.Scripter, limit int, window time.Duration, opts ...Option) (*FixedWindow, error) {
	cfg, s, err := windowed(rdb, "fw", limit, window, opts)
	if err != nil {
		return nil, err
	}
	if cfg.tolerance >= window {
		return nil, fmt.Errorf("redislimit: WithTolerance %v must be shorter than the window %v", cfg.tolerance, window)
	}
	offset := cfg.offset % window
	if offset < 0 {
		offset += window
	}
	s.z, s.w = micros(offset), micros(cfg.tolerance)
	if offset != 0 {
		s.suffix += "+" + offset.String()
	}
	return &FixedWindow{limiter: newLimiter(newCore(rdb, cfg), s), limit: limit, window: window}, nil
}

// Limit returns how many units fit in one window.
func (w *FixedWindow) Limit() int { return w.limit }

// Window returns the window's length.
func (w *FixedWindow) Window() time.Duration { return w.window }
