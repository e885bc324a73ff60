package throttle

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// UnitRequests is the [Statement.Unit] of a quota counted in requests.
// [Upstream.Reserve] books its n units in it; quotas in other units (an
// LLM API's tokens) are booked by [Upstream.ReserveUnits] with the cost
// in their unit.
const UnitRequests = "requests"

// Statement is what an upstream said about one of its quotas in one
// response: how large the quota is, how much of it is left, and when it
// returns. A Transport copies it from the response's headers, one
// retryafter.Quota each (retryafter.ParseQuota), whose fields document
// the dialects; and hands it to a [Learner] inside an [Outcome]. This
// package cannot import retryafter, so only what the record adds is
// said here.
type Statement struct {
	// Name tells the quotas of one key apart (Quota.Name).
	Name string
	// Unit is what the quota counts: [UnitRequests], or another unit
	// ("tokens", "input-tokens") that only [Upstream.ReserveUnits] books.
	Unit string
	// Limit, Remaining, Reset, Window, Absolute and Refills are the
	// Quota fields of the same names: the size per window and what is
	// left before Reset (each -1 when not stated); how long after the
	// response arrived the quota returns (0 when not stated); the stated
	// window (IETF w, or 0); whether the reset was stated as an instant,
	// as limiters with fixed window boundaries state it; and whether the
	// quota refills continuously until Reset, as a token bucket ("R left
	// now, L more per period"), rather than at a window boundary.
	Limit, Remaining  int
	Reset, Window     time.Duration
	Absolute, Refills bool
	// ResetAt and Precision are Quota's: the reset as an instant on the
	// wall clock, at or after the true one, and how finely it was stated.
	// When both are set on an Absolute statement, its window is named by
	// ResetAt − Precision and its true end learned from the answers (see
	// [Upstream]); the record compares ResetAt with its own clock
	// ([WithClock]). The zero values leave Reset in charge.
	ResetAt   time.Time
	Precision time.Duration
}

// Limits on what a Statement may say; beyond them a value is absurd.
const (
	// MaxStatedCount bounds a stated limit or remaining.
	MaxStatedCount = 1 << 30
	// DefaultMaxHold is how long a statement may hold a key back unless
	// [WithMaxHold] says otherwise: a minute, as retryafter's default
	// MaxPause, so a reset years ahead stalls a key for at most that.
	DefaultMaxHold = time.Minute
)

// Clamp returns s with its absurd values made safe, and the names of the
// fields it changed (nil when none): a Limit of 0 or one above
// [MaxStatedCount] becomes unknown, a Remaining above the Limit (or above
// MaxStatedCount) is capped at it, a Reset, Window or Precision beyond
// maxHold is cut to maxHold (a Reset cut so drops ResetAt too, leaving the
// cut Reset in charge), and negative values become unknown or 0. The Transport
// reports the changes to its Observer. A refilling quota's Reset is kept
// when a unit refills within maxHold (OpenAI's "6m0s") and the reset is
// no more than a day (or maxHold) ahead: the record holds a booking only
// for its own units' refill. Its Remaining is never
// raised: raising it to keep the pace of a Reset cut to maxHold let a
// quota at 0 for 6m0s admit 5/6 of its limit at once.
func (s Statement) Clamp(maxHold time.Duration) (Statement, []string) {
	var changed []string
	if s.Limit == 0 || s.Limit > MaxStatedCount || s.Limit < -1 {
		s.Limit = -1
		changed = append(changed, "Limit")
	}
	most := MaxStatedCount
	if s.Limit > 0 {
		most = s.Limit
	}
	switch {
	case s.Remaining > most:
		s.Remaining = most
		changed = append(changed, "Remaining")
	case s.Remaining < -1:
		s.Remaining = -1
		changed = append(changed, "Remaining")
	}
	refill := s.Refills && s.Limit > 0 && s.Remaining >= 0 && s.Remaining < s.Limit
	// Not absurd: a unit refills within maxHold, and the whole reset fits
	// the longest period the record estimates (maxPeriod); a longer one
	// left the bucket full only at the reset, a year ahead.
	kept := refill && s.Reset > 0 && s.Reset/time.Duration(s.Limit-s.Remaining) <= maxHold && s.Reset <= max(maxHold, time.Duration(maxPeriod))
	if s.Reset < 0 || (s.Reset > maxHold && !kept) {
		s.Reset = min(max(s.Reset, 0), maxHold)
		// The instant goes with it: a record whose own max hold is longer
		// than maxHold (a Transport's MaxPause of 5 s beside NewUpstream's
		// minute) named the window by ResetAt and held the key until it,
		// 40 s ahead. Without it, the clamped Reset is in charge.
		if s.Reset == maxHold {
			s.ResetAt = time.Time{}
		}
		changed = append(changed, "Reset")
	}
	if s.Window < 0 || s.Window > maxHold {
		s.Window = min(max(s.Window, 0), maxHold)
		changed = append(changed, "Window")
	}
	if s.Precision < 0 || s.Precision > maxHold {
		// A window learned from resets stated to a minute is paced at
		// least a minute a unit (guessWindow): a max hold of 10 s held 1m.
		s.Precision = min(max(s.Precision, 0), maxHold)
		changed = append(changed, "Precision")
	}
	return s, changed
}

// Outcome is what became of one attempt sent to the upstream.
type Outcome struct {
	// N is how many units the attempt booked (its cost); 0 when it booked
	// none.
	N int
	// Throttled is true when the upstream refused the attempt to slow the
	// client down: a 429, a 503, a 529, or a throttling 403.
	Throttled bool
	// Failed is true when no response came back (a transport error).
	Failed bool
	// Latency is the time from sending the attempt to its response. The
	// [Upstream] record dates the send as Latency before Learn is called,
	// so a Transport counts it up to that call.
	Latency time.Duration
	// Late is how long after its booked slot the attempt was sent (timer
	// and scheduler delays); 0 when it was not booked or not timed.
	Late time.Duration
	// Statements are the quotas the response stated, if any.
	Statements []Statement
	// Unbooked is how many other requests to the upstream were sent
	// without being booked on the [Upstream] record (a Transport books
	// on it only once it has heard a quota) and were not yet answered
	// when this answer arrived, besides those [Upstream.SendUnbooked]
	// counts: what the statements say is left is theirs first. Only the
	// record reads it.
	Unbooked int
	// SentUnbooked is set when the attempt was counted by
	// [Upstream.SendUnbookedKey] for the key Learn is given, or else by
	// [Upstream.SendUnbooked]: the record takes it off that count as it
	// learns this answer.
	SentUnbooked bool
}

// Learner is implemented by limiters that learn from the upstream's
// answers. A Transport calls Learn once for every attempt it sent, with
// what came back, for limiters that implement it: the [Upstream] record,
// the [Adaptive] limiter, the buckets, [SlidingWindow] and [FixedWindow]
// do. Learn must not block for long.
type Learner interface {
	Learn(ctx context.Context, key string, o Outcome) error
}

