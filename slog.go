package egress

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/throttle"
)

// NewSlogObserver returns an [Observer] that logs what a [Transport] does
// to l, for use with [WithObserver]:
//
//   - a refusal (queue full, limit exceeded) at Warn, and a limiter that
//     failed (Redis down, say) at Error;
//   - a pause of a key at Warn, or at Error when the pause itself failed;
//   - a retry at Info;
//   - a wait for the queue or the limiter at Debug.
//
// Every record carries the key hashed, as "key_hash", never the key
// itself: a key may hold a secret ([WithRequestKey] takes any string), so
// it is replaced by the first 16 hex digits of its SHA-256, as
// [KeyByHeader] hashes header values. The same key always gives the same
// hash, so records of one key can be told apart from others and grouped.
// An error's text is logged with the key replaced by its hash too. No
// header value and no body is ever logged.
//
// The library itself never logs: nothing is logged unless this Observer
// is installed. NewSlogObserver panics if l is nil.
func NewSlogObserver(l *slog.Logger) *Observer {
	if l == nil {
		panic("egress: NewSlogObserver given a nil *slog.Logger")
	}
	s := slogObserver{l: l}
	return &Observer{
		Waited:   s.waited,
		Refused:  s.refused,
		Retrying: s.retrying,
		Paused:   s.paused,
	}
}

// slogObserver holds the logger behind NewSlogObserver's funcs.
type slogObserver struct {
	l *slog.Logger
}

func (s slogObserver) waited(w WaitInfo) {
	if !s.l.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	s.log(slog.LevelDebug, "egress: request waited", w.Key, nil,
		slog.Int("attempt", w.Attempt),
		slog.Duration("queue", w.Queue),
		slog.Duration("limiter", w.Limiter))
}

func (s slogObserver) refused(r RefusalInfo) {
	attempt := slog.Int("attempt", r.Attempt)
	var le *throttle.LimitError
	switch {
	case errors.Is(r.Err, queue.ErrFull):
		s.log(slog.LevelWarn, "egress: request refused: queue full", r.Key, nil, attempt)
	case errors.As(r.Err, &le):
		s.log(slog.LevelWarn, "egress: request refused: limit exceeded", r.Key, nil, attempt,
			slog.Duration("retry_after", le.RetryAfter), slog.Bool("deadline", le.Deadline))
	default:
		s.log(slog.LevelError, "egress: request refused: limiter failed", r.Key, r.Err, attempt)
	}
}

func (s slogObserver) retrying(r RetryInfo) {
	s.log(slog.LevelInfo, "egress: retrying request", r.Key, nil,
		slog.Int("attempt", r.Attempt),
		slog.Int("status", r.StatusCode),
		slog.Duration("delay", r.Delay))
}

func (s slogObserver) paused(p PauseInfo) {
	status, d := slog.Int("status", p.StatusCode), slog.Duration("duration", p.Duration)
	if p.Err != nil {
		s.log(slog.LevelError, "egress: pausing key failed", p.Key, p.Err, status, d)
		return
	}
	s.log(slog.LevelWarn, "egress: key paused", p.Key, nil, status, d)
}

// log writes one record about key: the key's hash first, then attrs, then
// err's text with the key hidden when err is not nil.
func (s slogObserver) log(level slog.Level, msg, key string, err error, attrs ...slog.Attr) {
	hash := HashKey(key)
	all := make([]slog.Attr, 0, len(attrs)+2)
	all = append(append(all, slog.String("key_hash", hash)), attrs...)
	if err != nil {
		all = append(all, slog.String("error", hideKey(err, key, hash)))
	}
	s.l.LogAttrs(context.Background(), level, msg, all...)
}

// NewSlogRedisLogger returns a func that logs the health of Redis behind a
// redislimit budget to l: each failed call at Error, and the first call
// that succeeds after failures at Info, with how long Redis was down. The
// package egress does not import redislimit (nor go-redis), so hook it up
// with a one-line func:
//
//	logRedis := egress.NewSlogRedisLogger(logger)
//	redislimit.WithObserver(func(e redislimit.Event) { logRedis(e.Err, e.Recovered, e.Down) })
//
// An error's text is logged as it is: redislimit's errors name Redis's
// address and the failure, not a request's key or headers. It panics if l
// is nil.
func NewSlogRedisLogger(l *slog.Logger) func(err error, recovered bool, down time.Duration) {
	if l == nil {
		panic("egress: NewSlogRedisLogger given a nil *slog.Logger")
	}
	return func(err error, recovered bool, down time.Duration) {
		ctx := context.Background()
		switch {
		case recovered:
			l.LogAttrs(ctx, slog.LevelInfo, "egress: redis recovered", slog.Duration("down", down))
		case err != nil:
			l.LogAttrs(ctx, slog.LevelError, "egress: redis call failed",
				slog.String("error", err.Error()), slog.Duration("down", down))
		}
	}
}

// HashKey returns the first 16 hex digits of the SHA-256 of key, as
// [KeyByHeader] hashes a header value: what the Observer from
// [NewSlogObserver] logs in place of a key, so that a key can be looked
// up in logs without the logs holding the key.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	var buf [keyHashLen * 2]byte
	hex.Encode(buf[:], sum[:keyHashLen])
	return string(buf[:])
}

// hideKey returns err's text with key replaced by its hash, since
// limiters' errors may quote the key. A key of fewer than minHiddenKey
// bytes is replaced only where it is quoted, as %q writes it, so that
// replacing a one-letter key does not garble the message.
func hideKey(err error, key, hash string) string {
	msg := err.Error()
	if key == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, strconv.Quote(key), strconv.Quote("#"+hash))
	if len(key) >= minHiddenKey {
		msg = strings.ReplaceAll(msg, key, "#"+hash)
	}
	return msg
}

// minHiddenKey is the shortest key that hideKey replaces wherever it
// appears.
const minHiddenKey = 6
