package redislimit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/egress-go/egress/throttle"
)

var (
	_ throttle.Learner = (*TokenBucket)(nil)
	_ throttle.Learner = (*Composite)(nil)
)

// statedSuffix names a key's record of what the upstream stated
// (stated.lua), beside its budget under the same hash tag.
const statedSuffix = "stated"

// maxStatedKeys bounds the keys whose statements wait in a process for
// their key's next script call: past it, statements for further keys
// are dropped until calls take the waiting ones.
const maxStatedKeys = throttle.DefaultMaxKeys

// WithStated makes the limit follow what the upstream states about its
// quotas counted in unit: [throttle.UnitRequests] for a budget of
// requests, or the unit of an LLM API's token quotas as the Transport
// names it ("tokens" for OpenAI's, "input-tokens" and "output-tokens" for
// Anthropic's; see [throttle.Statement.Unit]). The limit then implements
// [throttle.Learner], which a Transport built with egress.WithLimiter
// calls with every response, and what any process learns bounds the
// whole fleet:
//
//   - A quota that refills ([throttle.Statement.Refills]: OpenAI's,
//     Anthropic's) tightens a token or leaky bucket so that, at the
//     instant the stated request was sent, it held no more than the
//     upstream said was left; the units booked for slots after that
//     instant, by any process, are still owed. So tokens another client
//     spends from the same API key are seen by every worker. A window
//     limit ignores such quotas.
//   - A window's statement ("R more before T": X-RateLimit-*, IETF
//     RateLimit, GitHub) is kept in Redis beside the budget: until T,
//     the limit's units of every process are booked only while some of
//     R is left, less what was booked after the stated request was sent.
//     Of two statements of one window, the one for the request sent later
//     wins (not the later to arrive); when they arrived out of order, the
//     lower remaining wins.
//
// A statement only ever tightens: the configured limit still bounds
// every booking. Learn only buffers the newest statement of each quota
// in the process; the key's next script call carries them, and Redis
// applies them in that same call, so following costs no round trip. It
// does cost the single token bucket's fast path (fastpath.lua): a limit
// that follows takes the general path. Without WithStated, Learn does
// nothing. Learn clamps absurd values with [throttle.Statement.Clamp]
// and [throttle.DefaultMaxHold], and the script bounds a bucket's
// tightening likewise: a statement holds a key back for at most a
// minute.
//
// The record is the hash prefix{key}:stated (see docs/redis.md). A
// limit given WithStated cannot take [WithSlotLease]: the units a lease
// hands out are booked in blocks the record cannot place in time. A unit
// that is empty, "-", or holds spaces, control characters or ':' is an
// error.
func WithStated(unit string) Option {
	return option{"WithStated", false, func(c *config) { c.stated = unit }}
}

// follow buffers, for a budget whose limits follow the upstream, the
// statements learned per key until the key's next script call carries
// them (see stated.lua).
type follow struct {
	head  string   // the record's start: '@', then each limit's unit or '-'
	units []string // the units followed

	mu      sync.Mutex
	pending map[string][]heard // by key, the newest statement of each quota
}

// heard is one statement as learned, on the Client's local clock.
type heard struct {
	s       throttle.Statement
	arrived int64 // ns
	sent    int64 // ns: when the stated request was sent
}

// newFollow returns the follow of a budget of limits, or nil when none
// of them follows the upstream.
func newFollow(limits []limit) *follow {
	var b strings.Builder
	b.WriteByte('@')
	var units []string
	for _, l := range limits {
		b.WriteByte(' ')
		if l.unit == "" {
			b.WriteByte('-')
			continue
		}
		units = append(units, l.unit)
		b.WriteString(l.unit)
	}
	if units == nil {
		return nil
	}
	return &follow{head: b.String(), units: units, pending: map[string][]heard{}}
}

// checkStated returns the error of a limit's WithStated, if any.
func checkStated(cfg config) error {
	switch {
	case !cfg.given("WithStated"):
		return nil
	case !validUnit(cfg.stated):
		return fmt.Errorf("redislimit: WithStated unit must be non-empty, not \"-\", and have no spaces or ':', got %q", cfg.stated)
	case cfg.leased():
		return fmt.Errorf("redislimit: WithStated(%q) does not combine with WithSlotLease", cfg.stated)
	}
	return nil
}

// validUnit reports whether u can go into the record's text and a hash
// field's name.
func validUnit(u string) bool {
	// The script splits the record on Lua's %s: \v and \f as well.
	return u != "" && u != "-" && !strings.ContainsFunc(u, func(r rune) bool { return r <= ' ' || r == ':' || r == 0x7f })
}

