package throttle

// learnedLimit is what a window's key learned of the upstream's limit
// from its refusals: a configured limit the upstream refuses is too
// high, and the stricter of the two wins. It exists for the README's
// recipe configured 25% above the upstream's limit against an upstream
// that answers a bare 429 with Retry-After (recipe_upstreams_test.go,
// 429 only: a sliding log to 32 goroutines had 100 429s in 600 requests,
// 2 failed, 1.80× the published run; the windows to 4 goroutines 9–10
// 429s): each 429 paused the key to the upstream's next window, and the
// key came back at the same limit, to be refused again.
//
// The measure is a window's refusals. The units the key booked in the
// upstream's window that holds a refused unit's slot, less the units
// refused there, are at least what the upstream admitted there from this
// client, and it was full: its limit is at most that. For a
// [SlidingWindow] that window is the one that ends at the slot, and the
// key's log counts it exactly. For a [FixedWindow] it is the key's own
// window (the configuration says the upstream's grid is this one),
// unless fewer units were booked there than the limit less maxCut: then
// the upstream's window is not where the key thinks (a window that
// starts at the first request refuses the first units of the key's next
// window), and the count is of the key's window with the one before it,
// which hold the upstream's wherever it lies, and so never cuts. Where
// the key no longer knows what it booked (a fixed window whose cursor
// moved on), the count is the limit: a window never books more.
// So a burst configured at 125 of which 25 came back refused teaches 100
// once every refusal is in, and a lone refusal of a window at the
// published limit (jitter) teaches one unit less.
//
// The limit falls by at most maxCut a refusal, to no less than one unit
// a window, and is kept for learnedFor after the last refusal that bore
// it out, then forgotten, as a bucket's learned rate is (learnrate.go):
// an upstream whose limit rose, or a hostile spell that ended, gets the
// configured limit back at the cost of one window's refusals a
// learnedFor. A key's state holds it only once the key was refused (a
// pointer, for the memory goal: ≤ 256 B a key). A refusal that states a
// quota teaches nothing here: the record follows what it states.
type learnedLimit struct {
	limit   int64     // the learned limit; 0 when there is none
	at      int64     // when limit was last set
	refused []refusal // units refused lately, in the order heard
}

// refusal is n units refused at the slot at.
type refusal struct{ at, n int64 }

// maxRefusals bounds the refusals a key remembers: enough for a window
// configured far above the upstream's (a refusal per unit), bounded
// against a hostile upstream that refuses everything.
const maxRefusals = 256

// limitOf returns the limit in force at now for a window configured at
// limit, with l learned (nil: none).
func limitOf(l *learnedLimit, limit, now int64) int64 {
	if l == nil || l.limit == 0 || now-l.at > learnedFor {
		return limit
	}
	return min(limit, l.limit)
}

// fitting returns the limit a booking of n units is held to at now: the
// limit in force, or n when that is smaller, so that a learned limit
// below a call's cost still lets the call through an empty window (the
// configured limit is at least n: the engine checks that).
func fitting(l *learnedLimit, limit, now int64, n int) int64 {
	return max(limitOf(l, limit, now), int64(n))
}

// refuse notes n units refused at slot, heard at now, and lowers the
// limit to what the refused window shows: the units booked in it, less
// those refused there, counted in tight, or in safe when tight counts
// too few (see window). configured is the limit the window was
// configured with.
func (l *learnedLimit) refuse(now, slot, n int64, tight, safe windowCount, configured int64) {
	cur := limitOf(l, configured, now)
	if l.limit != 0 && now-l.at > learnedFor {
		l.limit = 0 // forgotten: the configured limit again
	}
	old := 0
	for old < len(l.refused) && l.refused[old].at < slot-2*(safe.hi-safe.lo+1) {
		old++ // too old to fall in the window of any refusal still on its way
	}
	if len(l.refused)-old >= maxRefusals {
		old++
	}
	l.refused = append(append(l.refused[:0], l.refused[old:]...), refusal{at: slot, n: n})
	least := max(int64(float64(cur)*(1-maxCut)), 1)
	bound := tight.booked - l.in(tight)
	if bound < least {
		// Fewer units were booked there than the upstream admitted
		// before: its window is not where the key thinks.
		bound = safe.booked - l.in(safe)
	}
	if bound = max(bound, least); bound <= cur {
		l.limit, l.at = bound, now
	}
}

// in returns the units refused in sp.
func (l *learnedLimit) in(sp windowCount) int64 {
	n := int64(0)
	for _, r := range l.refused {
		if r.at >= sp.lo && r.at <= sp.hi {
			n += r.n
		}
	}
	return n
}

// windowCount is what a key booked in the slots lo to hi.
type windowCount struct{ lo, hi, booked int64 }

// refusedSlot returns the slot an attempt was booked at, from its answer
// heard at now: sent Latency before now, Late after its slot.
func refusedSlot(now int64, o Outcome) int64 {
	return now - int64(max(o.Latency, 0)) - int64(max(o.Late, 0))
}

// window is implemented by the windows' arithmetic.
type window[S any] interface {
	algorithm[S]
	// spans returns what the key booked in the upstream's window that
	// holds slot, if the key's windows are the upstream's (tight), and in
	// slots that hold that window wherever it lies (safe).
	spans(s *S, slot int64) (tight, safe windowCount)
	// learnedOf returns what the key learned, allocating it.
	learnedOf(s *S) *learnedLimit
	// configured returns the limit the window was configured with.
	configured() int64
}

// learnLimit feeds one answer to key's learned limit: only a refusal of
// units the key booked teaches anything, so an admitted answer takes no
// lock.
func learnLimit[S any, A window[S]](e *engine[S, A], key string, o Outcome) {
	if o.Failed || !o.Throttled || o.N <= 0 || len(o.Statements) > 0 {
		return // a refusal that states a quota is the record's to follow
	}
	ks, now, err := e.lock(key)
	if err != nil {
		return // a full limiter: the answer teaches nothing
	}
	defer ks.mu.Unlock()
	slot := refusedSlot(now, o)
	tight, safe := e.alg.spans(&ks.s, slot)
	e.alg.learnedOf(&ks.s).refuse(now, slot, int64(o.N), tight, safe, e.alg.configured())
}
