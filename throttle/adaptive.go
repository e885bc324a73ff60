package throttle

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
)

// Tuning of [Adaptive]. Each constant is a trade between how fast the
// rate finds the upstream's hidden limit and how many throttled answers
// it costs; the simulation in adaptive_test.go measures both.
const (
	// adaptiveTarget is the fraction of the estimated limit the rate
	// settles at: the headroom that absorbs jitter and estimation error.
	adaptiveTarget = 0.95
	// adaptiveBeta is the multiplicative cut when there is no fresh
	// estimate of the limit, as in CUBIC and AWS's adaptive retry.
	adaptiveBeta = 0.7
	// adaptiveProbe is the cubic probe above the target: the rate is
	// target·(1 + probe·t³) t seconds after reaching it, so +1% after 10 s
	// and +8% after 20 s (t runs slower below adaptiveProbePace). Slow
	// enough that a probe costs a throttled answer per a few hundred
	// requests.
	adaptiveProbe = 1e-5
	// adaptiveProbePace is the rate, per second, below which the probe's
	// clock runs slower, at rate/adaptiveProbePace, once a probe has
	// found the limit (the last cut came after the first 3 s): a probe
	// that finds it costs two or three throttled answers, so it must
	// span some hundreds of units to keep them under 1%, and at 10/s the
	// cubic's seconds held only 250 (a simulated bucket of burst 1,
	// 60 s: 1.0-2.0% throttled after 5 s; with the slower clock
	// 0.4-1.0%). Before that, the normal clock corrects an estimate that
	// the first second's cuts set too low.
	adaptiveProbePace = 25.0
	// adaptiveRegain is the part of the second margin that an estimate
	// from the first second's cuts (see cut) gives back after a second at
	// it without a throttled answer: the target goes from 90.25% to 92.6%
	// of what that second measured.
	adaptiveRegain = 0.975
	// adaptiveClimb is how fast the rate returns to the target after a
	// cut: the gap shrinks by dt/adaptiveClimb.
	adaptiveClimb = 500 * time.Millisecond
	// adaptiveBucket is the width of the buckets in which admitted
	// answers are counted, and adaptiveBuckets how many are kept: the
	// estimate looks at the last adaptiveBucket·adaptiveBuckets, 3 s, so
	// that even at 10/s it counts some 30 answers.
	adaptiveBucket  = 100 * time.Millisecond
	adaptiveBuckets = 30
	// adaptiveMinSpan is the least span of answers the estimate needs.
	adaptiveMinSpan = time.Second
	// adaptiveSaturated is the fraction of throttled answers from which
	// the upstream is taken to be saturated, so that what it admitted is
	// its limit.
	adaptiveSaturated = 0.2
	// adaptiveFlood is how far above what the upstream admitted the
	// sending must be for the admitted rate to be taken as the limit.
	adaptiveFlood = 1.5
	// adaptiveCalm is how long without a cut, below a third of the best
	// estimate, before the rate returns to it quickly.
	adaptiveCalm = 5 * time.Second
	// adaptiveNudge is the cut when the rate is already at or below the
	// target: throttling there says the estimate was a little high, and
	// cutting by the full margin again would compound.
	adaptiveNudge = 0.98
	// adaptiveSettled is how far above the rate of the last cut the rate
	// may be for a throttled answer to cut by adaptiveNudge only (see
	// cut): the probe's cubic climbs 1% in 10 s.
	adaptiveSettled = 1.01
	// adaptiveSpaced is the least interval at which a learned rate's
	// units leave no closer together than it (see
	// adaptiveBooking.Until): at shorter ones, a timer's lateness is a
	// large part of the interval, and waiting out each late unit's push
	// drifted the pace (6c, 1000/s: 92-96% of the limit used instead of
	// 100%).
	adaptiveSpaced = 20 * time.Millisecond
	// adaptiveFell is how many throttled answers in the last second, a
	// fifth or more of them, tell a limit that fell from jitter.
	adaptiveFell = 3
	// adaptiveOverStep is the most a cut of a rate above any the
	// upstream was seen to admit takes off it at once (see cut).
	adaptiveOverStep = 0.85
	// adaptiveOverEvery is the share of throttled answers since the
	// last cut from which a bucket of burst 1 may be refusing every
	// other unit (and its limit anywhere between half the rate and the
	// rate), and adaptiveOverEveryStep the most such a cut takes off.
	adaptiveOverEvery     = 0.4
	adaptiveOverEveryStep = 0.95
	// adaptiveStorm is how far below its best estimate a calm rate must
	// lie to have been driven there by a storm of throttling, and so
	// return to the best (see climb), rather than by a limit that fell.
	adaptiveStorm = 1.0 / 3
	// adaptivePaced is how far above what was sent in the last second
	// the rate may be and still be the pace the upstream answered: above
	// it, the callers sent less than the rate allowed (see cut).
	adaptivePaced = 1.2
	// adaptiveCalmShare is the throttled share of a second's answers
	// below which what was sent in it counts as admitted (see cut): a
	// probe at 100/s draws about one throttled answer a second.
	adaptiveCalmShare = 0.05
	// adaptiveLead is how far the rate may climb above what the upstream
	// admitted in the last second.
	adaptiveLead = 1.2
	// adaptiveStatedTarget is the fraction of a stated limit per window
	// the rate is set to. A sliding-window counter (go-chi/httprate) paced
	// at its full limit refuses any unit that arrives a little early; at
	// 97% there is 1.4 units of slack at 48/s, some 30 ms of jitter.
	adaptiveStatedTarget = 0.97
	// adaptiveProbeHold is how long the bookings after a key's first
	// wait, time for its answer on most paths (an answer that comes
	// sooner does not end the hold): the first unit is a probe, so that a
	// burst of callers does not meet an upstream whose limit nobody knows
	// yet.
	adaptiveProbeHold = 50 * time.Millisecond
	// adaptiveSteer is the time constant of the steering on a bucket's
	// remaining (see [Adaptive.steer]): units above half the bucket are
	// spent over it, units below are made up over it.
	adaptiveSteer = 500 * time.Millisecond
	// adaptiveDrained is how many units admitted over a span with
	// nothing back tell a fixed window from a bucket (see steer).
	adaptiveDrained = 3
	// adaptiveSpan is the span over which a bucket's refill is measured.
	adaptiveSpan = 500 * time.Millisecond
	// adaptiveRecheck is how often a caller waiting on a key that follows
	// a stated quota looks at its slot again: the rate may rise, and its
	// slot move earlier. Without it, 32 callers booked at a first, low
	// guess hold the key at that rate for 32 of its intervals.
	adaptiveRecheck = 50 * time.Millisecond
	// adaptiveRelook is how often a caller waiting on a key whose rate is
	// learned looks at its slot again: a rate that climbs far above the
	// pace its bookings were laid out at lays them out again, earlier
	// (see [adaptiveKey.slow]), but no sooner than this from now.
	adaptiveRelook = time.Second
)

// DefaultFloorPerSecond is the lowest rate, in units per second, that an
// [Adaptive] limiter falls to unless [WithFloor] says otherwise: one unit
// per second, so that a hostile upstream that refuses everything never
// stalls a key, and a recovered one is found again.
const DefaultFloorPerSecond = 1