// Upstream is a [Limiter] that books what the upstream says: per key, a
// record of the quotas its responses state. A statement "R more before
// T" becomes one more part of the key's budget: at most R units (less
// those booked before T and not yet answered) before T. When the
// upstream also states its window (the IETF RateLimit-Policy w), or its
// resets are window boundaries (see below), units after T are paced at
// the limit per window, evenly. A remaining of 0 only holds new bookings
// back until T: it never shifts units already booked (one thing does,
// and only later: see others' share below).
//
// Use it beside the limiter configured for the key, booked at one common
// slot: All(configured, upstream). A Transport built with
// egress.WithUpstream does so itself, and feeds
// it each response through [Upstream.Learn]. On a key nothing was stated
// for, it admits everything at once.
//
// How statements combine, per quota name, when responses arrive out of
// order or a sliding window reports remaining from an estimate: two
// statements whose resets lie within the reset's precision of each other
// (a second, for whole-second resets) state the same window. Of those,
// the one for the request sent later wins (a sliding window's remaining
// may grow as its estimate decays); when the order is unknown, or the
// answer is for an older request that arrived late, the lower remaining
// wins; and the earlier reset wins, since a reset computed from a
// whole-second Date is late by up to a second. (For resets stated as
// instants, see below: requests in flight together count as unordered.) A reset later than that
// starts a new window and replaces the old; an earlier one is stale and
// ignored. A remaining that grows within a window, for a request sent
// later, marks the quota as a sliding window, which refills before its
// reset: once what was stated is spent, units are paced at the limit per
// window instead of waiting for the reset, or, without a window to pace
// at (a GCRA's bucket, whose reset is the time to refill it), left to the
// configured limiter. A window not stated is learned from successive resets and
// reported by [Upstream.Stated]. It paces units after T only when the
// resets are stated as instants (window boundaries), and no answer said
// more was left than a window of the limit could have (a bucket stating
// its time until full as an instant: bucketlike.go); until two resets
// have been seen, the longest reset stated stands in for it, a lower
// bound, so the first window after T may be paced too fast, and the next
// statement corrects it. Resets stated as delays may come from a GCRA
// upstream, whose "limit" is a burst and whose "reset" is the time to
// refill it: there the configured limiter paces after T, until the record
// has measured the bucket's refill from the answers; from then on it
// books the bucket as a GCRA at that rate, from the level each answer
// states (refill.go). On such a quota the record also keeps a log of
// what it booked, and admits at most the limit in any span of the
// longest reset seen (windowlog.go): a limiter configured above the
// upstream's limit no longer sends its surplus into every window. A
// limit not stated (IETF RateLimit without RateLimit-Policy) is taken
// to be one more than the highest remaining an admitted request left.
//
// A reset stated as an instant cut to a coarse precision (an epoch
// second, an HTTP-date: [Statement.ResetAt] and [Statement.Precision])
// may be up to that precision early. The record names each window by
// its stated reset S, holds what is left until the latest the window can
// end, and narrows that down from the answers: one stating S was handled
// before the window ended and after its request was sent; the first
// answer stating a later window came after it ended; a window that
// starts at the first request after the last one ended (ulule/limiter's)
// is told by the answers, and its end is taken from its first answer.
// When what is left runs out while the end is known to within more than
// a twentieth of the window, one request a window goes at the middle of
// the bounds (a probe), once the quota is known to be a fixed window
// (what is left came back at a boundary; a sliding counter's does not). What the upstream
// says was spent in such a window beyond what this client had admitted is
// another client's: its pace is kept out of what is left before the
// reset and out of the pace after it (others.go), from the first window
// on; when that share grows, the units of a sliding (or not yet told)
// quota paced after the reset and still ahead move later to the new
// pace. Answers to requests in
// flight together may have been handled in either order: of their
// statements for one window the lower remaining wins.
//
// A quota that refills continuously ([Statement.Refills]: OpenAI's,
// Anthropic's and Shopify's, whose reset is when the quota is full
// again) is a token bucket: R left now, refilling at L per period, the
// period estimated from the statements as reset × L / (L − R). Every unit
// still in flight (booked, or sent before the record heard anything, and
// not yet answered) is taken off R: the upstream may have stated R before
// it arrived.
//
// Right after a burst, a statement may arrive while answers to requests
// it may already have counted are still on their way; taking them all
// off, the record would book a unit past the reset that the window still
// has room for. Such a booking is held instead: Reserve and ReserveAfter
// return a [Hold] of a fraction of an answer's latency, having taken
// nothing, and the caller reserves again once the answers are in
// (hold.go). [Wait], [All] and an egress Transport do so.
//
// Past a spent reset stated as an instant, the first booking goes alone
// and asks (two at the first boundary), and the others are held until its
// answer states what the new window has left: a fixed window's limit is
// then booked at once, where the pace after the reset would have spread
// it, and a configured sliding log kept that spread in every window after
// (boundary.go). Not for a quota told sliding, nor one another client
// spends from. ReserveUnits does not hold.
//
// Booked alone (Reserve and ReserveAfter, as an egress Transport with
// WithRetry and no limiter does), the record is the key's only pace, and
// paces what a configured limiter would: resets stated as delays, with
// no window stated, are paced at the limit per the longest reset seen
// after the reset; and a bucket that states no rate, whose reset is only
// "within a second" (throttled's), is not left unpaced: what the latest
// statement left goes at once, the rest is held until the bucket can
// have refilled, one probe tells a bucket from a window of a second, and
// the refill is measured from there (unpaced.go). Inside [All] beside
// another limiter, and through ReserveUnits, that limiter paces.
//
// A statement holds a key back for at most the max hold ([WithMaxHold],
// default [DefaultMaxHold]) from its arrival, however far its reset.
// [Upstream.Reserve] books n units on the quotas counted in requests;
// [Upstream.ReserveUnits] also books a cost of its own on the quotas in
// other units, such as an LLM API's input and output tokens.
//
// Upstream also implements [Pauser], [Deferrer], [Inspector] and
// [Learner]. It is safe for concurrent use; one mutex guards every key.
type Upstream struct {
	now     func() time.Time
	base    time.Time
	maxKeys int
	maxHold int64
	// firstAnswer is how long bookings of a key nobody has answered wait
	// for its first booking's answer, booked alone ([WithFirstAnswer]).
	firstAnswer int64
	// forgets says that a full record forgets a live key rather than
	// refuse a new one ([WithForget]).
	forgets bool

	// heard is set once any key had a quota stated or a pause: until
	// then the record bounds nothing (see [Upstream.Heard]).
	heard atomic.Bool
	// unbooked counts the requests sent without a booking here
	// ([Upstream.SendUnbooked]) and not yet answered. An answer takes its
	// own off under mu, where Learn records its statements: so every
	// answered request is either still counted or in the record, never
	// in neither while its answer waits for the lock.
	unbooked atomic.Int64
	// unbookedBy counts, per key, the requests sent without a booking
	// here ([Upstream.SendUnbookedKey]) and not yet answered: only the
	// key's own statements take them off what is left. umu guards it;
	// it is taken after mu, never before.
	umu        sync.Mutex
	unbookedBy map[string]int

	mu   sync.Mutex
	last int64 // the latest clock reading, so that time never goes back
	keys map[string]*statedKey
	// A full record sweeps for fresh keys at most once per sweepEvery
	// or per maxKeys/sweepGrowth keys added, as the limiters' engine
	// does (makeRoom): sweptAt is when it last swept, on the clock,
	// swept whether it ever has, added how many keys came in since.
	sweptAt int64
	swept   bool
	added   int
}

// Heard reports whether the upstream has said anything the record
// books: a quota, or a pause, for any key. Until it
// has, the record admits everything at once (but for [WithFirstAnswer]'s
// wait) and costs its caller only this check: a Transport built with
// egress.WithUpstream and a limiter books the limiter alone, and tells
// the record nothing about responses that state no quota. (With no
// limiter, the Transport books the record from the first request.) Once
// it has, it stays so.
func (u *Upstream) Heard() bool { return u.heard.Load() }

// SendUnbooked notes that a request is about to be sent to the upstream
// without a booking on the record: a Transport sends so until the record
// has [Upstream.Heard] anything. Until its answer comes back, the request
// is taken off what every statement in requests says is left, since the
// upstream may not have counted it yet. Its answer takes it off the
// count: [Upstream.Learn] with [Outcome.SentUnbooked] set, or, for an
// answer the record does not learn, [Upstream.AnsweredUnbooked].
func (u *Upstream) SendUnbooked() { u.unbooked.Add(1) }

// AnsweredUnbooked takes a request [Upstream.SendUnbooked] counted off the
// count, when its answer (or failure) is not passed to [Upstream.Learn].
// Such an answer puts nothing in the record, so it needs no lock: it is
// counted until this call, and in neither count after it only once it is
// no longer in flight.
func (u *Upstream) AnsweredUnbooked() { u.unbooked.Add(-1) }

// SendUnbookedKey is [Upstream.SendUnbooked] for a request whose key is
// known: until its answer comes back, it is taken off what the
// statements of key alone say is left, not off those of every key (a
// Transport's requests to a slow host, in flight when another host
// first stated "5 left", held that host back until its reset). Its
// answer takes it off the count: [Upstream.Learn] for key with
// [Outcome.SentUnbooked] set, or [Upstream.AnsweredUnbookedKey].
func (u *Upstream) SendUnbookedKey(key string) {
	u.umu.Lock()
	if u.unbookedBy == nil {
		u.unbookedBy = make(map[string]int)
	}
	u.unbookedBy[key]++
	u.umu.Unlock()
}

// AnsweredUnbookedKey takes a request [Upstream.SendUnbookedKey] counted
// for key off the count, when its answer (or failure) is not passed to
// [Upstream.Learn].
func (u *Upstream) AnsweredUnbookedKey(key string) {
	u.umu.Lock()
	u.takeUnbooked(key)
	u.umu.Unlock()
}

// takeUnbooked takes one request off key's count of requests in flight
// unbooked, and reports whether it had one. u.umu is held.
func (u *Upstream) takeUnbooked(key string) bool {
	n, ok := u.unbookedBy[key]
	switch {
	case !ok:
		return false
	case n <= 1:
		delete(u.unbookedBy, key) // the map holds only keys with requests in flight
	default:
		u.unbookedBy[key] = n - 1
	}
	return true
}

// unbookedNow returns how many requests to key are in flight unbooked:
// those counted for key, and those whose key was not said. u.mu is held.
func (u *Upstream) unbookedNow(key string) int {
	u.umu.Lock()
	n := u.unbookedBy[key]
	u.umu.Unlock()
	return n + int(max(u.unbooked.Load(), 0))
}

