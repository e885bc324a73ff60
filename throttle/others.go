package throttle

import (
	"math"
	"time"
)

// otherClients estimates how fast other clients, which this record never
// sees, spend a quota's window: what the upstream says was spent, less
// what this client had admitted and less what it had sent and not yet
// heard back about (those may have been counted already). It is kept for
// the windows whose ends are learned (windowend.go): their answers name
// the window they were counted in.
//
// For a fixed window, what others spent since the window started, over
// the time since; for a sliding window counter (which weighs the
// previous window by the part of it still inside the sliding one), what
// others spent over the window. Before a boundary has told which, the
// sliding counter's figure: exact for one, and for a fixed window a
// lower bound (others' spending over the whole window, where part of it
// has passed). Left unestimated until then, the units paced after the
// first reset took the whole limit per window, and on 5d (httprate with
// another client at 20%) met a 429 and its 1 s pause in the second
// window. The estimate of the latest answer of the current window, once
// a quarter of it has passed for a fixed one, and of the previous
// window, whichever is higher, is kept out of the budget: out of what is
// left before the reset and out of the pace after it.
type otherClients struct {
	okCur, okPrev  int     // units this client had admitted in the current and the previous window
	rate, prevRate float64 // units per ns: the latest estimate of this window and the last of the previous
	// guess is the estimate of a window not yet told fixed or sliding,
	// in units per ns. It is kept out of the pace after the reset only:
	// what is left before it is the statement's, as the configured
	// limiter's burst already spent it.
	guess float64
}

// roll starts a new window; next tells whether it follows the previous
// one directly.
func (o *otherClients) roll(next bool) {
	o.okPrev = 0
	if next {
		o.okPrev = o.okCur
	}
	o.okCur, o.prevRate, o.rate, o.guess = 0, o.rate, 0, 0
}

// observe counts the answer a, stating s for q's current window; pending
// is how many units this client had sent and not yet heard back about
// when a arrived, which s may count.
func (o *otherClients) observe(q *statedQuota, s Statement, a arrival, pending int) {
	if a.ok {
		o.okCur += a.n
	}
	w := q.window
	if w <= 0 && !q.fixed {
		w = q.guessWindow() // the first window, before two resets have named its length
	}
	if q.limit <= 0 || s.Remaining < 0 || w <= 0 {
		return
	}
	spent := float64(q.limit - s.Remaining - pending)
	if q.sliding || q.untold() {
		elapsed := a.now - (q.stamp + q.hi - w) // from the latest start: the previous window weighs the most, others the least
		frac := min(max(float64(elapsed)/float64(w), 0), 1)
		r := max(spent-float64(o.okPrev)*(1-frac)-float64(o.okCur), 0) / float64(w)
		if q.sliding {
			o.rate = r
		} else {
			o.guess = r
		}
		return
	}
	elapsed := a.now - (q.stamp + q.hi - w) // from the latest the window can have started
	if elapsed < w/4 {
		return
	}
	o.rate = max(spent-float64(o.okCur), 0) / float64(elapsed)
}

// untold reports whether q's window end is being learned (windowend.go)
// and no boundary has yet told whether it is a fixed window or a
// sliding counter.
func (q *statedQuota) untold() bool {
	return q.stamp != math.MinInt64 && !q.fixed && !q.sliding
}

// guessWindow returns the window q is paced at before one is learned: the
// longest reset stated, rounded up to its precision (see spacing).
func (q *statedQuota) guessWindow() int64 {
	w := max(q.longest, int64(time.Millisecond))
	if q.precision > 0 {
		w = (w + q.precision - 1) / q.precision * q.precision
	}
	return w
}

// pending returns the units of unit this client sent before t and has not
// yet heard back about: those booked for slots before t, and for a quota
// in requests those sent before the record heard anything.
func (k *statedKey) pending(unit string, t int64, a arrival) int {
	n := 0
	for i := range k.flight {
		if f := &k.flight[i]; k.due(f) <= t {
			n += f.of(unit)
		}
	}
	return n + unbookedOf(unit, a.unbooked)
}

// perNs returns the rate kept out of the budget, in units per ns.
func (o *otherClients) perNs() float64 { return max(o.rate, o.prevRate) }