// floorOption carries [WithFloor].
type floorOption Rate

func (floorOption) apply(*config) {}

// WithFloor sets the lowest rate an [Adaptive] limiter falls to (default
// [DefaultFloorPerSecond], or the ceiling when that is lower). Other limiters
// ignore it.
func WithFloor(r Rate) Option { return floorOption(r) }

// Adaptive is a [Limiter] that learns an upstream's limit instead of
// being told it. Per key it paces units evenly at a rate that starts at
// the ceiling it was built with, falls when the upstream throttles (a
// 429, a 503, or a quota stated to be at 0 well before its reset), and
// climbs back carefully. It learns through [Adaptive.Learn], which an
// egress Transport calls with every response.
//
// How it moves (per key):
//
//   - Answers are counted in 100 ms buckets over the last three seconds.
//     What the upstream admitted per second there is a lower bound of its
//     limit (its limit itself while it throttles much of a flood); what
//     was sent in the last half second when it throttled is an upper one.
//   - On a throttled answer to a unit sent after the last cut (answers to
//     units sent before it say nothing new), the rate is cut: while
//     flooding (a fifth or more throttled, sending half again what was
//     admitted), to 95% of what was admitted; otherwise to the midpoint
//     of the two bounds; by 2% when it is already there, or,
//     after the first second, at the rate of the last cut, unless
//     throttled answers come in a run there (three or more, a fifth of
//     the last second's) at a rate the upstream was seen to admit for a
//     second (the limit fell), which bisects what the last second
//     admitted and the rate; by 30% (CUBIC's and AWS's β)
//     when there is not a bucket of answers yet, but not below 90% of
//     what was admitted since the first answer. Units already
//     booked are laid out again at the new rate, so that they do not keep
//     going at the old one.
//   - Where the callers send less than the rate (few callers, long
//     round trips), a throttled answer measures what was sent: the rate
//     is cut to it, not nudged from where it was. Units booked a second
//     ahead and more say the callers wait on the rate, whatever the
//     answers counted so far.
//   - A throttled answer at the settled rate nudges it by 2%, and the
//     nudge is judged over the next 3 s: a share of throttled answers
//     that did not fall with the rate is noise (503s unrelated to load),
//     the nudge is given back, and from then on throttled answers within
//     that share leave the rate alone (see adaptiveNoise).
//   - A cut in the first second keeps the margin twice: the upstream's
//     burst inflates what it admitted. After a second at that estimate
//     without a throttled answer, half of the second margin comes back.
//     Where the burst inflated it anyway (a bucket of 10/s with a burst
//     of 10 admits 20 in its first second), a run of throttled answers
//     at a rate never seen admitted bisects what the last second
//     admitted, less the margin, and the rate, by at most 15% a cut,
//     and so does every throttled answer in the 3 s after such a cut.
//   - On admitted answers it climbs back to the rate of the last cut within
//     about half a second, then probes above it along a slow cubic (+1%
//     after 10 s, +8% after 20 s; below 25/s slower, in proportion, once
//     a probe has found the limit), so that a probe costs a throttled
//     answer per few hundred units, and a limit that grew is found. Until
//     a cut measured what was admitted, it doubles each second. It never
//     climbs more than 20% above what was admitted in the last second
//     (AWS caps at twice the measured rate): units booked at a slower rate
//     may still be going out.
//   - After five calm seconds below a third of its best estimate (a
//     storm of throttling is over), it returns to the best one. A limit
//     that fell by less stays followed. An estimate is one the answers
//     measured: a cut held to β² while they said far less (the
//     descent from the ceiling, one 429 and its pause a second) leaves
//     none to return to.
//   - Quota headers, when present, beat guessing: a stated limit replaces
//     the estimate at once (see [Adaptive.Learn]). The rate becomes 97% of
//     the limit per window, less what other clients spend of it (what
//     the upstream says was spent beyond the units this limiter had
//     admitted over the last window: a 20% share is left to them, and
//     costs no cut), over the window stated (IETF w), learned from
//     resets stated as instants, or a refilling quota's period; a bucket
//     that states its size and what remains but no rate (a GCRA) is
//     steered by what remains. Bookings already made are laid out again at
//     the new rate, earlier too: while a quota is stated, callers look at
//     their slot again every 50 ms, and units leave no closer together
//     than the rate even when late timers bunch them. A quota at 0 holds
//     the key until its reset, whether or not it states a limit. A
//     stated limit lapses when nothing has restated it for the max hold
//     ([WithMaxHold]): the rate is then learned again from the answers,
//     doubling each second until one is throttled.
//   - A key's first unit is a probe: the next go 50 ms after it, time
//     for its answer on most paths.
//   - At a learned rate of 50/s or less, a unit that leaves late (its
//     caller's timer fired late) holds the next back as long: no two
//     leave closer together than the rate, which a bucket of burst 1
//     would refuse.
//   - The rate never falls below the floor ([WithFloor], default
//     [DefaultFloorPerSecond]) nor exceeds the ceiling; a pause
//     ([Adaptive.Pause], capped at [WithMaxHold]) holds the key back at
//     most that long. After a storm that drove the rate to the floor, the
//     units booked meanwhile at the floor are laid out again, earlier, as
//     the rate climbs back (their callers look again every second until
//     it is back to a third of its best), and the climb is capped at a
//     little above what was admitted: with 32 callers, a hidden 100/s is
//     reached again about 17 s after a 10 s storm.
//
// Unlike AWS's adaptive retry, which sets its cubic's peak at the rate it
// was sending when throttled and so saws between 70% and 100% of the
// limit, it sets the rate from what the upstream admitted, and after the
// first seconds sits just under the limit. In a simulation against hidden
// token buckets of 10, 100 and 1000/s (adaptive_sim_test.go) it is within
// ±10% of the limit after 5 s, with at most 1% throttled and at least 90%
// of the limit used. A bucket of burst 1 whose network jitter is a large
// part of its interval (20 ms at 10/s) cannot be used at 90% without
// throttled answers; there it settles near 85%.
//
// Adaptive also implements [Pauser], [Deferrer], [Inspector] and
// [Learner]. It is safe for concurrent use; one mutex guards every key.
type Adaptive struct {
	now     func() time.Time
	base    time.Time
	maxKeys int
	maxHold int64
	ceiling float64 // units per second
	floor   float64

	// rec learns the windows of the quotas the upstream states (from
	// successive resets) and the periods of those that refill; it books
	// nothing. Its mutex is taken inside mu, never the other way.
	rec *Upstream

	mu   sync.Mutex
	last int64
	keys map[string]*adaptiveKey
}

