package throttle

import "github.com/egress-go/egress/internal/spans"

// Tuning of the estimate of other clients' spending (see adaptiveOthers).
const (
	// adaptiveOthersWindow is the longest stated window whose other
	// clients are estimated: the estimate keeps the arrival of every
	// unit admitted within one window, so it is kept for short windows
	// only.
	adaptiveOthersWindow = 10e9 // ns
	// adaptiveOthersKept bounds the admitted units kept per key.
	adaptiveOthersKept = 4096
	// adaptiveOthersNoise is the estimate, in units per window, below
	// which it is taken as noise (answers counted a little before or
	// after the upstream counted them): 5a/5c, with no other client,
	// lose utilization to a noise floor of one or two units.
	adaptiveOthersNoise = 2
)

// adaptiveOthers estimates how many units of one stated quota's window
// other clients, which this limiter never sees, spend: what the upstream
// says was spent (limit less remaining) less the units this client had
// admitted over the last window. Samples are gathered over spans of one
// window.
//
//   - A sliding window's samples hover around the others' share (the
//     counter weighs the window before as if it were spent evenly), so
//     the estimate is their mean over the last span; the max would keep
//     the noise (5d: 86% of what was left used with the max).
//   - A fixed window's samples climb from about nothing after its
//     boundary to the others' share at its end, so the estimate is the
//     highest over the last span and the current one.
//
// The window is taken as sliding when what was spent never fell below
// half the limit over the last span (a fixed window's boundary gives it
// all back; at the pace of this limiter, a sliding one keeps a window's
// worth spent at every instant). Only admitted answers are sampled: a
// throttled answer's remaining of 0 bounds what others spent, it does
// not measure it.
type adaptiveOthers struct {
	name  string
	spans spans.Spans // the samples: what others spent, beside what was stated spent

	// A token bucket may state its rate as a quota per window and what
	// is left of its burst as what remains (egress's middleware:
	// "bucket";q=47;w=1 over a burst of 9): what remains then stays at
	// the burst while this client sends below the rate, whatever it
	// sends, so the spent it implies (limit less remaining) stays put
	// while this client's own units over the window grow. No window
	// does that: there, every unit admitted adds to what was spent.
	// Read as another client's, the burst held the adaptive recipe to a
	// ninth of the limit, and it climbed back over seconds (73% of the
	// limit used in 12 s). Once seen, the quota is taken to be such a
	// bucket and its others are not estimated.
	pinSpent, pinOwn int  // the spent and own units a pin is measured from
	pinned           bool // spent stayed put while own units grew from none

	// A bucket whose burst each request spends (a burst of 1: "r=0;t=1"
	// on every answer, t being whole seconds) held the adaptive recipe to
	// its reset after every answer, a unit a second against 10 a second,
	// and its callers' waits past the max wait failed 119 of 150
	// requests. A window's reset gives what it states back: the first
	// request sent after a hold to the reset that is still admitted at 0
	// says the quota refills (see [Adaptive.follow]).
	heldTo  int64 // when the last hold to the reset ended
	refills bool  // admitted at 0 again past a hold to the reset
}

// othersMinSamples is how many admitted answers of a quota the estimate
// of other clients waits for. The first answer of a bucket whose burst a
// request spends reads as a window that others spent (a burst of 1 of
// 10 a second: 9 of 10), and the rate set from it laid 32 callers out
// over 32 s, past the max wait; the second tells the bucket (refills).
const othersMinSamples = 2

// pinStep is how many of this client's own units over a window must be
// admitted, from fewer than that, while what the quota says was spent
// stays exactly put, before the quota is taken for a bucket stating its
// burst (see adaptiveOthers).
const pinStep = 3

// pin notes a sample of what was spent and of this client's own units
// over the last window, and marks the quota pinned once the own units
// grew from under pinStep by pinStep while spent stayed the same. Only
// from (nearly) none: a sliding counter at its limit states the same
// remaining answer after answer while this client's own units over the
// window wobble by a few; and only while spent stays exactly the same:
// a counter's window before, decaying, or a window's boundary changes
// it.
func (o *adaptiveOthers) pin(spent, own int) {
	switch {
	case o.pinned:
	case spent != o.pinSpent || own < o.pinOwn:
		o.pinSpent, o.pinOwn = spent, own
	case o.pinOwn < pinStep && own-o.pinOwn >= pinStep:
		o.pinned = true
	}
}

// sliding reports whether the last span showed a sliding window.
func (o *adaptiveOthers) sliding(limit int) bool {
	return !o.pinned && o.spans.Sliding(limit)
}

// units returns the units per window kept for other clients, at most
// nine tenths of limit: a broken estimate slows the key, never stalls it.
func (o *adaptiveOthers) units(limit int) float64 {
	var u float64
	switch {
	case o.sliding(limit):
		u = o.spans.Prev.Sum / float64(o.spans.Prev.N)
	default:
		u = max(o.spans.Cur.High, o.spans.Prev.High)
	}
	if u < adaptiveOthersNoise {
		return 0
	}
	return min(u, float64(limit)*0.9)
}

// admittedAt is the arrival of an admitted answer of n units.
type admittedAt struct {
	at int64
	n  int
}

// admit records n units admitted at now, and forgets those older than
// the span.
func (k *adaptiveKey) admit(now int64, n int) {
	i := 0
	for i < len(k.oks) && now-k.oks[i].at > adaptiveOthersWindow {
		i++
	}
	if len(k.oks)-i >= adaptiveOthersKept {
		i++
	}
	k.oks = append(k.oks[i:], admittedAt{at: now, n: max(n, 1)})
}

// ownSince returns the units admitted after from.
func (k *adaptiveKey) ownSince(from int64) int {
	n := 0
	for j := len(k.oks) - 1; j >= 0 && k.oks[j].at > from; j-- {
		n += k.oks[j].n
	}
	return n
}

// others returns the units per window of s's quota kept for other
// clients, after sampling s when it is the answer to an admitted unit.
func (k *adaptiveKey) others(s Statement, w int64, ok bool, now int64) float64 {
	if w <= 0 || w > adaptiveOthersWindow || s.Remaining < 0 || s.Refills {
		return 0
	}
	o := k.peer(s.Name)
	if ok {
		spent, own := s.Limit-s.Remaining, k.ownSince(now-w)
		o.pin(spent, own)
		o.spans.Observe(now, w, spent, float64(spent-own))
	}
	if o.pinned || o.refills || o.spans.Cur.N+o.spans.Prev.N < othersMinSamples {
		return 0 // a bucket's (what it lacks is this client's own burst), or one answer's
	}
	return o.units(s.Limit)
}

// peer returns what is estimated of the quota name, made if new.
func (k *adaptiveKey) peer(name string) *adaptiveOthers {
	for j := range k.peers {
		if k.peers[j].name == name {
			return &k.peers[j]
		}
	}
	k.peers = append(k.peers, adaptiveOthers{name: name})
	return &k.peers[len(k.peers)-1]
}