// until returns how many units others are expected to spend in d.
func (o *otherClients) until(d int64) int {
	if d <= 0 {
		return 0
	}
	return int(math.Ceil(o.perNs()*float64(d) - 1e-6)) // not a whole unit more for a rounding error
}

// share returns how many units of a window of w others are expected to
// spend, at most nine tenths of limit: a broken estimate slows the key,
// never stalls it. It paces the units after the reset, so it counts the
// guess of a window not yet told fixed or sliding too. It is not rounded
// to a whole unit: a pace is a rate, and rounding 9.6 up to 10 a window
// left 5d's client 1% short of what the other client left.
func (o *otherClients) share(w int64, limit int) float64 {
	return min(max(o.perNs(), o.guess)*float64(w), float64(limit)*0.9)
}

// repace lays q's paced bookings still ahead out again at q's spacing,
// when it has grown since they were booked: each no sooner than the one
// booked before it plus its units' spacing. Bookings only ever move
// later (a caller asleep in Wait reads its slot again when it wakes), so
// nothing is over-admitted. The spacing grows when others' share does:
// the 32 callers of 5d booked the second window while the first window's
// answers were still coming back, at 48 a second, before what they said
// showed that another client spent 9 of it; held to that, they met a 429
// and its 1 s pause. The pace after a reset also moves to start where
// paceStart says, once a statement says the window was spent.
func (k *statedKey) repace(q *statedQuota, now int64) {
	sp := q.spacing()
	if sp <= 0 {
		return
	}
	next := int64(math.MinInt64)
	start := q.paceStart()
	for i := range k.flight {
		f := &k.flight[i]
		j := f.b.part(q.name)
		if j < 0 || f.b.parts[j].tatAfter == 0 {
			continue // not paced on q
		}
		at := k.due(f)
		if start > q.reset && !f.b.parts[j].before && at >= q.stamp+q.lo {
			next = max(next, start) // paced after a reset that may have no room at it (paceStart)
		}
		if at > now && next > at {
			if at < q.reset && next >= q.reset {
				// Past the reset now: no longer taken from what is left
				// before it, which counted it (shed reads it next).
				q.left += f.of(q.unit)
				f.b.parts[j].before = false
			}
			f.b.slot += next - at
			at = next
		}
		next = at + int64(f.b.n)*sp
	}
	if next > q.tat {
		q.tat = next
	}
}

// shed moves the latest of q's bookings still ahead and before its reset
// past it, at the pace after it, while what is left (less others' share
// until the reset) is below zero: a fixed window booked beyond it sends
// its last units into refusals. Units paced after the previous reset at
// the limit less others' share fill the whole window, and as many more as
// fit between its earliest and latest end: on 5e (go-limiter with
// another client at 20%) the record counted 6 too many while the window
// still had half a second to run, and the last 2-3 met 429s. The moved
// bookings take nothing back from what is left if cancelled.
//
// A first window (no window learned yet) not yet told fixed or sliding
// sheds too, after repace: in 5e's first window the configured limiter booked its callers 21 ms
// apart against what the burst's answers left, another client spent 2
// of it meanwhile, and the last 2-3 met 429s in most passes (a sliding
// counter's first window may give some back later; its moved units cost
// a spacing each). Only what the requests in flight unbooked cannot
// explain is shed (pend, which the statement may have counted: hold.go):
// right after the first burst what is left dips below zero for an
// answer's latency, and shed then, units the window has room for would
// go past its end. Later windows not yet told shed nothing: shedding
// them made 2 refusals where 1 is allowed in 3 of 8 runs of
// TestAcceptanceDialectsShapeThePace's on-demand windows with uneven
// latency (cause not traced).
func (k *statedKey) shed(q *statedQuota, now int64) {
	sp := q.spacing()
	if sp <= 0 || q.left+q.pend >= 0 {
		return
	}
	for i := len(k.flight) - 1; i >= 0 && q.left+q.pend < 0; i-- {
		f := &k.flight[i]
		j := f.b.part(q.name)
		at := k.due(f)
		if j < 0 || at <= now || at >= q.reset {
			continue
		}
		to := max(q.tat, q.reset)
		f.b.slot += to - at
		q.tat = to + int64(f.b.n)*sp
		q.left += f.of(q.unit)
		f.b.parts[j].before, f.b.parts[j].tatAfter = false, 0
	}
}
