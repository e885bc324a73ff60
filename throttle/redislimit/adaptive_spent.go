package redislimit

import (
	"time"

	"github.com/egress-go/egress/internal/spans"
	"github.com/egress-go/egress/throttle"
)

// What one process's answers tell of the quotas the upstream states, for
// the fleet's learned rate: how long a quota stated at 0 holds every
// process (spent), and the window a limit stated as instants is paced
// over (window). Each process reads its own answers; what it concludes
// rides to Redis in the key's next call with the answer (see
// [Adaptive.Learn]), where the script holds and paces the fleet.

// adaptiveQuota is what a process's answers told of one quota (see
// adaptiveView.spent).
type adaptiveQuota struct {
	name    string
	heldTo  int64         // local ns: when the latest hold to its reset ends, or 0
	refills bool          // admitted at 0 again past a hold to its reset: a bucket
	longest time.Duration // the longest reset stated as an instant, rounded up: a lower bound of its window
	zeros   int           // admitted answers at 0 in a row
	spans   spans.Spans   // what its admitted answers said was spent, over its window's last two spans (local ns)
}

// quota returns what v knows of the quota name, made if new. A view
// keeps at most maxQuotas: past that, the oldest is forgotten.
func (v *adaptiveView) quota(name string) *adaptiveQuota {
	for i := range v.quotas {
		if v.quotas[i].name == name {
			return &v.quotas[i]
		}
	}
	if len(v.quotas) >= maxQuotas {
		v.quotas = v.quotas[1:]
	}
	v.quotas = append(v.quotas, adaptiveQuota{name: name})
	return &v.quotas[len(v.quotas)-1]
}

// maxQuotas bounds the quotas a view keeps: an upstream states a few per
// key, and a hostile one may name a new one on every answer.
const maxQuotas = 16

// window returns the window of the quota st: the one stated (IETF w);
// for resets stated as instants (an epoch, an HTTP-date: window
// boundaries, as httprate and GitHub state them), the longest reset seen
// rounded up to its precision, and at least a second, a lower bound; or
// 0. Learned from the 429s alone, four processes sharing a limit of 48/s
// that httprate's counter states so used 59% of it.
func (v *adaptiveView) window(st throttle.Statement) time.Duration {
	if st.Window > 0 || !st.Absolute || st.Refills {
		return st.Window
	}
	q := v.quota(st.Name)
	w := st.Reset
	if p := st.Precision; p > 0 {
		w = (w + p - 1) / p * p
	}
	q.longest = max(q.longest, w, time.Second)
	return q.longest
}

// spent returns how long the quota st of window w (see window), stated
// in the answer s, holds every process back, and whether it does (ok):
// when it is stated at 0, until its reset (recorded: when the record
// of this process's answers has the window end); for a bucket whose reset is
// when it is full again, until one unit's refill, reset ÷ limit from
// empty; for a sliding
// window, until one unit has drained (see below). A bucket says so
// (OpenAI's, Anthropic's), or admits a request sent after a hold to its
// reset and still states 0: a window gives back what it states at its
// reset. Egress's middleware over a bucket of 10/s and burst 1 states
// "r=0;t=1" on every answer: with the Transport pausing four processes
// for the whole second at each, 100 requests took 109 s; now 15-21 s.
func (v *adaptiveView) spent(st throttle.Statement, w time.Duration, s adaptiveSignal, recorded time.Duration) (early time.Duration, ok bool) {
	q := v.quota(st.Name)
	if !s.throttled && st.Limit > 0 && st.Remaining >= 0 && w > 0 {
		q.spans.Observe(s.arrived, int64(w), st.Limit-st.Remaining, 0)
	}
	switch {
	case st.Remaining > 0 && !s.throttled:
		q.heldTo, q.zeros = 0, 0 // what it states came back: no sign of a bucket at 0
		return 0, false
	case st.Remaining != 0:
		return 0, false
	case !s.throttled && q.heldTo > 0 && s.arrived-int64(s.latency) >= q.heldTo:
		q.refills = true
	}
	early = st.Reset
	switch {
	case (st.Refills || q.refills) && st.Limit > 0:
		return early / time.Duration(st.Limit), true
	case !s.throttled && st.Limit > 0 && q.spans.Sliding(st.Limit):
		// A sliding window, which drains all the time: nothing more
		// until one unit has drained, from the second answer at 0 in a
		// row (one is the noise of a full window), as in process
		// (throttle.Adaptive). Held to its reset at each, four processes
		// sharing a counter of 48/s used 59% of it.
		if q.zeros++; q.zeros < 2 {
			return 0, false
		}
		return w / time.Duration(st.Limit), true
	case !s.throttled:
		// A window, until it ends as the record knows it: the reset
		// stated is cut to whole seconds (IETF t, an epoch), and held
		// to it, four processes paced at 97% of a fixed window of 10 a
		// second lost most of a second in every few.
		early = recorded
		q.heldTo = max(q.heldTo, s.arrived+int64(early))
	}
	return early, true
}

// endKnown reports whether the reset l, from the record's Stated, is
// where the record knows its window to end (as throttle.Adaptive reads
// it): a reset stated as a delay, or an instant once a boundary has been
// seen. Before that, an instant cut down to the second (go-limiter's,
// ulule's) may lie up to a second before the end: held to it, four
// processes met five 429s in go-limiter's first window.
func endKnown(l throttle.Statement) bool { return !l.Absolute || l.Window > 0 }