// adaptiveKey is the state of one key, in nanoseconds on the limiter's
// clock. Adaptive.mu guards it.
type adaptiveKey struct {
	rate    float64 // units per second now
	est     float64 // the estimated limit, or 0
	best    float64 // the highest estimate yet, to return to after a storm
	calm    float64 // the highest rate sent for a second with few throttled answers, or what a limit that fell was cut to (see cut)
	stated  int64   // until when est was stated by the upstream
	scale   float64 // what throttling while a quota was stated took off it, or 0 before any
	first   int64   // when the first answer came, or -1
	probe   int64   // when the rate last reached the target
	updated int64   // when the rate was last moved
	seen    int64   // when an answer last came
	paused  int64   // when the latest pause ends
	probed  bool    // the first unit, the probe, was booked
	gone    int64   // the latest slot that has come
	release int64   // the next unit leaves no sooner (see adaptiveBooking.Until)
	zeros   int     // 1 when the last stated answer was admitted at 0 in a sliding window
	// windowed is set when a quota stated with a delay and no window was
	// seen to drain with nothing coming back: a fixed window, not a
	// bucket to steer (see [Adaptive.steer]).
	windowed bool
	// floored is set when a cut drove the rate to the floor (a storm),
	// and cleared once it has climbed back to a third of its best: in
	// between, bookings laid out at the floor are laid out again as it
	// climbs, and their callers look at them again (see [adaptiveKey.slow]).
	floored bool

	over int64 // the last full cut of a rate above any seen admitted (see cut), or 0
	// unmeasured is set when the last cut fell short of what the answers
	// measured (by β² at most a cut), so that the rate it left is no
	// estimate to return to (see cut).
	unmeasured bool
	tat        int64 // the next free slot
	cutTat     int64 // the last cut, plus one unit's spacing: answers to units sent before it are old news

	// ahead holds the bookings whose slot may still lie ahead, in slot
	// order, so that a cut can lay them out again at the new rate and a
	// pause can move them.
	ahead []*adaptiveBooking

	buckets [adaptiveBuckets]adaptiveCount
	noise   adaptiveNoise // tells noise from throttling at the settled rate

	// The steering on a stated bucket whose rate is not stated: see
	// [Adaptive.steer].
	spent   int            // units admitted since the steering began
	refill  float64        // the refill last measured while the bucket was not full, or 0
	samples []adaptiveFill // spent + remaining over the last span

	// What other clients spend of the stated quotas: see adaptiveOthers.
	oks   []admittedAt     // the units admitted over the last adaptiveOthersWindow, oldest first
	peers []adaptiveOthers // one per quota name
}

// adaptiveFill is one reading of a bucket: units admitted so far plus
// units remaining, at one instant. Its growth over time is the bucket's
// refill.
type adaptiveFill struct {
	at    int64
	fill  int
	spent int  // units admitted so far
	full  bool // the bucket was full: refill may have gone to waste
}

// prune forgets the bookings whose slot has come.
func (k *adaptiveKey) prune(now int64) {
	i := 0
	for i < len(k.ahead) && k.ahead[i].slot <= now {
		k.gone = max(k.gone, k.ahead[i].slot)
		i++
	}
	k.ahead = k.ahead[i:]
	if len(k.ahead) == 0 {
		k.ahead = nil // let the backing array go
	}
}

// adaptiveCount counts the answers of one bucket.
type adaptiveCount struct {
	index         int64 // which bucket of time this is
	ok, throttled int
}

// NewAdaptive returns a limiter that starts each key at ceiling and
// learns the upstream's limit from there. Of the options, [WithClock],
// [WithMaxKeys], [WithMaxHold] and [WithFloor] apply. The floor must be
// at least one unit per max hold, so that no key stalls longer.
func NewAdaptive(ceiling Rate, opts ...Option) (*Adaptive, error) {
	if _, err := ceiling.Interval(); err != nil {
		return nil, fmt.Errorf("throttle: NewAdaptive ceiling: %w", err)
	}
	floor, floorSet := PerSecond(DefaultFloorPerSecond), false
	for _, o := range opts {
		if f, ok := o.(floorOption); ok {
			floor, floorSet = Rate(f), true
		}
	}
	if _, err := floor.Interval(); err != nil {
		return nil, fmt.Errorf("throttle: WithFloor: %w", err)
	}
	if floorSet && perSecond(floor) > perSecond(ceiling) {
		return nil, fmt.Errorf("throttle: WithFloor %v is above the ceiling %v", floor, ceiling)
	}
	c, hold, err := upstreamConfig(opts)
	if err != nil {
		return nil, err
	}
	rec, err := NewUpstream(WithClock(c.now), WithMaxKeys(c.maxKeys), WithMaxHold(hold))
	if err != nil {
		return nil, err
	}
	a := &Adaptive{
		now: c.now, base: c.now(), maxKeys: c.maxKeys, maxHold: int64(hold), rec: rec,
		ceiling: perSecond(ceiling), floor: min(perSecond(floor), perSecond(ceiling)),
		keys: map[string]*adaptiveKey{},
	}
	if a.floor*hold.Seconds() < 1 {
		if a.floor < perSecond(floor) {
			return nil, fmt.Errorf("throttle: NewAdaptive ceiling %v is below one unit per max hold (%v): raise WithMaxHold", ceiling, hold)
		}
		return nil, fmt.Errorf("throttle: WithFloor %v is below one unit per max hold (%v)", floor, hold)
	}
	return a, nil
}

func perSecond(r Rate) float64 { return float64(r.N) / r.Per.Seconds() }

// clock returns nanoseconds since a.base, never less than before. a.mu
// is held.
func (a *Adaptive) clock() int64 {
	a.last = max(a.last, int64(a.now().Sub(a.base)))
	return a.last
}

// key returns key's state, creating it at the ceiling. a.mu is held.
func (a *Adaptive) key(key string, now int64) (*adaptiveKey, error) {
	if k := a.keys[key]; k != nil {
		return k, nil
	}
	if len(a.keys) >= a.maxKeys {
		for name, k := range a.keys {
			if k.fresh(now, a.maxHold) {
				delete(a.keys, name)
			}
		}
		if len(a.keys) >= a.maxKeys {
			return nil, ErrTooManyKeys
		}
	}
	k := &adaptiveKey{rate: a.ceiling, updated: now, first: -1}
	a.keys[key] = k
	return k, nil
}

// fresh reports whether k may be dropped: nothing booked ahead, no pause,
// and no answer for the max hold, so what it learned is stale anyway.
func (k *adaptiveKey) fresh(now, maxHold int64) bool {
	return k.tat <= now && k.paused <= now && now-k.seen >= maxHold
}

// Rate returns key's current rate in units per second: the ceiling for a
// key that has learned nothing.
func (a *Adaptive) Rate(key string) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if k := a.keys[key]; k != nil {
		return k.rate
	}
	return a.ceiling
}

// Reserve implements [Limiter].
func (a *Adaptive) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*Reservation, error) {
	return a.ReserveAfter(ctx, key, n, 0, maxWait)
}

// ReserveAfter implements [Deferrer].
func (a *Adaptive) ReserveAfter(ctx context.Context, key string, n int, after, maxWait time.Duration) (*Reservation, error) {
	if err := checkRequest(ctx, key, n); err != nil {
		return nil, err
	}
	k, now, err := a.lock(key)
	defer a.mu.Unlock()
	if err != nil {
		return nil, err
	}
	slot := max(now+min(int64(max(after, 0)), maxSpan), k.tat, k.paused)
	if maxWait >= 0 && slot-now > int64(maxWait) {
		return Refused(time.Duration(slot-now)-maxWait, 0), nil
	}
	if slot-now > maxAhead {
		return nil, tooFarAhead(key)
	}
	b := &adaptiveBooking{a: a, k: k, slot: slot, n: n}
	k.tat = slot + k.cost(n)
	if !k.probed {
		// The first unit is a probe: the next go after the hold, time
		// for its answer.
		k.probed = true
		k.tat = max(k.tat, slot+int64(adaptiveProbeHold))
	}
	if slot > now {
		k.prune(now)
		k.ahead = append(k.ahead, b)
	} else {
		k.gone = max(k.gone, slot)
	}
	return NewReservation(b, time.Duration(slot-now), 0), nil
}