// statedKey is the record of one key. Upstream.mu guards it.
type statedKey struct {
	quotas   []statedQuota  // one per quota name, in any unit
	inflight int            // requests booked and not yet answered or cancelled
	flight   []statedFlight // those units by booking, oldest first (answers are taken to come in order)
	answered int64          // when the last answer or cancel came
	shift    int64          // the sum of every pause's shift
	paused   int64          // when the latest pause ends
	// firstAt is when the key's first booking was made, if firstBooked,
	// before any answer (booked alone, see firstAnswer). answeredOnce is
	// set by the key's first answer.
	firstAt      int64
	firstBooked  bool
	answeredOnce bool
	// learns counts the answers learned: a booking made before a
	// statement was learned may have been counted in it (hold.go).
	learns int64
	// timed is set once an answer came for a request sent unbooked
	// (Outcome.SentUnbooked): a Transport feeds the key and times its
	// answers, whose latency is 0 only on a clock that stands still
	// (testing/synctest). Holds are measured in minHoldStep there.
	timed bool
	// paced says the latest booking had another limiter pacing the key
	// (see reserve): a quota stated as a bucket's refill per window is
	// then left to it (burstOnly).
	paced bool
}

// statedFlight is one booking not yet answered.
type statedFlight struct {
	b     *statedBooking
	n     int            // requests
	units map[string]int // the costs in other units, or nil
	// at and pend are when the booking was asked for, and how many
	// requests were then in flight unbooked: the log of windowlog.go
	// counts them as sent at at.
	at   int64
	pend int
	// learns is k.learns when it was booked (hold.go).
	learns int64
}

// due returns when f's booking is due: its slot, moved by any pause of k
// since it was made.
func (k *statedKey) due(f *statedFlight) int64 {
	return f.b.slot + k.shift - f.b.seen
}

// part returns the index of b's part booked on the quota named name, or
// -1.
func (b *statedBooking) part(name string) int {
	return slices.IndexFunc(b.parts, func(p statedPart) bool { return p.name == name })
}

// of returns how many units of unit f holds.
func (f *statedFlight) of(unit string) int {
	if unit == UnitRequests {
		return f.n
	}
	return f.units[unit]
}

// answer takes n units off the bookings in flight, those due first
// first: a request is answered after it is sent, and a booking made
// early for a late slot (one asking at a boundary, boundary.go) is still
// in flight when the ones booked after it for earlier slots are
// answered.
func (k *statedKey) answer(n int) {
	k.inflight = max(k.inflight-n, 0)
	for n > 0 && len(k.flight) > 0 {
		i := 0
		for j := 1; j < len(k.flight); j++ {
			if k.due(&k.flight[j]) < k.due(&k.flight[i]) {
				i = j
			}
		}
		f := &k.flight[i]
		take := min(n, f.n)
		f.n -= take
		n -= take
		if f.n == 0 {
			k.flight = slices.Delete(k.flight, i, i+1)
		}
	}
	if len(k.flight) == 0 {
		k.flight = nil
	}
}

// before returns the units of unit in flight booked for slots before t:
// those a statement's remaining for the window ending at t must cover.
// Units booked at or after t count in a later window.
func (k *statedKey) before(unit string, t int64) int {
	n := 0
	for i := range k.flight {
		if f := &k.flight[i]; k.due(f) < t {
			n += f.of(unit)
		}
	}
	return n
}

// alone reports whether no request sent before the one a answers is
// still unanswered: none sent unbooked, and none booked for a slot at or
// before a's sending (a's own units are taken to have been answered).
func (k *statedKey) alone(a arrival) bool {
	if a.unbooked > 0 {
		return false
	}
	sent := a.sent
	if sent == math.MinInt64 {
		sent = a.now
	}
	for i := range k.flight {
		if f := &k.flight[i]; k.due(f) <= sent {
			return false
		}
	}
	return true
}

// statedQuota is one quota of a key, in nanoseconds on the Upstream's
// clock.
type statedQuota struct {
	name      string
	unit      string
	refills   bool  // a token bucket: reset is when it is full (see refill)
	period    int64 // a refilling quota's time from empty to full, estimated; 0 when unknown
	longestR  int64 // the longest reset period was estimated from
	gap       int64 // a refilling quota's reserve: the largest drop others made between statements, in ns of refill
	gapAt     int64 // when gap was seen
	limit     int   // per window, or -1
	inferred  bool  // limit was not stated: it is the highest remaining an admitted request left, plus one
	window    int64 // stated or learned, or 0
	stated    bool  // window came from the upstream
	absolute  bool  // resets are stated as instants: window boundaries
	truncates bool  // whole-second delays are cut down, not rounded up (see record)
	longest   int64 // the longest reset stated, a lower bound of the window
	reset     int64 // T: when the quota returns
	precision int64 // how finely reset was stated
	left      int   // units that may still be booked before reset
	pend      int   // requests in flight unbooked when the latest statement arrived, taken off left: it may have counted them (hold.go)
	statedAt  int64 // when the latest statement arrived (hold.go)
	statedSeq int64 // the key's count of answers learned when it arrived: units booked before it and still in flight may be counted in it (hold.go)
	latency   int64 // the latest answer's latency, or 0
	holding   int64 // when the current span of holds began, or MinInt64 (hold.go)
	raw       int   // the remaining last stated, before units in flight are taken off
	okRaw     int   // the remaining the latest admitted answer of this window stated, or -1
	repeats   int   // admitted answers of this window that stated okRaw again
	admitted  int   // admitted answers of this window (hold.go: holdAhead)
	sliding   bool  // remaining grew or held within a window (refilled): it refills before the reset
	brief     bool  // sliding, told so only because it is burstOnly: the limiter pacing the key paces it (see pace)
	most      int   // the most an admitted answer stated remaining, or -1
	named     named // the answers in order that stated the latest reset (bucketlike.go)
	sent      int64 // when the request whose answer set left was sent, or MinInt64
	heardAt   int64 // when the answer that set left arrived
	fullIn    int64 // the reset that answer stated, as a delay from heardAt
	spent     int   // units admitted in answers since heardAt that did not set it: spent after, as far as anyone knows
	probeAt   int64 // unpaced.go: when the probe of a bucket not yet seen to refill was booked, or MinInt64
	noRefill  bool  // unpaced.go: a probe met a refusal, or noreturn.go: it refilled less than stated: the quota returns at its reset only
	stamp     int64 // the window's name, ResetAt − Precision, for a phased quota (see windowend.go); else MinInt64
	lo, hi    int64 // a phased quota's window ends after stamp+lo and at or before stamp+hi
	probed    int64 // the stamp of the window a probe was booked in
	fixed     bool  // what was left came back at a window boundary: a fixed window
	onDemand  bool  // windowend.go: a window's end moved from the phase of the ones before: each starts at a request
	opened    int64 // windowend.go: when the first answer stating the window stamp arrived
	others    otherClients
	meter     refillMeter // a bucket's refill, measured when its rate is not stated (refill.go)
	floor     refillFloor // noreturn.go: the least refill stated over the meter's current stretch
	log       []int64     // windowlog.go: the latest limit slots booked, in order, when logs
	tat       int64       // the next free slot at or after reset, at limit per window; for a refilling quota, when it is full
	expires   int64       // when the statement stops holding anything back
	// whole says an answer stating the window stamp left at least half
	// its limit: what was left came back at its start; windows counts
	// the windows stamped so far; shared says another client was seen
	// spending from the quota (others.go). boundary.go reads them.
	whole   bool
	windows int
	shared  bool
}

// maxHoldOption carries [WithMaxHold]; the constructors that know it read
// it before the other options are applied.
type maxHoldOption time.Duration

func (maxHoldOption) apply(*config) {}

// WithMaxHold bounds how long a statement or a learned rate may hold a
// key back from the statement's arrival (default [DefaultMaxHold]): set
// it to the retry policy's MaxPause. It applies to [NewUpstream] and
// [NewAdaptive]; other limiters ignore it.
func WithMaxHold(d time.Duration) Option { return maxHoldOption(d) }

