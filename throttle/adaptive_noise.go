package throttle

import "math"

// Tuning of the noise check (see adaptiveNoise).
const (
	// adaptiveNoiseWindow is the least span, in ns, over which a nudge
	// is judged, and the span over which the share of throttled answers
	// is held against the noise: the span of the answer buckets, 3 s.
	adaptiveNoiseWindow = adaptiveBuckets * int64(adaptiveBucket)
	// adaptiveNoiseLeast is the fewest throttled answers after a nudge
	// that can tell a share of noise: fewer are the jitter of a rate at
	// the limit (a bucket of burst 1 at 10/s).
	adaptiveNoiseLeast = 3
	// adaptiveNoiseRun is the share of throttled answers since the last
	// cut above which a nudge is made at once, not judged: twice what a
	// nudge takes away.
	adaptiveNoiseRun = 2 * (1 - adaptiveNudge)
	// adaptiveNoiseRunLeast is the fewest throttled answers since the
	// last cut that make a run: with three, a hidden 40/s halved to
	// 20/s was followed at 5-7% above it, 4% throttled, for 8 s.
	adaptiveNoiseRunLeast = 2
)

// adaptiveNoise tells throttled answers that come whatever the rate (an
// upstream's 503s unrelated to load) from those of a rate a little above
// the limit, which fall away once the rate falls below it.
//
// A nudge at the settled rate is judged over at least 3 s after it: no
// further nudge comes meanwhile, unless throttled answers come in a run
// (more than 4% since the nudge: the rate is well above the limit). Then
// the share of throttled answers since the nudge is held against the
// share before it (between the cut before and the nudge, or over the 3 s
// before it, whichever is larger). A nudge of 2% takes a share
// of throttling that the rate caused down by about 2 points (to nothing
// when it was less); a share that fell by less than half that, and counts
// some throttled answers, is noise: the nudge is given back, and from
// then on a throttled answer at the settled rate nudges only when the
// last 3 s's throttled answers stand two standard deviations above what
// the noise brings. Without it, each 503 of 1% at random cut a hidden
// 1000/s by 2%, and 29-33% of it was used.
type adaptiveNoise struct {
	nudged int64   // when the nudge being judged came, or 0
	before float64 // the share throttled between the cut before and it
	from   float64 // the rate before it, or 0 once another cut came
	share  float64 // the share of answers throttled whatever the rate, or 0
	// ok and thr count the answers since the last cut.
	ok, thr int
}

// tally returns the answers admitted and throttled over the last span,
// at most the buckets' three seconds.
func (k *adaptiveKey) tally(now, span int64) (ok, throttled int) {
	from := int64(-1)
	if now >= span {
		from = (now - span) / int64(adaptiveBucket)
	}
	for _, b := range k.buckets {
		if b.index > from {
			ok += b.ok
			throttled += b.throttled
		}
	}
	return ok, throttled
}

// share returns the throttled share of ok admitted and thr throttled
// answers, or 0 for none.
func share(ok, thr int) float64 {
	if ok+thr <= 0 {
		return 0
	}
	return float64(thr) / float64(ok+thr)
}

// noisy reports whether the throttled answer just counted, at the
// settled rate, is to leave the rate alone: the last nudge is still
// being judged, or the last 3 s's throttled answers are within the
// noise. A nudge judged to be for noise is given back, to from unless
// another cut came since.
func (k *adaptiveKey) noisy(now int64, from float64) bool {
	k.noise.from = from      // no cut, so far
	since := k.noise.thr - 1 // the answer at hand is what is judged, not part of the measure
	if since >= adaptiveNoiseRunLeast && share(k.noise.ok, since) > adaptiveNoiseRun {
		return false // a run: the rate is well above the limit
	}
	if k.noise.nudged > 0 {
		if now-k.noise.nudged < adaptiveNoiseWindow {
			return true
		}
		k.noise.nudged, k.noise.share = 0, 0
		if after := share(k.noise.ok, since); since >= adaptiveNoiseLeast && k.noise.before-after < (1-adaptiveNudge)/2 {
			k.noise.share = after
			if k.noise.from > k.rate {
				k.rate = k.noise.from
				if k.stated <= now {
					k.est = max(k.est, k.rate/adaptiveTarget)
				}
			}
		}
	}
	ok, thr := k.tally(now, adaptiveNoiseWindow)
	expect := k.noise.share * float64(ok+thr-1)
	return expect > 0 && float64(thr) <= expect+2*math.Sqrt(expect)
}

// nudged starts judging a nudge at now, from the rate before it.
func (k *adaptiveKey) nudged(now int64) {
	k.noise.nudged = max(now, 1)
	if k.noise.from == 0 {
		// The first nudge since a cut of another kind: those made in a
		// run after it are given back with it.
		k.noise.from = k.rate
	}
	ok, thr := k.tally(now, adaptiveNoiseWindow)
	// The larger of the two: a share over a few answers since the cut
	// before may be 0 by chance, and a nudge for a rate 4% above the
	// limit was then judged to be for noise.
	k.noise.before = max(share(k.noise.ok, k.noise.thr-1), share(ok, thr-1))
}