// cost returns the spacing n units take at k's rate.
func (k *adaptiveKey) cost(n int) int64 {
	return int64(min(math.Ceil(float64(n)*1e9/k.rate), maxSpan)) // a float past int64 converts to MinInt64
}

// adaptiveBooking is the [Booking] of an Adaptive reservation. Its slot
// moves with pauses and cuts; Adaptive.mu guards it.
type adaptiveBooking struct {
	a    *Adaptive
	k    *adaptiveKey
	slot int64
	n    int
	gone bool // Until released it
}

// Until implements [Booking], following any pause or cut since the
// booking.
func (b *adaptiveBooking) Until() time.Duration {
	b.a.mu.Lock()
	defer b.a.mu.Unlock()
	now := b.a.clock()
	k := b.k
	d := b.slot - now
	if b.gone {
		return time.Duration(d)
	}
	// Release units no closer together than the rate, whatever the
	// slots say: callers whose timers fired late (a stalled machine)
	// would otherwise leave together, a herd that a sliding-window
	// upstream refuses.
	stated := k.stated > now
	if !stated && k.cost(1) < int64(adaptiveSpaced) {
		return time.Duration(k.relook(d))
	}
	d = max(d, k.release-now)
	if d <= 0 {
		b.gone = true
		if stated {
			// Half an interval of slack keeps timers that fire a
			// little late from drifting the pace of a stated quota.
			k.release = max(k.release, now-k.cost(1)/2) + k.cost(b.n)
		} else {
			// A learned rate sits close to a limit that may be a
			// bucket of burst 1, which refuses any unit that comes
			// less than an interval after the last: one that leaves
			// late pushes the next by as much. A unit 3 ms late at
			// 9.8/s and the next on time were 99 ms apart at a 10/s
			// upstream, one refusal in 6a's steady state; with 1 ms
			// of slack, 6a still had one in 1 of 4 passes.
			k.release = now + k.cost(b.n)
		}
	}
	if !stated {
		return time.Duration(k.relook(d))
	}
	// A stated quota may raise the rate and move the slot earlier: look
	// again at least this often.
	return time.Duration(min(d, int64(adaptiveRecheck)))
}

// Cancel implements [Booking]: the spacing comes back when the booking
// is the key's latest.
func (b *adaptiveBooking) Cancel(context.Context) error {
	b.a.mu.Lock()
	defer b.a.mu.Unlock()
	k := b.k
	i := slices.Index(k.ahead, b)
	if i < 0 {
		return nil
	}
	if i == len(k.ahead)-1 {
		k.tat = min(k.tat, max(b.slot, b.a.clock()))
	}
	k.ahead = slices.Delete(k.ahead, i, i+1)
	return nil
}

// Pause implements [Pauser]: every booking of key still in the future,
// and every new one, moves later so that nothing is sent for d from now.
// d is capped at the max hold.
func (a *Adaptive) Pause(ctx context.Context, key string, d time.Duration) error {
	if ctx == nil {
		return errNilContext
	}
	k, now, err := a.lock(key)
	defer a.mu.Unlock()
	if err != nil {
		return err
	}
	k.hold(now, now+min(int64(d), a.maxHold))
	return nil
}

// hold moves every booking of k still in the future, and every new one,
// later so that nothing is sent before end. Holds do not compound.
func (k *adaptiveKey) hold(now, end int64) {
	if end <= k.paused {
		return
	}
	shift := end - max(now, k.paused)
	k.paused = end
	k.prune(now)
	for _, b := range k.ahead {
		b.slot += shift
	}
	if k.tat > now {
		k.tat += shift
	}
}

// lock locks a and returns key's state, added if new, and the time. The
// caller unlocks a.mu, on an error too.
func (a *Adaptive) lock(key string) (*adaptiveKey, int64, error) {
	a.mu.Lock()
	now := a.clock()
	k, err := a.key(key, now)
	return k, now, err
}

// Learn implements [Learner]: it counts the answer, and moves key's rate:
// at once to what a quota in requests states, if o states one, and
// otherwise by the cut and climb of a limit it must guess.
func (a *Adaptive) Learn(ctx context.Context, key string, o Outcome) error {
	if ctx == nil {
		return errNilContext
	}
	if o.Failed {
		return nil // no answer: nothing learned about the limit
	}
	k, now, err := a.lock(key)
	defer a.mu.Unlock()
	if err != nil {
		return err
	}
	k.seen = now
	if k.first < 0 {
		k.first = now
	}
	if a.follow(ctx, key, k, o, now) {
		return nil
	}
	if k.stated != 0 && k.stated <= now {
		// Nothing has restated the limit for the max hold: it lapses,
		// and the rate is learned again from the answers, doubling each
		// second until one is throttled. Probed on the cubic from it
		// instead, one absurd statement (1 a year, clamped to 1 a
		// minute) held the rate at the floor of 1/s for 3 minutes of
		// plain 200s.
		k.est, k.stated = 0, 0
	}
	throttled := o.Throttled || k.spentEarly(o)
	k.count(now, throttled)
	sent := now - int64(o.Latency)
	switch {
	case throttled && sent >= k.cutTat:
		a.cut(k, now)
	case !throttled:
		a.climb(k, now)
		if k.floored && k.rate >= k.best*adaptiveStorm {
			k.floored = false
		}
		if k.floored && k.stated <= now && k.slow(now) {
			// Climbing back from a storm that drove the rate towards
			// the floor, above the pace the bookings ahead were laid
			// out at (the callers booked a second apart): lay them out
			// again at it, earlier. Left where they were, they went out
			// at the floor for as many seconds as there were callers,
			// and the climb, capped at a little above what was
			// admitted, waited on them: 32 callers still sent 2-4/s
			// against a hidden 100/s 45 s after a 10 s storm. Only
			// after a storm: laid out again at every climb below a
			// third of the best, a fixed window's throttled answers
			// went from 1.3% to 8-11% (10/s, 32 callers, 50 ms).
			k.respace(now, adaptiveRelook)
		}
	}
	return nil
}

// relook returns how long a caller whose slot is d away sleeps before it
// looks again: climbing back from a storm, a learned rate lays the
// bookings ahead out again, earlier (see [adaptiveKey.slow]), no sooner
// than [adaptiveRelook] from now.
func (k *adaptiveKey) relook(d int64) int64 {
	if k.floored {
		return min(d, int64(adaptiveRelook))
	}
	return d
}

