package throttle

import "math"

// otherClients estimates how fast other clients, which this record never
// sees, spend a quota's window: what the upstream says was spent, less
// what this client had admitted. It is kept for the windows whose ends
// are learned (windowend.go): their answers name the window they were
// counted in.
//
// For a fixed window, what others spent since the window started, over
// the time since; for a sliding window counter (which weighs the
// previous window by the part of it still inside the sliding one), what
// others spent over the window. The estimate of the latest answer of the
// current window, once a quarter of it has passed, and of the previous
// window, whichever is higher, is kept out of the budget: out of what is
// left before the reset and out of the pace after it.
type otherClients struct {
	okCur, okPrev  int     // units this client had admitted in the current and the previous window
	rate, prevRate float64 // units per ns: the latest estimate of this window and the last of the previous
}

// roll starts a new window; next tells whether it follows the previous
// one directly.
func (o *otherClients) roll(next bool) {
	o.okPrev = 0
	if next {
		o.okPrev = o.okCur
	}
	o.okCur, o.prevRate, o.rate = 0, o.rate, 0
}

// observe counts the answer a, stating s for q's current window.
func (o *otherClients) observe(q *statedQuota, s Statement, a arrival) {
	if a.ok {
		o.okCur += a.n
	}
	w := q.window
	if q.limit <= 0 || s.Remaining < 0 || w <= 0 || !(q.fixed || q.sliding) {
		return // a window not yet known to be fixed or sliding is counted neither way
	}
	spent := float64(q.limit - s.Remaining)
	elapsed := a.now - (q.stamp + q.hi - w) // from the latest the window can have started
	if q.sliding {
		elapsed = a.now - (q.stamp + (q.lo+q.hi)/2 - w) // the middle: the weight of the previous window is a guess either way
		frac := min(max(float64(elapsed)/float64(w), 0), 1)
		o.rate = max(spent-float64(o.okPrev)*(1-frac)-float64(o.okCur), 0) / float64(w)
		return
	}
	if elapsed < w/4 {
		return
	}
	o.rate = max(spent-float64(o.okCur), 0) / float64(elapsed)
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
// never stalls it.
func (o *otherClients) share(w int64, limit int) int {
	return min(o.until(w), limit*9/10)
}
