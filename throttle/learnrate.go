package throttle

import "time"

// learnedRate is what a bucket's key learned of the upstream's rate from
// its refusals: a configured rate the upstream refuses is too high, and
// the stricter of the two wins. It exists for the README's recipe
// configured 25% above the upstream's rate (recipe_upstreams_test.go: a
// leaky bucket 4.83% 429s and 1.81× the published run, a token bucket
// with 429s only 2.17% and 1.26×): each 429's Retry-After, rounded up to
// a second, paused the key, and the bucket came back at the same rate.
//
// The measure is a run of answers to units sent at the key's rate: from
// the key's start, then from the end of the pause that follows a
// refusal (the units sent before it do not count), and again whenever
// the sends fall more than maxLag intervals behind that rate (idle, held
// back by another part of the budget, or paced by the bucket's
// headroom): over a run the upstream drains. An upstream bucket of at
// most the configured burst B admitted the n units sent in the run up to
// a refused one sent T after its first, and refused that one:
// n+1 > B+R·T, so its rate R is below (n+1−B)/T. The sends fell behind
// the rate by up to L in the run, in which the upstream may have
// refilled: the bound counts the run as L shorter, (n+1−B)/(T−L). The
// key's interval becomes at least its inverse, the strictest bound seen,
// and a refusal lengthens it by at most maxCut. A refusal with nothing
// admitted before it in its run, or within the burst (a burst too large,
// which the pause already dealt with), says nothing of the rate; nor
// does a lone refusal of a run sent at the rate but for its lag, as
// jitter meets an upstream bucket of burst 1
// (TestTransportToleranceFollowsAnswers).
//
// The bound holds while the upstream's burst is no larger than the
// configured one: a configured burst too small makes it loose, and the
// next refusal tightens it; one too large makes it strict, and the key
// stays under the upstream's rate. A learned rate is kept for
// learnedFor after the refusal that set it, and then forgotten: an
// upstream whose limit rose, or a hostile spell that ended, gets the
// configured rate back at the cost of one refusal a learnedFor.
type learnedRate struct {
	interval int64 // the learned interval, or 0: the bucket uses the longer of it and its own
	at       int64 // when interval was last set
	from     int64 // answers to units sent before it belong to an earlier run
	first    int64 // when the run's first admitted unit was sent
	admitted int64 // units admitted in the run
	lag      int64 // how far the run's sends fell behind the rate, at most
}

const (
	// maxLag is how many intervals the sends of a run may fall behind
	// the key's rate before the run starts again.
	maxLag = 2
	// maxCut bounds the share of the rate one refusal takes off (a
	// fixed window, whose burst at its boundary exceeds the bucket's,
	// states a stricter bound than it keeps to).
	maxCut = 0.3
	// learnedFor is how long a learned interval lasts after the refusal
	// that set it.
	learnedFor = int64(time.Minute)
)

// learnRate feeds one answer to key's learned rate; until is when the
// key's pause ends (a refusal's run begins then at the earliest).
func (g *gcra) learnRate(s *gcraState, now, until int64, o Outcome) {
	if s.rate == nil {
		s.rate = &learnedRate{}
	}
	r := s.rate
	if r.interval > 0 && now-r.at > learnedFor {
		r.interval = 0 // forgotten: the configured rate again
	}
	sent := now - int64(max(o.Latency, 0))
	if o.Failed || o.N <= 0 || sent < r.from {
		return
	}
	iv := max(g.interval, r.interval)
	lag := sent - r.first - r.admitted*iv
	if r.admitted > 0 && lag > maxLag*iv {
		r.admitted = 0 // behind the rate: a new run
	}
	if r.admitted == 0 {
		r.first, r.lag, lag = sent, 0, 0
	}
	r.lag = max(r.lag, lag)
	if !o.Throttled {
		r.admitted += int64(o.N)
		return
	}
	if over := r.admitted + int64(o.N) - g.burst; r.admitted > 0 && over > 0 {
		bound := (sent - r.first - r.lag) / over
		r.interval, r.at = max(iv, min(bound, int64(float64(iv)/(1-maxCut)))), now
	}
	r.from, r.admitted = max(now+1, until), 0
}