// slow reports whether the bookings ahead of now lie over a second out
// and a quarter further apart than k's rate spaces units, so that laying
// them out again at the rate moves them earlier by much.
func (k *adaptiveKey) slow(now int64) bool {
	k.prune(now)
	if len(k.ahead) < 2 {
		return false
	}
	span := k.ahead[len(k.ahead)-1].slot - max(now, k.paused)
	n := 0
	for _, b := range k.ahead {
		n += b.n
	}
	return span > int64(time.Second) && 4*span > 5*int64(n)*k.cost(1)
}

// follow steers k by the quotas in requests that o states, and reports
// whether there was one: quota headers, when present, beat guessing.
//
//   - A quota whose window is known sets the rate at once to 97% of its
//     limit per window, less other clients' share (adaptiveOthers). The
//     window is the one stated (the IETF
//     RateLimit-Policy w); for a quota that refills continuously, its
//     period; for resets stated as instants (window boundaries: httprate,
//     go-limiter, GitHub), the window learned from successive resets, or
//     until then the reset itself, and at least a second.
//   - A quota whose reset is a delay and whose window is not stated may be
//     a bucket whose limit is its burst and whose reset is the time to
//     refill it (throttled/throttled's GCRA): its remaining steers the
//     rate (see [Adaptive.steer]).
//
// The stricter quota wins, and so does the ceiling. A throttled answer
// while a quota is stated says the rate was a little high (another client
// spends from the same quota, or jitter bunched units): the rate falls
// 2%, once for the units sent after the last cut.
func (a *Adaptive) follow(ctx context.Context, key string, k *adaptiveKey, o Outcome, now int64) bool {
	var ss []Statement
	for _, s := range o.Statements {
		s, _ = s.Clamp(time.Duration(a.maxHold))
		switch {
		case s.Unit != "" && s.Unit != UnitRequests:
		case s.Limit > 0:
			ss = append(ss, s)
		case !o.Throttled && s.Remaining == 0 && s.Reset > 0:
			// At 0 with no limit stated: no rate to follow, but nothing
			// more before the reset (as redislimit's Adaptive holds a
			// fleet). The Transport leaves a quota at 0 to the Adaptive:
			// unheld, the next request left 50 ms after "0 left, back
			// in 3 s".
			k.hold(now, now+min(int64(s.Reset), a.maxHold))
		}
	}
	if len(ss) == 0 {
		return false
	}
	_ = a.rec.Learn(ctx, key, Outcome{Latency: o.Latency, Statements: ss})
	learned := a.rec.Stated(key)
	if !o.Throttled {
		k.admit(now, o.N)
	}
	best, steered := 0.0, false
	var held int64 // when an admitted answer with nothing left holds the key until, or 0
	zero := false  // it is at 0 in a sliding window
	for _, s := range ss {
		var rec Statement // the record's view of this quota: its window, and where it ends
		found := false
		for _, l := range learned {
			if l.Name == s.Name {
				rec, found = l, true
			}
		}
		recorded := s.Reset // when the record, which learns where windows end, has this quota return
		if found && endKnown(rec) {
			recorded = min(recorded, rec.Reset)
		}
		w := s.Window
		if w == 0 && (s.Absolute || s.Refills || k.windowed) {
			w = rec.Window
			if s.Absolute || k.windowed && !s.Refills {
				w = max(w, s.Reset, time.Second)
			}
		}
		q := k.peer(s.Name)
		switch {
		case o.Throttled:
		case s.Remaining > 0:
			q.heldTo = 0 // what it states came back: no sign of a bucket at 0
		case s.Remaining == 0 && q.heldTo > 0 && now-int64(o.Latency) >= q.heldTo:
			q.refills = true // admitted at 0 again past a hold to the reset
		}
		var r float64
		switch {
		case w > 0:
			left := float64(s.Limit) - k.others(s, int64(w), !o.Throttled, now)
			r = left / w.Seconds() * adaptiveStatedTarget
		case s.Remaining >= 0:
			r, steered = a.steer(k, s, o, now), true
		default:
			continue
		}
		if best == 0 || r < best {
			best = r
		}
		if sliding := w > 0 && q.sliding(s.Limit); !o.Throttled && s.Remaining == 0 && (s.Reset > 0 || sliding) {
			// An admitted answer with nothing left: nothing more before
			// the reset; in a sliding window, which drains all the time,
			// nothing more until one unit has drained (a hold to the
			// reset cost 5d 0.4–1.4 s a time, and at the rate set it is
			// at 0 now and then; without the short hold, a run of answers
			// at 0 ended in a 429 and httprate's 1 s Retry-After). The
			// Transport does not pause the Adaptive for it. (httprate
			// states a reset of 0 with its Date: the same second.)
			from, d := now, s.Reset
			refills := s.Refills || q.refills
			if refills && s.Limit > 0 {
				// A bucket whose reset is when it is full again: one unit
				// is back after its own refill, reset ÷ limit from empty.
				// Held to the reset, OpenAI's "60 a 6m0s, 0 left" held
				// the key (and shifted what it had booked) for the max
				// hold, where a unit comes back every 6 s.
				d = s.Reset / time.Duration(s.Limit)
			}
			if sliding {
				// One unit's drain past the next slot (a hold that ends
				// before it would change nothing), from the second
				// answer at 0 in a row: a single one is the noise of a
				// full window, and holding at each cost 5d 0.8 points of
				// what was left used (medians 95.0% against 95.8%).
				zero = true
				if k.zeros == 0 {
					continue
				}
				from, d = max(now, k.gone+k.cost(1)), w/time.Duration(s.Limit)
			}
			end := from + min(int64(d), a.maxHold)
			switch {
			case refills && !sliding:
				// A unit is back after its own refill: the next unit
				// leaves no sooner, and the rest keep their spacing.
				// Held, every answer at 0 moved the whole schedule, and a
				// bucket of burst 1, at 0 on every answer, got half its
				// rate.
				k.release = max(k.release, end)
			case sliding:
				held = max(held, end)
			default:
				// Until the window ends, as the record knows it: the
				// reset stated is cut to whole seconds (IETF t, an epoch),
				// and held to it, a fixed window of 10 a second paced at
				// 9.7/s lost most of a second in every two (its last unit
				// at 0.93 s, "t=1" held to 1.93 s; 55% of the least).
				end = from + min(int64(recorded), a.maxHold)
				q.heldTo = max(q.heldTo, end)
				held = max(held, end)
			}
		}
	}
	if best == 0 {
		return false
	}
	if k.zeros = 0; zero {
		k.zeros = 1
	}
	if held > 0 {
		k.hold(now, held)
	}
	if k.scale == 0 {
		k.scale = 1
	}
	if o.Throttled && !steered && now-int64(o.Latency) >= k.cutTat {
		k.scale = max(k.scale*adaptiveNudge, 0.5)
		k.cutTat = now + k.cost(1)
	}
	if !steered {
		best *= k.scale
	}
	was := k.rate
	k.est = best
	k.best = max(k.best, best)
	k.rate = min(max(best, a.floor), a.ceiling)
	k.stated = now + a.maxHold
	k.updated, k.probe = now, now
	if k.rate != was {
		k.respace(now, adaptiveRecheck)
	}
	return true
}

