package middleware

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/egress-go/egress/throttle"
)

// Policies describes, for the headers, the limits that hold a key: one
// RateLimit-Policy item per limit. Build one with [Describe] for each
// distinct set of limits (one per plan tier, say) and reuse it. A
// Policies is immutable and safe for concurrent use.
type Policies struct {
	limits  []limit
	field   string // the RateLimit-Policy field
	clocked bool   // some limit's reset needs the wall clock
}

// kind is how a limit's reset follows from what is left of it.
type kind uint8

const (
	kindBucket  kind = iota // token bucket: full again after (quota-remaining) intervals
	kindFixed               // fixed window: full again at the window's end
	kindLog                 // sliding log: full again a window after its latest unit
	kindCounter             // sliding counter: full again once two windows have passed
)

// limit is one limit as the headers state it.
type limit struct {
	name   string
	kind   kind
	quota  int           // q
	size   int           // units it holds when full: a bucket's burst, a window's limit
	window int64         // w, in whole seconds, rounded up
	step   time.Duration // kindBucket: the interval per unit; windows: the window
	part   throttle.Limiter
}

// Describe returns the Policies of the limits ls, which must all hold for
// a key (as in [throttle.All]). Each is a token bucket, a fixed window, a
// sliding window or a sliding window counter, from package throttle or
// package redislimit; Describe panics on anything else, or on none.
//
// What the headers state, per limit:
//
//   - token bucket (rate r, burst B): w is the time the bucket takes to
//     refill its burst, in whole seconds rounded up, and q what it refills
//     in w (20 a second with a burst of 10: q=20;w=1); r is what is left
//     of the burst, and t the time until the bucket is full again. Since
//     t is whole seconds, a client that waits for it with nothing left
//     gets at most B per second: give the bucket a burst of at least a
//     second's worth of its rate when clients are to use all of it (an
//     egress client that paces the key with a limiter, or learns it, tells
//     the refill from the answers, and uses about 90% of a smaller one);
//   - fixed window: q=limit per w=window; t is the time to the window's
//     end, on a grid aligned to the Unix epoch (a window moved with
//     WithWindowOffset is not supported: its t would be wrong);
//   - sliding window (exact log): q=limit per w=window; t is when its
//     oldest counted unit leaves;
//   - sliding window counter: q=limit per w=window; t is the end of its
//     grid's window, as go-chi/httprate states it. With nothing left, t is
//     when a unit comes back; with WithXRateLimit(ResetEpoch), the first
//     end of a window of its grid at which one has, so that every epoch
//     stated names an end of its grid.
//
// A Redis window's grid follows the Redis server's clock while t is
// measured on this process's clock: keep them in sync (NTP), as any
// fixed-window quota needs.
//
// Windows are stated in whole seconds, rounded up, as the IETF fields
// require; so a limit stated is never looser than the limit enforced.
// Limits are stated as configured: WithTolerance, which keeps headroom
// for a client matching an upstream, has no use on a server, and a
// limiter built with it is stricter than its headers say.
// Leaky buckets are not described: refusing at once, a leaky bucket
// admits one request per interval, whatever is left of its line.
func Describe(ls ...throttle.Limiter) *Policies {
	if len(ls) == 0 {
		panic("middleware: Describe given no Limiter")
	}
	p := &Policies{limits: make([]limit, 0, len(ls))}
	seen := map[string]int{}
	list := make(httpsfv.List, 0, len(ls))
	for i, l := range ls {
		if l == nil {
			panic(fmt.Sprintf("middleware: Describe given a nil Limiter (#%d)", i))
		}
		lim, ok := describe(l)
		if !ok {
			panic(fmt.Sprintf("middleware: Describe cannot describe a %T: give it token buckets and windows from throttle or redislimit", l))
		}
		seen[lim.name]++
		if n := seen[lim.name]; n > 1 {
			lim.name += "-" + strconv.Itoa(n)
		}
		p.limits = append(p.limits, lim)
		p.clocked = p.clocked || lim.kind == kindFixed || lim.kind == kindCounter
		it := httpsfv.NewItem(lim.name)
		it.Params.Add("q", int64(lim.quota))
		it.Params.Add("w", lim.window)
		list = append(list, it)
	}
	v, err := httpsfv.Marshal(list)
	if err != nil {
		panic("middleware: " + err.Error()) // names are ours: cannot happen
	}
	p.field = v
	return p
}

// String returns the RateLimit-Policy field that p puts on responses, as
// "bucket";q=50;w=1.
func (p *Policies) String() string { return p.field }

// describe returns the limit l enforces, when it is a kind this package
// knows. redislimit's types are known by their names and methods, so that
// this package does not depend on go-redis.
func describe(l throttle.Limiter) (limit, bool) {
	type bucket interface {
		Rate() throttle.Rate
		Burst() int
	}
	type window interface {
		Limit() int
		Window() time.Duration
	}
	switch v := l.(type) {
	case bucket:
		r, b := v.Rate(), v.Burst()
		step := r.Per / time.Duration(r.N)
		if step*time.Duration(r.N) < r.Per {
			step++ // the interval rounds up, as the limiters' own
		}
		w := ceilSeconds(step * time.Duration(b))
		q := int(min(time.Duration(w)*time.Second/step, math.MaxInt32))
		return limit{name: "bucket", kind: kindBucket, quota: q, size: b, window: w, step: step, part: l}, true
	case window:
		lim := limit{quota: v.Limit(), size: v.Limit(), step: v.Window(), window: ceilSeconds(v.Window()), part: l}
		typ := reflect.TypeOf(l)
		if typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		switch typ.Name() {
		case "FixedWindow":
			lim.name, lim.kind = "fixed", kindFixed
		case "SlidingWindow":
			lim.name, lim.kind = "sliding", kindLog
		case "SlidingWindowCounter":
			lim.name, lim.kind = "sliding", kindCounter
		default:
			return limit{}, false
		}
		return lim, true
	}
	return limit{}, false
}