// field returns name as it can go into the record: its spaces and ':'
// become '_'.
func field(name string) string {
	if name == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r == ':' || r == 0x7f {
			return '_'
		}
		return r
	}, name)
}

// Learn implements [throttle.Learner]: it keeps o's statements about the
// quotas the budget's limits follow ([WithStated]), the newest of each,
// for the key's next script call to carry. It does no I/O. A budget that
// follows nothing ignores them.
func (b *budget) Learn(ctx context.Context, key string, o throttle.Outcome) error {
	if ctx == nil {
		return errNilContext
	}
	f := b.follow
	if f == nil || len(o.Statements) == 0 {
		return nil
	}
	arrived := b.client.now()
	sent := arrived - int64(max(o.Latency, 0))
	f.mu.Lock()
	defer f.mu.Unlock()
	hs, ok := f.pending[key]
	if !ok && len(f.pending) >= maxStatedKeys {
		return nil
	}
	for _, s := range o.Statements {
		s, _ = s.Clamp(throttle.DefaultMaxHold)
		if s.Unit == "" {
			s.Unit = throttle.UnitRequests
		}
		if s.Remaining < 0 || !f.follows(s.Unit) {
			continue
		}
		h := heard{s: s, arrived: arrived, sent: sent}
		i := 0
		for i < len(hs) && hs[i].s.Name != s.Name {
			i++
		}
		switch {
		case i == len(hs):
			hs = append(hs, h)
		case sent >= hs[i].sent:
			hs[i] = h // an answer to an older request changes nothing here
		}
	}
	if len(hs) > 0 {
		f.pending[key] = hs
	}
	return nil
}

// Stated reports whether a limit of the budget follows what the upstream
// states ([WithStated]): the budget then holds a quota stated spent
// itself, in every process, from the key's next call, and an egress
// Transport does not pause the key for a response that is not
// throttling (a 200 at remaining 0), as it does not for the record of
// egress.WithUpstream: a statement is a budget, not a pause. A 429 with
// Retry-After still pauses the key.
func (b *budget) Stated() bool { return b.follow != nil }

// follows reports whether a limit follows quotas in unit.
func (f *follow) follows(unit string) bool { return slices.Contains(f.units, unit) }

// carry adds the record to a script call on key: its text before the
// channel, the last argument, and the key's stated hash after the
// limits' keys. It takes the statements waiting for key and returns
// them: a call that Redis did not answer hands them back (requeue), as
// settles are; one that failed otherwise loses them, which only loses a
// tightening: the next response states the quota again.
func (f *follow) carry(c *Client, key string, ks []string, args []any) ([]string, []any, []heard) {
	f.mu.Lock()
	hs := f.pending[key]
	delete(f.pending, key)
	f.mu.Unlock()
	rec := f.head
	if len(hs) > 0 {
		now := c.now()
		var b strings.Builder
		b.WriteString(f.head)
		for _, h := range hs {
			kind := "w"
			if h.s.Refills {
				kind = "r"
			}
			precision := time.Millisecond
			if h.s.Reset%time.Second == 0 {
				precision = time.Second
			}
			// How long ago the request was sent rounds up, so that the
			// script counts every unit it might not have seen; how long
			// ago the answer arrived rounds down, so that the reset
			// comes no sooner than stated.
			fmt.Fprintf(&b, " %s %s %s %d %d %d %d %d", field(h.s.Name), h.s.Unit, kind, h.s.Remaining,
				ceilMicros(max(now-h.sent, 0)), max(now-h.arrived, 0)/int64(time.Microsecond), micros(h.s.Reset), micros(precision))
		}
		rec = b.String()
	}
	channel := args[len(args)-1]
	args = append(args[:len(args)-1:len(args)-1], rec, channel)
	ks = append(ks[:len(ks):len(ks)], c.prefix+"{"+key+"}:"+statedSuffix)
	return ks, args, hs
}

// requeue hands back the statements a call on key took but Redis did
// not answer, for the key's next call: one learned since, for a later
// request, stays. Applying a statement twice (a call that timed out
// after Redis ran it) changes nothing more than once.
func (f *follow) requeue(key string, hs []heard) {
	if len(hs) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok := f.pending[key]
	if !ok && len(f.pending) >= maxStatedKeys {
		return
	}
	for _, h := range hs {
		i := 0
		for i < len(cur) && cur[i].s.Name != h.s.Name {
			i++
		}
		switch {
		case i == len(cur):
			cur = append(cur, h)
		case h.sent > cur[i].sent:
			cur[i] = h
		}
	}
	f.pending[key] = cur
}