// endKnown reports whether the reset l, from the record's Stated, is
// where the record knows its window to end: a reset stated as a delay
// (the earliest stated in the window, each cut to its precision), or an
// instant once a boundary has been seen (a window learned). Before that,
// the record takes an instant for rounded up, where a server that cuts it
// down (go-limiter, ulule) ends its window up to a second later: the
// statement's own reset is held to, as before the record was read here
// (redislimit's Adaptive adds the precision there, where four processes
// met 4-7 429s in go-limiter's first window).
func endKnown(l Statement) bool { return !l.Absolute || l.Window > 0 }

// respace lays the bookings ahead of now out again at k's rate, in
// order, from one interval after the latest slot that has come (and not
// before a pause ends): earlier when the rate rose, later when it fell.
// A slot moves earlier only to soon from now or later ([adaptiveRecheck]
// for a stated quota, [adaptiveRelook] for a learned rate), so
// that its caller, who looks again within that, wakes at it and not
// after it with others.
func (k *adaptiveKey) respace(now int64, soon time.Duration) {
	k.prune(now)
	if len(k.ahead) == 0 {
		return
	}
	next := max(now, k.paused, k.gone+k.cost(1))
	soonest := now + int64(soon)
	for _, b := range k.ahead {
		s := next
		if s < b.slot {
			s = max(s, min(b.slot, soonest))
		}
		b.slot = s
		next = s + k.cost(b.n)
	}
	k.tat = next
}

// steer returns the rate for a bucket that states its size L and what
// remains R, but not its rate: throttled/throttled's GCRA states its
// burst as the limit and the time to refill it, rounded up to a second,
// as the reset. Admitted units plus R grow at the bucket's refill rate
// while it is not full, so their growth over the last half second
// measures it; the rate is that refill less 3%, plus what R stands above
// half the bucket spread over half a second (or less what it stands
// below), so that R stays away from 0. While the bucket stays full, the
// refill is only known to be at least what was sent, and the rate
// doubles every quarter second, up to twice what was sent. The first reading starts at L per reset.
func (a *Adaptive) steer(k *adaptiveKey, s Statement, o Outcome, now int64) float64 {
	if !o.Throttled {
		k.spent += max(o.N, 1)
	}
	full := s.Remaining >= s.Limit-1
	if n := len(k.samples); n > 0 && now-k.samples[n-1].at > int64(adaptiveSpan)/5 {
		// No answer for a while (a stall): the bucket may have filled
		// unseen, so refill may have gone to waste.
		full = true
	}
	if n := len(k.samples); n > 0 && now-k.samples[n-1].at < int64(adaptiveSpan)/50 {
		k.samples[n-1].full = k.samples[n-1].full || full // at most 50 samples a span
	} else {
		k.samples = append(k.samples, adaptiveFill{at: now, fill: k.spent + s.Remaining, spent: k.spent, full: full})
	}
	i := 0
	for i < len(k.samples)-1 && now-k.samples[i+1].at >= int64(adaptiveSpan) {
		i++ // keep the newest sample at least a span old
	}
	k.samples = k.samples[i:]
	for _, f := range k.samples {
		if now-f.at >= int64(adaptiveSpan)/5 && k.spent-f.spent >= adaptiveDrained && k.spent+s.Remaining <= f.fill {
			// Drained by several units over a fifth of a span and more,
			// with nothing back: a fixed window (its units return at its
			// reset), not a bucket, which refills all along. Steered,
			// what remains fell all window long and the rate with it, to
			// the floor by each window's end (X-RateLimit delays, 30 a
			// second: 150 requests in 14.7 s, against 5 s).
			k.windowed = true
		}
	}
	old := k.samples[0]
	span := float64(now-old.at) / 1e9
	if span < adaptiveSpan.Seconds()/2 {
		switch {
		case k.est == 0:
			return float64(s.Limit) / max(s.Reset, time.Second).Seconds()
		case full:
			// Too short to measure, and nothing drained yet: climb.
			return k.rate * math.Exp2(float64(now-k.updated)/float64(adaptiveSteer/2))
		}
		return k.rate // too short to tell
	}
	refill := float64(k.spent+s.Remaining-old.fill) / span
	wasted := false
	for _, f := range k.samples {
		wasted = wasted || f.full
	}
	if wasted {
		refill = max(refill, k.refill) // a lower bound: the last measure may be better
	} else {
		k.refill = refill
	}
	rate := refill*adaptiveStatedTarget + (float64(s.Remaining)-float64(s.Limit)/2)/adaptiveSteer.Seconds()
	switch {
	case !wasted:
	case full:
		// Refill went to waste: it is at least what was sent, or what
		// was last measured. Climb fast, to at most twice that: if it
		// is too fast, what remains falls, and the steering above
		// brings the rate back.
		lead := 2 * refill
		dt := float64(now-k.updated) / 1e9
		rate = max(rate, min(k.rate*math.Exp2(dt/(adaptiveSteer.Seconds()/2)), lead))
	}
	if o.Throttled {
		rate = min(rate, k.rate*adaptiveBeta)
	}
	return rate
}

// spentEarly reports whether o states a quota in requests at 0 with its
// reset further off than two units at the current rate: the upstream's
// budget ran out before its window did.
func (k *adaptiveKey) spentEarly(o Outcome) bool {
	for _, s := range o.Statements {
		if (s.Unit == "" || s.Unit == UnitRequests) && s.Remaining == 0 && s.Reset.Seconds()*k.rate > 2 {
			return true
		}
	}
	return false
}

// count adds an answer to its bucket.
func (k *adaptiveKey) count(now int64, throttled bool) {
	i := now / int64(adaptiveBucket)
	b := &k.buckets[i%adaptiveBuckets]
	if b.index != i {
		*b = adaptiveCount{index: i}
	}
	if throttled {
		b.throttled++
		k.noise.thr++
	} else {
		b.ok++
		k.noise.ok++
	}
}

// admitted returns the units the upstream admitted per second over the
// last span (at most three seconds, and since the first answer), and the
// fraction of answers that were throttled; or 0 when there was less
// than a bucket of answers. Over a short span the upstream's burst
// inflates it, which errs on the side of cutting too little: the next
// throttled answer cuts again. While the upstream throttles often, what it
// admits is its limit, give or take its burst; while it throttles
// rarely, it is what was sent, a lower bound of the limit.
func (k *adaptiveKey) admitted(now int64, span time.Duration) (rate, throttled float64) {
	d := min(now-k.first, int64(span), int64(adaptiveBuckets*adaptiveBucket))
	if k.first < 0 || d < int64(adaptiveBucket) {
		return 0, 0
	}
	from := (now - d) / int64(adaptiveBucket)
	ok, thr := 0, 0
	for _, b := range k.buckets {
		if b.index >= from {
			ok += b.ok
			thr += b.throttled
		}
	}
	if ok+thr == 0 {
		return 0, 0
	}
	// Per second of what the buckets counted cover: from the start of
	// the first, or from the first answer, to now. Divided by the span
	// asked for instead, a rate over the last second read up to a tenth
	// high.
	covered := now - max(from*int64(adaptiveBucket), k.first)
	return float64(ok) / (float64(covered) / 1e9), float64(thr) / float64(ok+thr)
}

