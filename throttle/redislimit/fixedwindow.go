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
// "+<offset>" appended when there is one (see fixedwindow.lua).
//
// With [WithTolerance](d), a unit booked in the last d of a window is
// still booked there, and also counts against the next window: a request
// sent just before the reset may reach the upstream just after it.
//
// A FixedWindow is safe for concurrent use. Close it when done.
type FixedWindow struct {
	*budget
	limit  int
	window time.Duration
}

// NewFixedWindow returns a fixed window per key, kept in rdb, of limit
// units per window. [WithTolerance] must be shorter than the window.
func NewFixedWindow(rdb redis.Scripter, limit int, window time.Duration, opts ...Option) (*FixedWindow, error) {
	l, cfg, err := windowLimit("fw", limit, window, opts)
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
	l.offset, l.tolerance = micros(offset), micros(cfg.tolerance)
	if offset != 0 {
		l.suffix += "+" + offset.String()
	}
	b, err := newBudget(rdb, cfg, l)
	if err != nil {
		return nil, err
	}
	return &FixedWindow{budget: b, limit: limit, window: window}, nil
}

// Limit returns how many units fit in one window.
func (w *FixedWindow) Limit() int { return w.limit }

// Window returns the window's length.
func (w *FixedWindow) Window() time.Duration { return w.window }
