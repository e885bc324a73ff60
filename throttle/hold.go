package throttle

import (
	"math"
	"time"
)

// This file holds a booking back, briefly, while the record cannot tell
// whether a window quota has room before its reset: a hold books nothing,
// and its caller reserves again once the answers that would tell are in.
//
// A statement's remaining counts the requests the upstream had handled
// when it answered. The record takes every request still in flight off
// it, since it cannot know which of them were handled already (see
// [Outcome.Unbooked]). Right after a burst, the statement arrives while
// the other answers of the burst are still on their way: what is left
// dips below what the upstream really has, often below zero, for about
// an answer's latency. A unit booked during the dip goes past the reset,
// at the pace after it, and takes its slot there for good: in the
// record's pace and in the configured limiter (a sliding log never books
// below its latest slot). On bench 5a the first window sent about 32 of
// its 48 so. Taking the pending requests for counted instead cannot be
// done by arithmetic: another client's share (5d) looks the same while
// answers are pending, and was booked twice over (9 429s).
//
// So when a window quota would push n units past its reset only because
// of requests still in flight that its latest statement may have counted
// (left < n <= left + pend): sent unbooked (before the record heard
// anything), or booked here (below), the booking is held: [Upstream.Reserve]
// returns a [Hold] of a fraction of an answer's latency, and the caller
// reserves again after it, with the answers in. A hold never reaches
// past the reset, and holds of one quota end within two answers'
// latency of the first (holdSpan); after that the booking goes where the
// record's cautious arithmetic puts it, as without holds.
//
// Units booked here and in flight are waited for too, where a Transport
// feeds the key (timed): those booked before the latest statement was
// learned and due by its arrival may have been handled before it
// (bookedBefore). A herd's answers reach the record in any order, and
// the first to arrive leaves what is left below zero while the rest of
// the herd is still in flight. Booked past the reset then, a unit moves
// the configured FixedWindow on to the next window, which books nothing
// in the one before again: the README recipe against a fixed window of
// 100 per 5 s lost 1-5 units of a window so, and with them a whole
// window at the end (1.2-1.3× the minimum, issue 13), at zero latency
// (testing/synctest) and with a millisecond each way (fixed windows,
// sliding logs and counters stating delays, 32 goroutines: 1.20-1.25×;
// held, 1.00-1.06×, at 5 ms each way as well). Earlier builds that
// held on them where latencies are known met refusals on bench 5c
// configured 25% too high and on 5e (72 and 93, in 2 of 13 and 1 of 3
// passes; not traced). Two faults of the record that made those rows
// fail were mended since (answers in flight together told a window a
// bucket, and answers were dated from their learning: 59b8484,
// 788f2e3); with the holds, 5c and 5e met 0 or 1 429s in each of 18
// rows on a busy machine (bench/FOLLOW.md, 2026-12-07 17:43).

// minHoldStep is the shortest hold: answers on a loopback upstream come
// back within about a millisecond of each other.
const minHoldStep = time.Millisecond

// minHoldSpan is the least time the holds of one quota may span: a busy
// machine hands answers to the record up to a few milliseconds after they
// arrived.
const minHoldSpan = 5 * time.Millisecond

// holdStep returns how long one hold of q lasts: a quarter of the latest
// answer's latency, at least minHoldStep.
func (q *statedQuota) holdStep() int64 {
	return max(q.latency/4, int64(minHoldStep))
}

// holdSpan returns how long the holds of q may last from the first one:
// two answers' latency, at least minHoldSpan.
func (q *statedQuota) holdSpan() int64 {
	return max(2*q.latency, int64(minHoldSpan))
}

// hold returns how long a booking of n units of q at from must wait
// before it books, or 0 when it may book now: q would book the units past
// its reset (a window quota: a refilling one, or a bucket whose refill is
// measured, books before it), only because of requests in flight that
// its latest statement may have counted. now is the record's clock;
// pending is how many requests are in flight unbooked now; booked how
// many units booked here its latest statement may have counted
// (bookedBefore; 0 where no Transport feeds the key). A statement whose
// answer's latency is unknown (one not fed by a Transport) is never held
// on: the hold is measured in it; unless timed says a Transport feeds
// the key, whose answers took no time on a clock that stands still
// (testing/synctest), and the hold is then its shortest.
func (q *statedQuota) hold(now, from int64, n, pending, booked int, timed bool) int64 {
	pend := min(q.pend, pending) + booked
	if from >= q.reset || from >= q.expires || q.refills || q.bucketRate() > 0 || (q.latency <= 0 && !timed) || q.left >= n || q.left+pend < n || q.earliest(from, n, true) < q.reset {
		q.holding = math.MinInt64 // nothing ambiguous: the next hold starts a new span
		return 0
	}
	if q.holding == math.MinInt64 {
		q.holding = now
	}
	end := min(q.holding+q.holdSpan(), q.reset)
	if now >= end {
		return 0 // held long enough: the record's arithmetic decides
	}
	return min(q.holdStep(), end-now)
}