// sent returns how many answers per second came in the last span,
// admitted or not.
func (k *adaptiveKey) sent(now int64, span time.Duration) float64 {
	// Rounded down, as the script does: in the limiter's first second
	// the span reaches back past its clock's zero.
	from := floorDiv(now-int64(span), int64(adaptiveBucket))
	n := 0
	for _, b := range k.buckets {
		if b.index >= from {
			n += b.ok + b.throttled
		}
	}
	// Per second of what the buckets counted cover (see admitted).
	return float64(n) / (float64(now-from*int64(adaptiveBucket)) / 1e9)
}

// cut lowers k's rate after a throttled answer: to 95% of what the
// upstream admitted lately (or of the rate, if lower), or by β without
// a second of answers to tell; and lays the slots already booked out
// again at the new rate.
func (a *Adaptive) cut(k *adaptiveKey, now int64) {
	from := k.noise.from
	k.noise.from = 0 // a cut since a nudge: the nudge is not given back
	e, throttled := k.admitted(now, adaptiveBuckets*adaptiveBucket)
	last, lastThrottled := k.admitted(now, adaptiveMinSpan) // the last second
	if last > e && k.paused <= now {
		// The last second saw more admitted: the limit is at least that.
		// Not while a pause the upstream asked for lasts: a bucket
		// refilled over the pause, and a second after it admits the
		// burst on top of the rate. Read as the limit, a bucket of 20/s
		// and burst 10 answering "Retry-After: 1" held the rate at
		// 26/s: every 2.6 s a 429 and a second's pause.
		e = last
	}
	target := e * adaptiveTarget
	if now-k.first < int64(adaptiveMinSpan) {
		// Less than a second of answers: the upstream's burst and the
		// first admitted answer inflate what was admitted (10.5/s over
		// 0.28 s in 6a, where the rate set at 95% of it sat at the
		// limit, 9.95-10.0/s, and a unit sent 1 ms early was refused
		// in the steady state). Keep the margin twice.
		target *= adaptiveTarget
	}
	if hi := min(k.sent(now, adaptiveClimb), k.rate); e > 0 && hi > e && (throttled < adaptiveSaturated || hi < adaptiveFlood*e) {
		// Too few throttled to call the upstream saturated, or sending
		// only a little over what it admitted (a small bucket wastes
		// what it refills while it refuses, so it admits less than its
		// limit): what it admitted is a lower bound of the limit, and
		// what was sent just now an upper one. Bisect.
		e = (e + hi) / 2
		target = e
	}
	switch {
	case e == 0:
		// No bucket of answers yet: cut by β, but in the first
		// second not below what the upstream has admitted since the
		// first answer (its burst
		// inflates it, and the cuts that measure come next), less the
		// first second's margin. Cut after cut by β, as the herd of
		// callers let loose after the first unit met the upstream's
		// burst, took a hidden 1000/s to 841/s in 33 ms, from where
		// the slow probe took seconds to come back.
		k.rate *= adaptiveBeta
		if ok, _ := k.tally(now, now-k.first+int64(adaptiveBucket)); now > k.first && now-k.first < int64(adaptiveMinSpan) && ok >= 2 {
			k.rate = max(k.rate, float64(ok)/(float64(now-k.first)/1e9)*adaptiveTarget*adaptiveTarget)
		}
	default:
		// Throttled at the rate of the last cut (or a probe just above
		// it), after the first second: that cut measured the limit, so
		// the rate was a little high. What was admitted lately is no
		// better a measure: over the first storm it is too low (a bucket
		// of burst 1 wastes its refill while it refuses), and cutting to
		// it took 6d's fleet from 9.3 to 8.1-8.6/s, where it stayed.
		//
		// Settled only where the rate was the pace: where the callers
		// send less than the rate (few of them, long round trips), a
		// throttled answer measures what was sent, not the rate, and
		// nudges of 2% left the rate at twice the limit and more while
		// the callers' bunching drew 429s (8 callers, 50 ms each way,
		// a hidden 100/s bucket of burst 1: 3-7% throttled). Units
		// booked a second ahead and more say the callers wait on the
		// rate: it is the pace, whatever the answers counted so far
		// say. In Redis a fleet's answers are counted as each process
		// carries them, and the answers of processes that stopped
		// booking never are: a lone 429 then cut the fleet from 9.2-9.6/s
		// to 5.4-6.0/s (redislimit's TestAdaptiveFleetWhileProcessesStop),
		// and bench 6d's rate from 9.3/s to 7.0/s and 8.8/s to 4.3/s late
		// in its runs.
		//
		// Never while a pause the upstream asked for lasts (a 429 with
		// Retry-After): the units booked past it wait on the pause, not
		// on the rate, and a throttled answer there costs the pause. Read
		// as settled, an upstream answering "Retry-After: 1" (whole
		// seconds) over a bucket of 20/s held the rate at 17 times the
		// limit, nudged 2% a refusal, and every second went to a burst,
		// a 429 and a pause: 62 s for 30 s of work, 10% refused.
		settled := now-k.first >= int64(adaptiveMinSpan) && k.rate <= k.est*adaptiveTarget*adaptiveSettled &&
			(k.rate <= adaptivePaced*k.sent(now, adaptiveMinSpan) || k.tat-now >= int64(adaptiveMinSpan)) &&
			k.paused <= now
		fell, over, every, unmeasured := false, false, false, false
		if settled && now-k.first >= int64(adaptiveBuckets*adaptiveBucket) &&
			k.rate <= k.calm && lastThrottled >= adaptiveSaturated && lastThrottled*k.sent(now, adaptiveMinSpan) >= adaptiveFell {
			// A run of throttled answers at a settled rate (three or
			// more, a fifth or more of the last second's) that the
			// upstream was seen to admit (calm): not jitter, the limit
			// fell, and nudges of 2% took 10/s falling to 5/s 20 s to
			// follow. The new limit lies between what the last second
			// admitted (the last three still hold the old, and a bucket
			// of burst 1 wastes its refill while it refuses) and the
			// rate: bisect, by at most β a cut. The next throttled
			// answer cuts again while the run lasts.
			//
			// Above any rate seen admitted, the same run says only that
			// the rate is over the limit: there a bucket of burst 1
			// refuses every other unit whatever its limit, and the
			// bisect of what it admitted, half the rate, took 6d's
			// fleet from 10.3/s (nudged down from an estimate the first
			// second's burst had inflated) to 7.6/s for the rest of the
			// run (redislimit's TestAdaptiveFleetFindsHiddenLimit, 10 ms
			// back: 7.9-8.9/s). The nudges bring it under the limit.
			settled, fell = false, true
			target = (last + k.rate) / 2
		} else if settled && (k.rate > k.calm && k.noise.thr >= adaptiveFell && share(k.noise.ok, k.noise.thr) >= adaptiveSaturated ||
			k.over > 0 && now-k.over < adaptiveNoiseWindow) {
			// A run of throttled answers since the last cut (three or
			// more, a fifth or more of them) at a rate above any the
			// upstream was seen to admit: an estimate the first
			// second's burst inflated. A bucket of 10/s and burst 10
			// admits 20 in its first second; settled there, each
			// refusal nudged 2% and 17-26% of the answers were
			// throttled 20 s on (adaptive_sim_test.go). Bisect what the
			// last second admitted, less the margin, and the rate: a
			// bucket with a burst admits its limit while it refuses,
			// so the rate falls to the target within a few cuts.
			// At most adaptiveOverStep a cut, and every throttled
			// answer within the noise window after such a cut cuts
			// again (at 10% over a limit of 10/s, one comes a second,
			// too few for a run); near the target few are throttled
			// and the step is small. But a bucket of burst 1 admits
			// every other unit at any rate up to twice its limit, half
			// the rate whatever the limit: where two in five or more
			// answers since the cut were throttled, as such a bucket's
			// are, at most adaptiveOverEveryStep, and the window is not
			// armed (a fleet just under such a bucket's limit, its
			// timers bunched, was cut from 9.9/s to 8.4/s). The best
			// estimate to return to after a storm is the new one: the
			// old was the inflated one.
			settled, over = false, true
			step := adaptiveOverStep
			if share(k.noise.ok, k.noise.thr) >= adaptiveOverEvery {
				step, every = adaptiveOverEveryStep, true
			}
			target = max((last*adaptiveTarget+k.rate)/2, k.rate*step)
		}
		switch {
		case fell:
			k.rate = min(k.rate, max(target, k.rate*adaptiveBeta))
			k.calm = k.rate // the run goes on while it throttles there
		case over:
			k.rate = min(k.rate, target)
			if !every {
				k.over = now // throttled answers in the next adaptiveNoiseWindow cut again
			}
		case k.rate > target && !settled:
			k.rate = max(target, k.rate*adaptiveBeta*adaptiveBeta)
			unmeasured = k.rate > target
		case settled && k.noisy(now, from):
			return // noise, or a nudge still being judged: see adaptiveNoise
		case settled:
			k.nudged(now)
			k.rate *= adaptiveNudge // throttled at the settled rate: it was a little high
		default:
			k.rate *= adaptiveNudge // throttled below the target: it was a little high
		}
		if k.stated <= now {
			// The climb returns to the rate just set, not above it,
			// from the first measured cut on: doubling instead for the
			// rest of the first second overshot twice the limit, which
			// 32 callers booked ahead hid for 3 s at 10/s (6a, 6d). The
			// best waits for a second of answers: a first one is
			// inflated by the burst, and the calm return would go there.
			k.est = k.rate / adaptiveTarget
			k.unmeasured = unmeasured
			switch {
			case over:
				k.best = k.est
			case now-k.first >= int64(adaptiveMinSpan) && !unmeasured:
				k.best = max(k.best, k.est)
			}
		}
	}
	k.rate = min(max(k.rate, a.floor), a.ceiling)
	if k.rate <= a.floor && a.floor < a.ceiling {
		k.floored = true
	}
	k.relay(now)
	k.cutTat = now + k.cost(1)
	k.updated, k.probe = now, now
	k.noise.ok, k.noise.thr = 0, 0
}