// ceilSeconds returns d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// returner is a sliding log that tells when its oldest unit leaves:
// throttle's ([throttle.SlidingWindow.Returns]).
type returner interface {
	Returns(ctx context.Context, key string) (time.Duration, error)
}

// reset returns the t stated for l when remaining units of it are left
// at now (see Describe for what it means for each kind); grid says it is
// stated as an epoch. A client that sends remaining units more before it
// is never refused, and one that waits for it with none left is
// admitted.
func (l *limit) reset(ctx context.Context, key string, remaining int, now time.Time, grid bool) time.Duration {
	switch l.kind {
	case kindBucket:
		return time.Duration(max(l.size-remaining, 0)) * l.step
	case kindFixed:
		return l.windowEnd(now)
	case kindLog:
		// Full again a window after its latest unit, which is now, was
		// true; but a client that runs out books its next units at t,
		// and waited a window for units that came back long before (the
		// README recipe against a log of 100 per 5 s: 2.0× the minimum).
		// So t is when its oldest unit leaves: "until additional quota
		// is made available", as the IETF draft has it since -10.
		if rt, ok := l.part.(returner); ok {
			if d, err := rt.Returns(ctx, key); err == nil {
				return d
			}
		}
		return l.step
	default:
		// t is when the window of the counter's grid ends, as
		// httprate states it. It was two windows, when the counter is
		// surely empty, and a client that ran out waited that long (the
		// README recipe, a counter of 100 per 5 s: 2.1–2.6× the
		// minimum). With nothing left, a window spent in full still
		// weighs on the next one at its start, so its end is no answer:
		// t is when a unit comes back ("until additional quota is made
		// available", as for the log). Stated as an epoch, it is the
		// first end of a window at which one has: an end off the grid
		// read as a window that moved, and met 429s (x epoch, 32
		// goroutines). grid says which. The first end with a unit back
		// was t for every dialect, and the recipe stating IETF fields
		// or delays waited up to two windows for a unit back in 50 ms:
		// 1.7× the minimum (TestRecipeMeetsTheGoals).
		end := l.windowEnd(now)
		if remaining > 0 {
			return end
		}
		in, ok := l.part.(throttle.Inspector)
		if !ok {
			return end + l.step // two boundaries on, the counter is empty
		}
		ks, err := in.Inspect(ctx, key)
		if err != nil {
			return end + l.step
		}
		if !grid {
			return max(ks.Next, 0)
		}
		if ks.Next > end {
			end += (ks.Next - end + l.step - 1) / l.step * l.step
		}
		return end
	}
}

// windowEnd returns how long from now until the window of l's grid,
// aligned to the Unix epoch, ends.
func (l *limit) windowEnd(now time.Time) time.Duration {
	w := int64(l.step)
	into := now.UnixNano() % w
	if into < 0 {
		into += w
	}
	return time.Duration(w - into)
}

// state is what the headers say about one limit on one response.
type state struct {
	remaining int
	reset     time.Duration
}

// maxLimits is how many limits the headers describe without allocating.
const maxLimits = 4

// states returns each limit's remaining units and reset. The reservation
// reports the fewest remaining across every limit (as All does); each
// limit has at least that many, so stating it for each is never untrue.
// When it is 0, the limits that can be inspected are, so that an exhausted
// burst does not claim an exhausted daily quota: a client pauses on a
// remaining of 0 until its reset. grid says the resets are stated as
// epochs (see limit.reset).
func (p *Policies) states(ctx context.Context, key string, remaining int, now time.Time, grid bool, dst []state) []state {
	for i := range p.limits {
		l := &p.limits[i]
		r := remaining
		if remaining == 0 && len(p.limits) > 1 {
			if in, ok := l.part.(throttle.Inspector); ok {
				if ks, err := in.Inspect(ctx, key); err == nil {
					r = max(min(ks.Remaining, l.size), 0)
				}
			}
		}
		dst = append(dst, state{remaining: r, reset: l.reset(ctx, key, r, now, grid)})
	}
	return dst
}

// appendField appends the RateLimit field for ss to b:
//
//	"bucket";r=5;t=1, "fixed";r=90;t=3600
//
// It is written by hand, not through httpsfv, because it is built on
// every response and the allocation goal (≤ 2 per request) leaves no room
// for httpsfv's; the tests check it against httpsfv and retryafter.
func (p *Policies) appendField(b []byte, ss []state) []byte {
	for i, s := range ss {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '"')
		b = append(b, p.limits[i].name...)
		b = append(b, `";r=`...)
		b = strconv.AppendInt(b, int64(s.remaining), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, ceilSeconds(s.reset), 10)
	}
	return b
}

// binding returns the index of the state a client must heed first: the
// fewest remaining, and among those the longest reset.
func binding(ss []state) int {
	j := 0
	for i, s := range ss {
		if s.remaining < ss[j].remaining || (s.remaining == ss[j].remaining && s.reset > ss[j].reset) {
			j = i
		}
	}
	return j
}