// upstreamConfig applies opts for the limiters of this file. A nil Option
// panics, as everywhere in this module.
func upstreamConfig(opts []Option) (config, time.Duration, error) {
	c := config{maxKeys: DefaultMaxKeys}
	hold := DefaultMaxHold
	for i, o := range opts {
		switch o := o.(type) {
		case nil:
			panic(fmt.Sprintf("throttle: nil Option (argument %d)", i))
		case maxHoldOption:
			hold = time.Duration(o)
		default:
			o.apply(&c)
		}
	}
	switch {
	case c.maxKeys < 1:
		return c, 0, fmt.Errorf("throttle: WithMaxKeys must be at least 1, got %d", c.maxKeys)
	case hold <= 0:
		return c, 0, fmt.Errorf("throttle: WithMaxHold must be positive, got %v", hold)
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c, hold, nil
}

// NewUpstream returns an empty record of what upstreams state. Of the
// options, [WithClock], [WithMaxKeys], [WithMaxHold], [WithFirstAnswer]
// and [WithForget] apply.
func NewUpstream(opts ...Option) (*Upstream, error) {
	c, hold, err := upstreamConfig(opts)
	if err != nil {
		return nil, err
	}
	var first time.Duration
	forgets := false
	for _, o := range opts {
		switch o := o.(type) {
		case firstAnswerOption:
			first = time.Duration(o)
		case forgetOption:
			forgets = true
		}
	}
	if first < 0 {
		return nil, fmt.Errorf("throttle: WithFirstAnswer must not be negative, got %v", first)
	}
	return &Upstream{now: c.now, base: c.now(), maxKeys: c.maxKeys, maxHold: int64(hold), firstAnswer: int64(first), forgets: forgets, keys: map[string]*statedKey{}}, nil
}

// clock returns nanoseconds since u.base, never less than before.
// u.mu is held.
func (u *Upstream) clock() int64 {
	u.last = max(u.last, int64(u.now().Sub(u.base)))
	return u.last
}

// Learn implements [Learner]: it records o's statements for key, and
// counts o's N units as answered.
func (u *Upstream) Learn(ctx context.Context, key string, o Outcome) error {
	if ctx == nil {
		return errNilContext
	}
	// The send is dated from before the lock: on a key 32 callers book
	// and learn on, the wait for it dated a send up to a millisecond
	// late, after the arrival of an answer to a request the upstream had
	// handled later, and a fixed window stating more in it read as a
	// window that grew (bench 5c and 5f: told sliding, the README recipe
	// paced its windows and took 1.05× in about one pass in ten).
	called := int64(u.now().Sub(u.base))
	u.mu.Lock()
	defer u.mu.Unlock()
	if o.SentUnbooked {
		u.umu.Lock()
		keyed := u.takeUnbooked(key)
		u.umu.Unlock()
		if !keyed {
			u.unbooked.Add(-1)
		}
	}
	now := u.clock()
	if u.keys[key] == nil && len(o.Statements) == 0 {
		return nil
	}
	k, err := u.lookup(key, now)
	if err != nil {
		return err
	}
	k.answer(o.N)
	k.answered, k.answeredOnce = now, true
	k.learns++
	k.timed = k.timed || o.SentUnbooked
	a := arrival{now: now, sent: math.MinInt64, wall: u.now(), ok: !o.Throttled && !o.Failed, n: max(o.N, 1), unbooked: min(max(o.Unbooked, 0), MaxStatedCount) + u.unbookedNow(key)}
	if o.Latency > 0 {
		a.sent = min(called, now) - int64(o.Latency)
	}
	for _, s := range o.Statements {
		s, _ = s.Clamp(time.Duration(u.maxHold))
		if k.record(s, a, u.maxHold) {
			u.heard.Store(true)
		}
	}
	if o.SentUnbooked && a.ok {
		k.logUnbooked(a.frame()) // windowlog.go
	}
	return nil
}

// noteStated notes on q what hold.go weighs a booking against: the
// requests in flight unbooked when the statement a carried arrived,
// and when it arrived, in time and in answers learned.
func (k *statedKey) noteStated(q *statedQuota, a arrival) {
	q.pend, q.statedAt, q.statedSeq = unbookedOf(q.unit, a.unbooked), a.now, k.learns
}

// arrival is one answer as the record sees it.
type arrival struct {
	now  int64     // when it arrived, on the record's clock
	sent int64     // when its request was sent, or MinInt64 when unknown
	wall time.Time // now, on the wall clock: what Statement.ResetAt is compared with
	ok   bool      // the upstream admitted the request
	n    int       // the units it took when admitted
	// unbooked is Outcome.Unbooked: requests in flight that no booking
	// here counts, taken off what a statement in requests says is left.
	unbooked int
}

// What a statement has seen, and when. An upstream states a quota at
// some moment between the arrival of the request it answers and the
// sending of its answer: the record cannot tell which. So it takes none of
// the units still in flight as seen, on every path: a window's remaining
// (inFlight), a refilling quota's (refill) and a measured bucket's level
// (refillMeter.anchor). Units sent at one instant reach the upstream in
// any order, and a unit sent earlier on a slower way (a new connection)
// after a later one; and a unit sent after the request may still have
// reached the upstream before the statement was made, when that was at
// the end of a long reply, but then the record only takes it off twice,
// until the next statement. Comparing send slots with the midpoint of the
// answer's latency (an estimate of the upstream's time) took the units
// sent in its first half, and those sent at the request's own instant,
// as seen: 429s on refilling quotas (4 workers answered at one instant,
// and answers out of order). The rule costs nothing when answers come
// back in the order their requests were sent: those sent before are
// answered by then.
//
// When the statement was made matters too. A refilling quota's (an LLM
// API's, which may state it as a long reply ends) is read as of the
// answer's arrival, the latest it can be. A measured bucket's (a GCRA in
// front of the handler, as throttled's, states it as the request
// arrives) is read as of the request's sending, in the frame of send
// times: each unit reaches the upstream one way's latency after it is
// sent, so a unit booked now meets the bucket as the statement left it,
// refilled since. Read as of the arrival, the refill of a whole latency
// was given away, the bucket never drained enough to measure its rate
// better, and at 100 ms each way the pace fell to 0.65 of the bucket's.

// frame returns the instant of the send-time frame a's statements are
// read at: when a's request was sent, or, when that is not known, a's
// arrival, later and so safe.
func (a arrival) frame() int64 {
	if a.sent == math.MinInt64 {
		return a.now
	}
	return a.sent
}

// inFlight returns the units of unit in flight before t that a statement
// arrived as a must cover: those booked here, and, for a quota in
// requests, those sent before the record heard anything.
func (k *statedKey) inFlight(unit string, t int64, a arrival) int {
	return k.before(unit, t) + unbookedOf(unit, a.unbooked)
}

// unseen returns the units of unit in flight that a statement arrived as
// a has not seen: every one (see above).
func (k *statedKey) unseen(unit string, a arrival) int {
	return k.inFlight(unit, math.MaxInt64, a)
}

// record merges the statement s, arrived as a says, into k, and reports
// whether it said anything. Statements that say nothing about what is
// left change nothing.
func (k *statedKey) record(s Statement, a arrival, maxHold int64) bool {
	now, sent := a.now, a.sent
	if s.Remaining < 0 && s.Limit < 0 {
		return false
	}
	unit := s.Unit
	if unit == "" {
		unit = UnitRequests
	}
	i := slices.IndexFunc(k.quotas, func(q statedQuota) bool { return q.name == s.Name })
	if i < 0 {
		k.quotas = append(k.quotas, statedQuota{name: s.Name, limit: -1, reset: math.MinInt64, sent: math.MinInt64, stamp: math.MinInt64, probed: math.MinInt64, holding: math.MinInt64, probeAt: math.MinInt64, okRaw: -1, most: -1})
		i = len(k.quotas) - 1
	}
	q := &k.quotas[i]
	q.unit = unit
	if s.Limit < 0 && (q.limit < 0 || q.inferred) && a.ok && s.Remaining >= 1 && s.Remaining < MaxStatedCount {
		// No limit stated (IETF RateLimit without RateLimit-Policy): an
		// admitted request left s.Remaining, so the limit is at least one
		// more, the highest such bound seen. Unknown, a fixed window's
		// "0 left" went unheeded beside a limiter configured too high
		// (windowlog.go): 144 429s of 600.
		q.limit, q.inferred = max(q.limit, s.Remaining+1), true
	}
	if s.Limit > 0 {
		q.inferred = false
	}
	if s.Limit < 0 && q.limit > 0 && s.Remaining > q.limit {
		// No limit stated with it: the one stated before bounds what is
		// left (Clamp capped it only at MaxStatedCount), the stricter.
		s.Remaining = q.limit
	}
	q.answerProbe(a)
	if a.ok && s.Remaining >= 0 {
		q.most = max(q.most, s.Remaining)
	}
	if s.Absolute && s.Window == 0 && !s.ResetAt.IsZero() {
		w := q.guessWindow()
		if q.window > 0 {
			w = min(w, q.window)
		}
		q.named.note(s.ResetAt.UnixNano(), sent, now, w, a.ok, k.alone(a), s.Remaining, q.limit)
	}
	if a.ok && (sent == math.MinInt64 || sent > q.sent) {
		q.spent += a.n // sent after the request heardAt's statement answered; unless this statement is the next one
	}
	if s.Refills {
		k.refill(q, s, a, maxHold)
		return true
	}
	if q.refills {
		// A bucket's reset (when it is full) and pace say nothing of a
		// window: start afresh, as refill does the other way. Kept, a
		// bucket full in a day became a window at 0 until then.
		q.refills, q.reset, q.tat, q.sent = false, math.MinInt64, 0, math.MinInt64
	}
	reset := now + int64(s.Reset)
	precision := int64(time.Millisecond)
	if s.Reset%time.Second == 0 {
		precision = int64(time.Second)
	}
	if s.Window > 0 {
		q.window, q.stated = int64(s.Window), true
	}
	if s.Limit > 0 {
		q.limit = s.Limit
		q.left = min(q.left, s.Limit) // what was left, stated with no limit: the stricter
	}
	q.absolute = s.Absolute
	if !s.Absolute && !s.Refills && precision == int64(time.Second) {
		// A window that is not full cannot end now: a server that says it
		// does cuts its whole-second delays down, so each may end up to a
		// second after it (a round-up server says 0 only at the boundary).
		// From then on the latest end is taken, and the earlier resets,
		// early by up to a second, are dropped.
		if cut := s.Reset == 0 && s.Remaining >= 0 && q.limit > 0 && s.Remaining < q.limit; cut && !q.truncates {
			q.truncates = true
			if q.reset > now {
				q.reset = now + precision
			}
		}
		if q.truncates {
			reset += precision
		}
	}
	q.longest = max(q.longest, reset-now)
	if sent != math.MinInt64 {
		// Holds last a fraction of it (hold.go): an answer a year late
		// (or a hung upstream's) must not hold the key past the max hold.
		q.latency = min(now-sent, maxHold)
	}
	read := false
	if !s.Absolute && s.Window == 0 && unit == UnitRequests {
		read = q.meter.read(a, s.Remaining, q.limit, k.alone(a))
		if r := q.bucketRate(); r > 0 && read {
			q.meter.anchor(k, unit, a.frame(), s.Remaining, q.limit, a.unbooked, r)
		} else if r > 0 && a.ok {
			q.meter.spend(a.frame(), a.n, r)
		}
	}
	if stamp, p, ok := phased(s, a, maxHold); ok {
		return k.recordPhased(q, s, a, stamp, p, maxHold)
	}
	q.stamp = math.MinInt64
	// leftBy returns what s leaves before end, less the units in flight
	// before it.
	leftBy := func(end int64) int {
		if s.Remaining < 0 {
			return math.MaxInt
		}
		return s.Remaining - k.inFlight(unit, end, a)
	}
	p := max(precision, q.precision)
	fresh := false // the first statement of a new window
	switch {
	case q.reset > now && reset >= q.reset-p && reset <= q.reset+p && !q.cameBack(s, sent, p):
		// The same window. The earlier reset wins: each is late by up to
		// its precision. An answer to a request that reached the upstream
		// after the winner's (later) saw everything that one saw, so it
		// wins: a sliding window's remaining may grow as its estimate
		// decays, and resets stated as delays have no window to tell a
		// fixed one by (windowend.go does, for instants), so a remaining
		// that grows so marks a sliding window.
		//
		// An answer to a request that may have reached it in either order
		// lowers what is left at most; the winner's figures stay. Taken as
		// the later, an answer to a request sent 0.1 ms after the winner's,
		// stating 47 left where it had stated 16, let the first herd of 32
		// goroutines meet 20 429s of didip/tollbooth's bucket
		// (TestUpstreamAnswersInFlightTogetherAreUnordered). Taking a lower
		// one's figures as the winner's (tried) let a window of a second
		// stating t rounded up meet a 429 in each window in a quarter of
		// the runs of TestRetryOnlyIETFWithoutPolicy.
		//
		// Where the order is unknown (no latency given, or one measured
		// 0 on a clock that stands still, testing/synctest), or where the
		// quota is not told to refill within its window (a window counts
		// down to its reset; noRefill: it returns only there), the lowest
		// remaining wins, less what is in flight now, as windowend.go's
		// merge does: the lowest of what each left at its arrival counted
		// twice a request the upstream handled before the lowest
		// statement and answered after it. The README recipe's aligned
		// fixed window stating delays lost units of its first windows so,
		// and a window of a second stating t rounded up 9 of its 48
		// (TestRetryOnlyIETFWithoutPolicy); with 1 ms each way, a herd's
		// answers all arrive with one send time and none is known to be
		// later, and the recipe against a sliding log stating delays took
		// 1.20x the minimum (TestRecipeMeetsTheGoals, its rows with latency).
		grew := s.Remaining > q.raw && q.raw >= 0
		end := min(q.reset, reset) // this window's reset, as below
		if a.ok {
			q.admitted++
		}
		if !q.sliding && q.refilled(s, a, p, k.paced) {
			// The pace after the reset, taken for a fixed window's, starts
			// now instead: the next unit comes back a spacing from now.
			q.sliding, q.brief = true, !q.mayRefill(p)
			q.tat = now + q.spacing()
		}
		switch {
		case sent != math.MinInt64 && sent > q.sent && q.later(sent, now) && !(grew && q.noRefill):
			if grew {
				q.sliding = true
			}
			q.left, q.sent, q.raw, q.heardAt, q.fullIn, q.spent = leftBy(end), sent, s.Remaining, now, reset-now, 0
		case s.Remaining >= 0 && (q.noRefill || sent == math.MinInt64 || !q.sliding):
			if q.raw < 0 || s.Remaining < q.raw {
				q.raw = s.Remaining
			}
			q.left = q.raw - k.inFlight(unit, end, a)
			q.logSeen(now, k.unseen(unit, a)) // windowlog.go: fewer in flight, fewer kept
		default:
			q.left = min(q.left, leftBy(end))
		}
		q.reset = end
		q.precision = min(q.precision, precision)
	case reset > q.reset:
		// A new window replaces the old.
		fresh = true
		if !q.stated && q.reset > math.MinInt64 && reset-q.reset >= p {
			w := min(reset-q.reset, maxHold) // over a silence, many windows: no more than a stated one
			if q.window == 0 || w < q.window {
				q.window = w
			}
		}
		q.reset, q.left, q.precision, q.sent, q.raw, q.heardAt, q.fullIn, q.spent = reset, leftBy(reset), precision, sent, s.Remaining, now, reset-now, 0
		q.okRaw, q.repeats, q.admitted = -1, 0, 0
		if a.ok {
			q.okRaw, q.admitted = s.Remaining, 1
		}
		q.holding = math.MinInt64
	default:
		return true // stale: a window that has already reset
	}
	q.checkRefill(read, s.Remaining, int64(s.Reset), precision) // noreturn.go
	k.noteStated(q, a)
	if fresh {
		q.logSeen(now, k.unseen(unit, a)) // windowlog.go
	}
	if !q.sliding {
		q.tat = max(q.tat, q.reset)
	}
	q.expires = now + maxHold
	return true
}

// later reports whether a request sent at sent and answered at now
// reached the upstream after the request whose statement q holds: it was
// sent after that statement arrived, or so long after that request that
// the difference of their ways there cannot make up for it (taken as half
// the difference of their round trips). A herd released at one instant
// leaves over a few hundred microseconds, and its requests reach the
// upstream in any order (didip/tollbooth: sent 0.1 ms apart, answered
// 3.4 and 2.6 ms later).
func (q *statedQuota) later(sent, now int64) bool {
	if sent >= q.heardAt || q.sent == math.MinInt64 {
		return true
	}
	d := (now - sent) - (q.heardAt - q.sent)
	return sent-q.sent > max(d, -d)/2
}

// refilled notes s, an answer within q's window, and reports whether it
// shows that window refilling before its reset: admitted, it states what
// is left as the admitted answer before it did, the third time in a row in
// the window, and more than 0. An upstream that counts a request takes a
// unit off what it states for the next, in whatever order the answers
// arrive, until its window resets; one that states the same again got a
// unit back. That is a sliding counter paced at its decay, which states
// its reset as its window's end: held to it, the README recipe against one
// stating IETF fields waited there for units that came back all along
// (1.7× the minimum). Twice, not once, for an upstream that states a
// request it did not count. Not at 0: a sliding log at its pace leaves 0
// on every answer and states when its oldest unit leaves, before which
// nothing comes back; paced through it, the recipe met a 429 after each "0
// left". Windows no longer than twice the reset's precision are left out:
// there, the next window's answers read as this one's.
func (q *statedQuota) refilled(s Statement, a arrival, p int64, paced bool) bool {
	if !a.ok || s.Remaining <= 0 || !q.mayRefill(p) && !(paced && q.burstOnly()) {
		return false
	}
	if s.Remaining != q.okRaw {
		q.okRaw, q.repeats = s.Remaining, 0
		return false
	}
	q.repeats++
	return q.repeats >= 2
}

// mayRefill reports whether q's answers can show its window refilling
// before its reset (see refilled): it is not known to return only at its
// reset, and its window is longer than twice the precision p.
func (q *statedQuota) mayRefill(p int64) bool {
	return !q.noRefill && max(q.window, q.longest) > 2*p
}

// burstOnly reports whether q states a window (IETF w) of which no
// admitted answer ever left half: what a token bucket states as its
// refill per window, beside what is left of its burst. Egress's own
// middleware states a bucket of 48/s and burst 9 as "q=47;w=1", and
// r=0..8 with t=1 (whole seconds). Held to that t at every "0 left", the
// README recipe at the published numbers used 64% of the bucket: a
// window that short cannot be told refilling by its resets (see
// mayRefill). Where another limiter paces the key, three answers in a
// row stating the same remaining tell it refilling, and the record
// leaves the pace to that limiter (brief; 90-93% used). Alone, the
// record keeps holding to t: pacing such a bucket itself at its refill
// per window, it met 429s (2 of 600 on a bucket of 20/s and burst 10).
// A sliding window of a second that others spend more than half of, and
// that states the same remaining three times in a row, reads the same:
// the limiter pacing the key then paces it alone.
func (q *statedQuota) burstOnly() bool {
	return q.stated && q.limit > 0 && q.most >= 0 && 2*(q.most+1) <= q.limit
}

// cameBack reports whether s, answering a request sent after the one
// that set q's figures, states the window after q's although its reset
// lies within the precision p of q's: q's window is stated and no longer
// than p (IETF w=1 with t rounded up to 1) and what is left came back by
// half the limit; or its resets are whole-second delays cut down
// (truncates: a window of a second states "0" all through) and what is
// left came back at all. That is the next window, not a sliding one.
func (q *statedQuota) cameBack(s Statement, sent, p int64) bool {
	if sent == math.MinInt64 || sent <= q.sent || q.raw < 0 {
		return false
	}
	return q.stated && q.window <= p && s.Remaining-q.raw >= max(q.limit/2, 1) ||
		q.truncates && s.Remaining > q.raw
}

// refill merges s, a statement of a quota that refills continuously (a
// token bucket whose reset is when it is full again), arrived as a, into
// q. The statement for the request sent later wins. Its bucket is full at
// now + reset, or when R refills to L, whichever is later (read as of its
// arrival: see unseen); and the units in flight, which it has not seen,
// push that later.
func (k *statedKey) refill(q *statedQuota, s Statement, a arrival, maxHold int64) {
	now, sent := a.now, a.sent
	if !q.refills {
		q.refills, q.period, q.longestR, q.tat, q.sent = true, 0, 0, math.MinInt64, math.MinInt64
	}
	if s.Limit > 0 && s.Limit != q.limit {
		// A new limit, a new bucket: the old one's pace says nothing of it
		// (full in 30 s at 48, it held a bucket of 2 refilling in 480 ms).
		// What was left is no more than the new limit (an older view,
		// returned just below, kept 7 left of 1).
		q.limit, q.period, q.longestR, q.tat, q.left = s.Limit, 0, 0, math.MinInt64, min(q.left, s.Limit)
	}
	if sent != math.MinInt64 && sent < q.sent {
		return // an older view of the bucket, arrived late
	}
	d := int64(s.Reset)
	if s.Absolute && !s.ResetAt.IsZero() && !a.wall.IsZero() {
		// An instant (Anthropic's RFC 3339): on the record's clock, as
		// ResetAt is. Reset counts from the response's Date, whole
		// seconds, so it may be up to a second long, which the period
		// below multiplies by L/(L−R): 33 ms read as 933 ms made a bucket
		// of 30 a second one of 30 in 28 s.
		d = min(max(int64(s.ResetAt.Sub(a.wall)-s.Precision), 0), d)
	}
	if q.limit > 0 && s.Remaining >= 0 && s.Remaining < q.limit && d > q.longestR {
		// The longest reset gives the finest estimate: reset and
		// remaining are rounded by a millisecond and a unit at most.
		q.longestR = d
		q.period = min(int64(float64(d)*float64(q.limit)/float64(q.limit-s.Remaining)), max(maxHold, maxPeriod))
	}
	full := now + d
	if s.Remaining >= 0 && q.period > 0 {
		full = max(full, now+q.cost(q.limit-s.Remaining))
	}
	tat := full + q.cost(k.unseen(q.unit, a))
	if sent != math.MinInt64 && sent == q.sent && q.tat != math.MinInt64 {
		tat = max(tat, q.tat) // sent at one instant: unordered, the emptier view wins
	}
	if q.period > 0 && q.tat != math.MinInt64 {
		// What others spent since the last statement, unseen here: keep
		// that much in reserve, fading over a period. A token bucket's
		// reserve costs its size once, not its rate.
		gap := q.gap - q.gap*min(now-q.gapAt, q.period)/q.period
		if seen := tat - max(q.tat, now); seen > gap {
			gap, q.gapAt = seen, now
		}
		q.gap = min(gap, q.period/2, maxHold) // a bucket of 6m0s drained by others held a booking 3m
	}
	q.tat = tat
	q.reset, q.raw, q.sent = now+d, s.Remaining, max(sent, q.sent)
	q.left = s.Remaining
	q.expires = now + maxHold
}

// maxPeriod bounds a refilling quota's period, as estimated, so that the
// arithmetic stays far from overflow. A statement holds nothing back
// beyond the max hold anyway.
const maxPeriod = int64(24 * time.Hour)

// cost returns the time a refilling quota takes to refill n units, or 0
// when its period is unknown.
func (q *statedQuota) cost(n int) int64 {
	if q.period <= 0 || q.limit <= 0 || n <= 0 {
		return 0
	}
	// Saturated: a cost of 10^18 tokens overflowed to MinInt64, and its
	// booking went at once and left the bucket full.
	return int64(min(math.Ceil(float64(n)*float64(q.period)/float64(q.limit)), float64(maxSpan)))
}

// level returns how many units a refilling quota holds at now, net of
// what was booked.
func (q *statedQuota) level(now int64) int {
	if q.period <= 0 || q.limit <= 0 {
		return max(q.left, 0)
	}
	if q.tat <= now {
		return q.limit
	}
	return max(q.limit-int(math.Ceil(float64(q.tat-now)*float64(q.limit)/float64(q.period))), 0)
}

// spacing returns the interval between units after q's reset: the
// limit per window, or 0 (no pacing after the reset). The window is the
// stated one; or, when resets are stated as instants (window boundaries,
// as httprate and GitHub send them), the one learned from successive
// resets, or until then the longest reset seen rounded up to its
// precision, a lower bound. A window
// learned from resets stated as delays is not trusted: a GCRA upstream
// (throttled/throttled) states its burst as the limit and the time to
// refill it as the reset, and pacing that burst per learned window would
// be several times too slow.
func (q *statedQuota) spacing() int64 {
	var w int64
	switch {
	case q.limit <= 0:
		return 0
	case q.stated:
		w = q.window
	case !q.absolute:
		return 0
	case q.window > 0:
		w = q.window
	default:
		w = q.guessWindow() // a window is no shorter than its precision
	}
	if q.bucketLike() {
		return 0 // a bucket's time until full, not a window's end (bucketlike.go)
	}
	// What other clients leave, and at least a unit a window: a tenth of
	// a limit of 1 paced each unit ten windows apart, a statement holding
	// a key ten times its max hold.
	l := max(float64(q.limit)-q.others.share(w, q.limit), 1)
	if (q.sliding || q.untold()) && l >= 2 {
		// A sliding counter paced at its limit counts the limit at
		// every instant: any send the clock's jitter puts ahead of the
		// pace is refused, and a 429's Retry-After pauses the key (a
		// second on 5a). One unit of headroom a window, also before a
		// boundary has told whether the quota is one.
		l--
	}
	return int64(math.Ceil(float64(w) / l))
}

// paceStart returns the first slot of q's pace after its reset: the
// reset, or up to one spacing after it when no boundary has told the
// quota fixed and less than a unit is expected to be left at the reset:
// the latest stated remaining, less what others are expected to spend
// until the reset. A sliding counter whose previous window was spent in
// full has no room at the boundary, and gets it back at its limit per
// window from there (httprate admits the k-th unit after it once the
// window's share that has passed covers k, less what was left): on 5d a
// unit sent at the reset took room that had not come back, the other
// client's next send was refused instead, and its Retry-After paused the
// key for a second (3 of 16 base runs; in one of them our last answer
// said 1 left and the other client spent it).
func (q *statedQuota) paceStart() int64 {
	if q.raw < 0 || !q.untold() {
		return q.reset
	}
	left := float64(q.raw) - max(q.others.guess, q.others.perNs())*float64(max(q.reset-q.heardAt, 0))
	if left >= 1 {
		return q.reset
	}
	return q.reset + int64(float64(q.spacing())*(1-max(left, 0)))
}

// earliest returns the first slot at or after from at which q admits n
// units. paced says that another limiter paces the key (see reserve). A
// statement holds nothing back beyond its expiry (the max hold from its
// arrival), however many units it counts ahead: a thousand requests
// sent unbooked before a bucket of 7 a second spoke would otherwise hold
// the next booking two minutes (found by FuzzUpstream).
func (q *statedQuota) earliest(from int64, n int, paced bool) int64 {
	if from >= q.expires || n <= 0 {
		return from
	}
	return min(q.admits(from, n, paced), q.expires)
}

// admits returns the first slot at or after from at which q, as stated
// and booked, admits n units, whatever its expiry (see earliest).
func (q *statedQuota) admits(from int64, n int, paced bool) int64 {
	if q.refills {
		if q.period <= 0 {
			return from // full when last stated, at a pace not yet known
		}
		return max(from, q.tat-q.period+q.cost(n)+q.gap)
	}
	if r := q.bucketRate(); r > 0 {
		return q.meter.earliest(from, n, q.limit, r)
	}
	if !paced && q.unknownBucket() {
		return from // unpaced.go: waitUnpaced held it until it fits
	}
	if from < q.reset {
		if q.left >= n {
			if q.unsure(from) {
				return max(from, q.tat) // it may count in the next window
			}
			return from
		}
		if slot, ok := q.probe(from); ok {
			return slot
		}
		switch {
		case !q.sliding && !q.vague() && !(paced && q.bucketLike()):
			// A window: nothing comes back before its reset. (A bucket
			// stating its time until full as an instant refills all
			// along; the limiter pacing the key paces it: bucketlike.go.)
			from = q.paceStart()
		case q.pace(paced) == 0:
			// It refills before its reset at a pace nobody stated (a
			// GCRA's bucket): the reset is no bound; the configured
			// limiter paces (within the record's log: windowlog.go).
			return from
		}
		// A sliding window refills before its reset: pace at its limit
		// per window instead of waiting for the reset.
	}
	if q.pace(paced) == 0 {
		return from
	}
	return max(from, q.tat)
}

// book takes n units of q at slot, which earliest allowed, and returns
// how to give them back. inflight is how many units of q are in flight
// (see waitUnpaced), read only when not paced.
func (q *statedQuota) book(slot int64, n int, paced bool, inflight int) statedPart {
	p := statedPart{name: q.name, reset: q.reset, n: n}
	if slot < q.expires && n > 0 && q.logBook(slot, n) {
		p.logged, p.logSlot = true, slot
	}
	r := q.bucketRate()
	switch {
	case slot >= q.expires || n <= 0:
	case r <= 0 && !paced && q.unknownBucket():
		q.bookUnpaced(slot, n, inflight)
		p.before = true
	case r > 0:
		p.meterBefore = q.meter.tat
		q.meter.book(slot, n, r)
		p.meterAfter = q.meter.tat
		if slot < q.reset && q.left >= n {
			q.left -= n
			p.before = true
		}
	case q.refills:
		if q.period > 0 {
			p.tatBefore = q.tat
			q.tat = max(q.tat, slot) + q.cost(n)
			p.tatAfter = q.tat
		}
	case slot < q.reset && q.left >= n:
		q.left -= n
		p.before = true
		if q.unsure(slot) {
			p.tatBefore = q.tat
			q.tat = max(q.tat, slot) + int64(n)*q.pace(paced)
			p.tatAfter = q.tat
		}
	case slot < q.reset && !q.sliding && q.stamp != math.MinInt64:
		q.probed, p.probe = q.stamp, q.stamp // earliest allowed it as this window's probe
	case q.pace(paced) > 0:
		p.tatBefore = q.tat
		q.tat = max(q.tat, slot) + int64(n)*q.pace(paced)
		p.tatAfter = q.tat
	}
	return p
}

// statedPart is what one booking took from one quota.
type statedPart struct {
	name                string
	reset               int64 // the window it was booked in
	n                   int
	before              bool  // taken from what was left before reset
	probe               int64 // the window it probed (windowend.go), or 0
	tatBefore, tatAfter int64 // the spacing it took after reset, if any
	// meterBefore and meterAfter are the measured bucket's tat around
	// the booking (refill.go), when it booked there.
	meterBefore, meterAfter int64
	// logged says it added its units at logSlot to the quota's log
	// (windowlog.go).
	logged  bool
	logSlot int64
}

// give returns p's units to q when that over-admits nothing: units left
// before the same reset, or the spacing after it if nothing was booked
// after p.
func (q *statedQuota) give(p statedPart) {
	if p.logged {
		q.logGive(p.logSlot, p.n)
	}
	if p.meterAfter != 0 && q.meter.tat == p.meterAfter {
		q.meter.tat = p.meterBefore // nothing booked after it
	}
	switch {
	case p.probe != 0 && q.probed == p.probe:
		q.probed = math.MinInt64
	case q.reset != p.reset:
	default:
		if p.before {
			q.left += p.n
			if q.limit > 0 {
				// Never more than the limit: the quota may have been
				// stated anew, as a bucket, since the units were taken
				// (found by FuzzUpstream: 2 left of 1).
				q.left = min(q.left, q.limit)
			}
		}
		if p.tatAfter != 0 && q.tat == p.tatAfter {
			q.tat = p.tatBefore
		}
	}
}

// lookup returns key's record, creating it if there is none. u.mu is
// held.
func (u *Upstream) lookup(key string, now int64) (*statedKey, error) {
	if k := u.keys[key]; k != nil {
		return k, nil
	}
	return u.add(key, now)
}

// add creates key's record, dropping fresh records when full. u.mu is
// held.
func (u *Upstream) add(key string, now int64) (*statedKey, error) {
	if len(u.keys) >= u.maxKeys && !u.makeRoom(now) {
		if !u.forgets {
			return nil, ErrTooManyKeys
		}
		u.forget() // forget.go
	}
	k := &statedKey{}
	u.keys[key] = k
	u.added++
	return k, nil
}

// makeRoom drops fresh records from a full record, and reports whether
// there is room for a new key. It sweeps every key at most once per
// sweepEvery, or after maxKeys/sweepGrowth keys were added; in between it
// looks at dropSample keys, from the random place where ranging over a
// map starts. A full sweep on every new key held u.mu, and with it every
// booking of every key, for 1.5–40 ms at 100 000 keys while a flood of
// new keys was refused one by one; issue 11's key-flood goal is 10 µs a
// refusal (TestUpstreamKeyFloodIsCheap). u.mu is held.
func (u *Upstream) makeRoom(now int64) bool {
	sweep := !u.swept || now-u.sweptAt >= int64(sweepEvery) || u.added >= max(u.maxKeys/sweepGrowth, 1)
	if sweep {
		u.swept, u.sweptAt, u.added = true, now, 0
	}
	seen := 0
	for k, s := range u.keys {
		if !sweep {
			if seen++; seen > dropSample {
				break
			}
		}
		if s.fresh(now, u.maxHold) {
			delete(u.keys, k)
		}
	}
	return len(u.keys) < u.maxKeys
}

// fresh reports whether dropping k loses nothing: nothing in flight (or
// nothing answered for the max hold), no pause, and every statement
// lapsed.
func (k *statedKey) fresh(now, maxHold int64) bool {
	if (k.inflight > 0 && now-k.answered < maxHold) || k.paused > now {
		return false
	}
	for _, q := range k.quotas {
		if q.expires > now {
			return false
		}
	}
	return true
}

// Reserve implements [Limiter].
func (u *Upstream) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*Reservation, error) {
	return u.ReserveAfter(ctx, key, n, 0, maxWait)
}