// hold returns how long f's booking at from must wait before it books on
// k, or 0 (see statedQuota.hold). unbooked is how many requests are in
// flight unbooked.
func (k *statedKey) hold(now, from int64, f *statedFlight, unbooked int) time.Duration {
	var d int64
	for i := range k.quotas {
		q := &k.quotas[i]
		booked := 0
		if k.timed && q.left < f.of(q.unit) {
			booked = k.bookedBefore(q) // a walk of the flight, only where hold may read it
		}
		h := q.hold(now, from, f.of(q.unit), unbookedOf(q.unit, unbooked), booked, k.timed)
		if h == 0 && q.untoldRefill(from, f.of(q.unit)) {
			h = k.holdAhead(q, now, f.of(q.unit))
		}
		if h == 0 {
			h = k.holdBoundary(q, now, from, f.of(q.unit))
		}
		d = max(d, h)
	}
	return time.Duration(d)
}

// A window not yet told refilling (see statedQuota.refilled) whose first
// answers leave less than the units booked here ahead of them, due before
// its reset, may be a sliding counter: its first answer after a window
// spent in full states what the old window's weight leaves now, and the
// units booked at the pace after the old reset come back as they go. A
// unit booked then goes past the new reset, and takes its slot there in
// the configured limiter too, which books nothing before it again: the
// README recipe against a counter stating IETF fields, 32 goroutines, sent
// nothing for 3.4 s of each 5 s window once, and took 1.14×. So such a
// booking is held until the first of the units ahead is answered, for as
// long as the window has had fewer than [untoldAnswers] admitted answers:
// by then a counter has stated its remaining again, and a window that
// counts has taken one off.

// untoldAnswers is how many admitted answers of a window tell whether it
// refills (refilled: the third answer stating the same).
const untoldAnswers = 3

// untoldRefill reports whether a booking of n units at from may wait for
// the answers that tell whether q refills: q is a window not yet told, it
// would book them past its reset, and its answers can tell.
func (q *statedQuota) untoldRefill(from int64, n int) bool {
	return !q.refills && !q.sliding && q.stamp == math.MinInt64 && q.bucketRate() <= 0 &&
		q.raw >= 0 && q.left < n && from < q.reset && q.admitted < untoldAnswers &&
		q.mayRefill(q.precision) && q.earliest(from, n, true) >= q.reset
}

// holdAhead returns how long a booking of n units of q's unit must wait
// for the first of the units booked here before q's latest statement,
// due after it arrived and before q's reset, to be answered, or 0 when
// the shortfall is not theirs, or when that answer is later than two
// answers' latency past its due time.
func (k *statedKey) holdAhead(q *statedQuota, now int64, n int) int64 {
	ahead, first := 0, int64(math.MaxInt64)
	for i := range k.flight {
		f := &k.flight[i]
		if due := k.due(f); f.learns < q.statedSeq && due > q.statedAt && due < q.reset {
			ahead += f.of(q.unit)
			first = min(first, due)
		}
	}
	wait := max(q.latency, int64(minHoldStep)) // for its answer
	if ahead == 0 || q.left+ahead < n || now-first > max(2*wait, int64(minHoldSpan)) {
		return 0 // its answer is late (a hung upstream): hold no longer
	}
	return min(max(first-now, 0)+wait, q.reset-now)
}

// unbookedOf returns the units of unit that unbooked requests in flight
// hold: the requests sent before the record heard anything count in a
// quota in requests, and in no other unit.
func unbookedOf(unit string, unbooked int) int {
	if unit != UnitRequests {
		return 0
	}
	return unbooked
}

// bookedBefore returns the units of q's unit booked before q's latest
// statement was learned, due by its arrival, and still in flight: that
// statement may have counted them. Learns are counted rather than
// compared by time: under testing/synctest a whole window's bookings
// and answers share one instant.
func (k *statedKey) bookedBefore(q *statedQuota) int {
	n := 0
	for i := range k.flight {
		if f := &k.flight[i]; f.learns < q.statedSeq && k.due(f) <= q.statedAt {
			n += f.of(q.unit)
		}
	}
	return n
}