// relay lays the bookings ahead of now out again at k's rate, where
// they lie closer together: order is kept, and nothing moves earlier.
func (k *adaptiveKey) relay(now int64) {
	k.prune(now)
	next := int64(math.MinInt64)
	for _, b := range k.ahead {
		b.slot = max(b.slot, next)
		next = b.slot + k.cost(b.n)
	}
	k.tat = max(k.tat, next)
}

// climb raises k's rate after an admitted answer: back to the estimate
// quickly, then along the probe's cubic; without an estimate, doubling
// each second. After a calm spell below a third of the best estimate (a
// storm of throttling is over), the estimate returns to the best.
func (a *Adaptive) climb(k *adaptiveKey, now int64) {
	dt := float64(now-k.updated) / 1e9
	k.updated = now
	if k.est > 0 && now-k.probe >= int64(adaptiveCalm) && k.rate < k.best*adaptiveStorm {
		k.est, k.probe = k.best, now
	}
	if k.est > 0 && k.best == 0 && !k.unmeasured && k.stated <= now && now-k.probe >= int64(adaptiveMinSpan) {
		// A second at an estimate from the first second's cuts, which
		// kept the margin twice (see cut), without a throttled answer:
		// give half the second margin back. With the margin twice the
		// rate stayed 10% under the limit for the whole run where the
		// first second had measured it right (a fleet of 4 processes
		// at 10/s: 87-90% used); with it once, an estimate the upstream's
		// burst had inflated sat at the limit, and jitter had 2% of the
		// answers throttled (adaptive_sim_test.go, both packages).
		k.est /= adaptiveRegain
		k.best = k.est
	}
	target := k.est * adaptiveTarget
	if k.stated > now {
		target = k.est // stated, not guessed: no margin
	}
	rate := k.rate
	switch {
	case k.est == 0:
		rate *= math.Exp2(dt)
	case rate < target*0.99:
		rate += (target - rate) * min(1, dt/adaptiveClimb.Seconds())
		k.probe = now
	case k.stated <= now:
		t := float64(now-k.probe) / 1e9
		if k.cutTat-k.first > int64(adaptiveBuckets*adaptiveBucket) {
			// The last cut came after the first storm: a probe found
			// the limit, and the next one costs as much.
			t *= min(1, target/adaptiveProbePace)
		}
		rate = max(rate, target*(1+adaptiveProbe*t*t*t))
	}
	// Grow only on evidence: at most a little above what the upstream
	// admitted in the last second (AWS caps at twice the measured rate),
	// twice when far below the estimate. Units booked at a slower rate
	// may still be going out, and a rate far above what is sent would
	// only be learned too late.
	lead := adaptiveLead
	if k.est == 0 || rate < target/2 {
		lead = 2
	}
	if used, _ := k.admitted(now, time.Second); used > 0 && rate > k.rate {
		rate = max(k.rate, min(rate, lead*used))
	}
	if now-k.first >= int64(adaptiveMinSpan) {
		// Calm: a second of answers, few throttled. What was sent is
		// what the upstream was seen to admit: units booked at a lower
		// rate may still be going out at it.
		if ok, thr := k.tally(now, int64(adaptiveMinSpan)); share(ok, thr) < adaptiveCalmShare {
			k.calm = max(k.calm, min(k.rate, k.sent(now, adaptiveMinSpan)))
		}
	}
	k.rate = min(max(rate, a.floor), a.ceiling)
}

// Inspect implements [Inspector]. Remaining is 1 when a unit fits now.
func (a *Adaptive) Inspect(ctx context.Context, key string) (KeyState, error) {
	if ctx == nil {
		return KeyState{}, errNilContext
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock()
	s := KeyState{Key: key, Remaining: 1}
	k := a.keys[key]
	if k == nil {
		return s, nil
	}
	next := max(k.tat, k.paused) - now
	if next > 0 {
		s.Remaining = 0
		s.Next = time.Duration(next)
		s.Ahead = int(float64(next) * k.rate / 1e9)
	}
	s.Paused = time.Duration(max(k.paused-now, 0))
	return s, nil
}

var (
	_ Limiter   = (*Adaptive)(nil)
	_ Deferrer  = (*Adaptive)(nil)
	_ Inspector = (*Adaptive)(nil)
	_ Pauser    = (*Adaptive)(nil)
	_ Learner   = (*Adaptive)(nil)
)