// ReserveAfter implements [Deferrer].
func (u *Upstream) ReserveAfter(ctx context.Context, key string, n int, after, maxWait time.Duration) (*Reservation, error) {
	return u.reserve(ctx, key, n, nil, after, maxWait, true, false)
}

// ReserveUnits books n requests, and units[u] of every quota counted in
// the unit u, at one slot no sooner than after from now, as ReserveAfter
// does: 1 request, and its estimated input and output tokens, of an LLM
// API that states quotas in each, at the slot the configured limiter
// gave it. A quota in a unit units does not name takes nothing from this
// booking. The record does not settle: the upstream's next statement
// corrects what an estimate overstated. A negative cost is an error
// naming the unit.
func (u *Upstream) ReserveUnits(ctx context.Context, key string, n int, units map[string]int, after, maxWait time.Duration) (*Reservation, error) {
	for unit, c := range units {
		if c < 0 {
			return nil, fmt.Errorf("throttle: cost in unit %q must not be negative, got %d", unit, c)
		}
	}
	return u.reserve(ctx, key, n, units, after, maxWait, false, true)
}

// reserve books n requests and units of the other units after after. A
// booking the record cannot place yet is held (hold.go) when holds is
// set and maxWait allows the hold. ReserveUnits never holds: it books at
// the moment of sending, once the configured limiter's slot has come.
// paced says that another limiter paces the key beside the record (All
// books them at one slot; ReserveUnits books at the configured limiter's
// slot): the record then leaves a bucket whose rate it does not know to
// that limiter, and otherwise paces it itself (unpaced.go).
func (u *Upstream) reserve(ctx context.Context, key string, n int, units map[string]int, after, maxWait time.Duration, holds, paced bool) (*Reservation, error) {
	if err := checkRequest(ctx, key, n); err != nil {
		return nil, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock()
	k, err := u.lookup(key, now)
	if err != nil {
		return nil, err
	}
	if k.inflight > 0 && now-k.answered >= u.maxHold {
		k.inflight, k.flight = 0, nil // answers that never came: stop counting them
	}
	f := statedFlight{n: n, units: units, at: now, learns: k.learns}
	k.paced = paced
	from := max(now+min(int64(max(after, 0)), maxSpan), k.paused) // maxSpan: no overflow
	if holds && maxWait != 0 && !paced && u.firstAnswer > 0 {
		if h := k.firstAnswer(now, u.firstAnswer); h > 0 {
			return Hold(h, k.left(now)), nil
		}
	}
	unbooked := u.unbookedNow(key)
	f.pend = unbooked
	if holds && maxWait != 0 {
		if h := k.hold(now, from, &f, unbooked); h > 0 && (maxWait < 0 || h <= maxWait) {
			return Hold(h, k.left(now)), nil
		}
	}
	if !paced {
		if h := k.waitUnpaced(now, from, &f, unbooked); h > 0 {
			if maxWait >= 0 && h > int64(maxWait) {
				return Refused(time.Duration(h)-maxWait, k.left(now)), nil
			}
			return Hold(time.Duration(h), k.left(now)), nil
		}
	}
	slot := k.earliest(from, &f, paced)
	if maxWait >= 0 && slot-now > int64(maxWait) {
		return Refused(time.Duration(slot-now)-maxWait, k.left(now)), nil
	}
	b := &statedBooking{u: u, k: k, slot: slot, seen: k.shift, n: n}
	for i := range k.quotas {
		q := &k.quotas[i]
		inflight := 0
		if !paced {
			inflight = k.inFlightNow(q.unit, unbooked) // only a record booked alone reads it (unpaced.go): no walk of the flight on the paced path
		}
		b.parts = append(b.parts, q.book(slot, f.of(q.unit), paced, inflight))
	}
	k.inflight += n
	f.b = b
	k.flight = append(k.flight, f)
	return NewReservation(b, time.Duration(slot-now), k.left(now)), nil
}

// earliest returns the first slot at or after from that every quota of k
// admits f's units at, each in its own unit. Each quota is monotone (a
// slot that fits keeps fitting later), so raising the slot to each one's
// earliest converges.
func (k *statedKey) earliest(from int64, f *statedFlight, paced bool) int64 {
	for changed := true; changed; {
		changed = false
		for i := range k.quotas {
			q := &k.quotas[i]
			s := q.earliest(from, f.of(q.unit), paced)
			s = q.logged(s, f.of(q.unit), unbookedOf(q.unit, f.pend), f.at)
			if s > from {
				from, changed = s, true
			}
		}
	}
	return from
}

// left returns how many requests may still be booked before the resets
// (for a refilling quota, now), or math.MaxInt when no live statement of
// a quota in requests bounds the key: the record then leaves the key to
// the configured limiter, which All's minimum reports.
func (k *statedKey) left(now int64) int {
	left := -1
	for _, q := range k.quotas {
		switch {
		case q.unit != UnitRequests || q.expires <= now:
		case q.refills:
			left = minRemaining(left, q.level(now))
		case q.reset > now:
			left = minRemaining(left, max(q.left, 0))
		}
	}
	if left < 0 {
		return math.MaxInt
	}
	return left
}

// statedBooking is the [Booking] of an Upstream reservation.
type statedBooking struct {
	u     *Upstream
	k     *statedKey
	slot  int64
	seen  int64 // k.shift when booked
	n     int
	parts []statedPart
}

// Until implements [Booking], following any pause since the booking. On
// a bucket whose refill the record measures (refill.go), a booking is
// checked when its slot comes, against the level the latest answer
// stated and the units booked before it, and waits until the bucket
// admits it. Units the record did not book when their slot was set (sent
// before it heard anything, or paced by the configured limiter while the
// refill was not yet known) would otherwise meet a 429, whose Retry-After
// pauses every caller of the key: a second, on throttled (bench scenario
// 5b, configured 25% too high).
func (b *statedBooking) Until() time.Duration {
	b.u.mu.Lock()
	defer b.u.mu.Unlock()
	now := b.u.clock()
	due := b.slot + b.k.shift - b.seen
	if due > now {
		return time.Duration(due - now)
	}
	for i := range b.k.quotas {
		q := &b.k.quotas[i]
		r := q.bucketRate()
		if r <= 0 || !q.meter.anchored || now >= q.expires {
			continue
		}
		if x := q.meter.admits(b.k, b, q.unit, now, q.limit, r); x > now {
			b.slot += x - now
			q.meter.tat = max(q.meter.tat, x) + refillCost(b.n, r)
			return time.Duration(x - now) // checked again then
		}
	}
	return time.Duration(due - now)
}

// Cancel implements [Booking].
func (b *statedBooking) Cancel(context.Context) error {
	b.u.mu.Lock()
	defer b.u.mu.Unlock()
	b.k.inflight = max(b.k.inflight-b.n, 0)
	if i := slices.IndexFunc(b.k.flight, func(f statedFlight) bool { return f.b == b }); i >= 0 {
		b.k.flight = slices.Delete(b.k.flight, i, i+1)
	}
	b.k.answered = b.u.clock()
	for _, p := range b.parts {
		if i := slices.IndexFunc(b.k.quotas, func(q statedQuota) bool { return q.name == p.name }); i >= 0 {
			b.k.quotas[i].give(p)
		}
	}
	return nil
}

// Pause implements [Pauser]: every booking of key still in the future,
// and every new one, moves later, so that nothing is sent for d from
// now. The statements' resets do not move. d is capped at the max hold.
func (u *Upstream) Pause(ctx context.Context, key string, d time.Duration) error {
	if ctx == nil {
		return errNilContext
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock()
	k, err := u.lookup(key, now)
	if err != nil {
		return err
	}
	k.pause(now, min(int64(d), u.maxHold))
	u.heard.Store(true)
	return nil
}

// pause shifts k's schedule so that nothing goes before now+d.
func (k *statedKey) pause(now, d int64) {
	end := now + d
	if end <= k.paused {
		return
	}
	shift := end - max(now, k.paused)
	k.shift += shift
	k.paused = end
	for i := range k.quotas {
		if k.quotas[i].tat > now {
			k.quotas[i].tat += shift
		}
		if k.quotas[i].meter.tat > now {
			k.quotas[i].meter.tat += shift
		}
		for j, at := range k.quotas[i].log {
			if at > now {
				k.quotas[i].log[j] += shift
			}
		}
	}
}

// Inspect implements [Inspector]. Ahead counts the units booked and not
// yet answered. A key nothing live was stated for has no bound here:
// Remaining is math.MaxInt, so that inside All the configured limiter's
// figure is the one reported.
func (u *Upstream) Inspect(ctx context.Context, key string) (KeyState, error) {
	if ctx == nil {
		return KeyState{}, errNilContext
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock()
	s := KeyState{Key: key, Remaining: math.MaxInt}
	k := u.keys[key]
	if k == nil {
		return s, nil
	}
	s.Remaining = k.left(now)
	s.Next = time.Duration(k.earliest(max(now, k.paused), &statedFlight{n: 1}, false) - now)
	s.Ahead = k.inflight
	s.Paused = time.Duration(max(k.paused-now, 0))
	return s, nil
}

// Stated returns what the upstream last stated for key, one Statement per
// quota, with Reset measured from now and Remaining less what was booked
// since. For a refilling quota, Reset is when it is full again and
// Window its period, as estimated. A Limit not stated is the one the
// record inferred from what was left (see [Upstream]). It returns nil
// for a key nothing was stated for.
func (u *Upstream) Stated(key string) []Statement {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock()
	k := u.keys[key]
	if k == nil {
		return nil
	}
	var out []Statement
	for _, q := range k.quotas {
		if q.expires <= now {
			continue
		}
		s := Statement{Name: q.name, Unit: q.unit, Limit: q.limit, Remaining: max(q.left, 0),
			Reset: time.Duration(max(q.reset-now, 0)), Absolute: q.absolute, Refills: q.refills}
		switch {
		case q.refills && q.period > 0:
			s.Remaining = q.level(now)
			s.Reset = time.Duration(max(q.tat-now, 0))
			s.Window = time.Duration(q.period)
		case q.left > MaxStatedCount: // unknown, less what was booked since
			s.Remaining = -1
		case q.window > 0:
			s.Window = time.Duration(q.window)
		}
		if s.Limit > 0 && s.Remaining > s.Limit {
			// A limit inferred after what was left had been recorded
			// (a refilling quota's unknown level): never more left than it.
			s.Remaining = s.Limit
		}
		out = append(out, s)
	}
	return out
}

var (
	_ Limiter   = (*Upstream)(nil)
	_ Deferrer  = (*Upstream)(nil)
	_ Inspector = (*Upstream)(nil)
	_ Pauser    = (*Upstream)(nil)
	_ Learner   = (*Upstream)(nil)
)
