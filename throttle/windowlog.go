package throttle

import "slices"

// The record's own log of what it booked on a quota whose resets are
// stated as delays and whose window is not stated (X-RateLimit-Reset in
// seconds until the window ends, IETF RateLimit without
// RateLimit-Policy). "R more before T" says nothing the record can pace
// at after T: the reset of a GCRA upstream is the time to refill its
// burst, not a window (see [statedQuota.spacing]), and a reset of a
// window of a second stated as a whole-second delay, cut down ("0" all
// through the window), says only that the window ends within the second
// (vague: holding every booking until the latest end cost a run at the
// published limit 8% of its wall time). So the configured limiter paces
// after T, and within an uncertain reset. A limiter configured above the
// upstream's limit then sent its whole burst into every window: against
// a fixed window of 48/s, 60/s met 144 429s of 600 and took 2× as long,
// every 429's Retry-After pausing the key for a second.
//
// Beside it, the record keeps the slots it booked on such a quota, with
// the requests admitted before it heard anything, and admits at most the
// limit in any span of the window as far as it knows it (the longest
// reset seen, rounded up to its precision: no window is shorter than a
// reset stated in it): a sliding log. A sliding log never over-admits a
// fixed window of that length or shorter, nor a bucket whose burst is
// the limit; it binds nothing while the configured limiter keeps to the
// limit. A quota whose resets are all "within a second" and not known to
// be cut down (throttled's GCRA rounds its time to full up) keeps no log:
// its window says nothing of its refill (refill.go measures it).

// maxLogged bounds the limit a quota's log is kept for, so that a key
// costs at most 2 KiB more (a full record of DefaultMaxKeys such keys,
// 200 MiB): a quota with a larger limit keeps no log, and is left to the
// configured limiter after its reset, as before.
const maxLogged = 256

// logs reports whether q keeps a log of its booked slots.
func (q *statedQuota) logs() bool {
	return (q.truncates || !q.vague()) && !q.refills && !q.absolute && !q.stated && q.limit > 0 && q.limit <= maxLogged
}

// logged returns the first slot at or after from at which n units keep
// q's log within its limit per window, counting pend requests in flight
// unbooked as sent at now.
func (q *statedQuota) logged(from int64, n, pend int, now int64) int64 {
	if !q.logs() || from >= q.expires || n <= 0 {
		return from
	}
	i := len(q.log) + pend - q.limit + n - 1 // in the log with the pending added, in order
	if i < 0 || i >= len(q.log)+pend {
		return from
	}
	past, _ := slices.BinarySearch(q.log, now+1) // the slots up to now
	var at int64
	switch {
	case i < past:
		at = q.log[i]
	case i < past+pend:
		at = now
	default:
		at = q.log[i-pend]
	}
	return max(from, at+q.guessWindow())
}

// logBook adds n units booked at slot to q's log, keeping the latest
// limit of them, in order, and reports whether q keeps a log.
func (q *statedQuota) logBook(slot int64, n int) bool {
	if !q.logs() {
		q.log = nil
		return false
	}
	for range min(n, q.limit) {
		i, _ := slices.BinarySearch(q.log, slot+1)
		q.log = slices.Insert(q.log, i, slot)
	}
	if extra := len(q.log) - q.limit; extra > 0 {
		q.log = slices.Delete(q.log, 0, extra)
	}
	return true
}

// logGive takes n units booked at slot back off q's log, as far as it
// still holds them: a booking cancelled, or held by another part of All,
// sends nothing.
func (q *statedQuota) logGive(slot int64, n int) {
	for range n {
		i, found := slices.BinarySearch(q.log, slot)
		if !found {
			return
		}
		q.log = slices.Delete(q.log, i, i+1)
	}
}

// logUnbooked adds to the log of every quota of k in requests that keeps
// one a request admitted at sent that was not booked here (sent before
// the record heard anything): the first herd of a limiter configured too
// high is in the upstream's window as much as the bookings after it.
func (k *statedKey) logUnbooked(sent int64) {
	for i := range k.quotas {
		if q := &k.quotas[i]; q.unit == UnitRequests {
			q.logBook(sent, 1)
		}
	}
}

// logSeen trims q's log, at the first statement of a new window, to what
// the upstream says it counted in it: of the slots up to now, the latest
// limit less the remaining it stated (q.raw), and the inflight units it
// may not have counted yet. Older slots are out of its window. The
// window's later answers not known to be later than the lowest trim it
// again, with fewer in flight (record): trimmed at the first statement
// only, the herd still in flight was kept twice, in the slots and in the
// remaining, and the last units of every window waited a second for the
// tail of the window before (the README recipe against an aligned fixed
// window stating delays, a millisecond each way: 1.055× the minimum in
// most runs with 32 goroutines, 1.013× now). (Trimmed at every
// statement, TestFixedWindowDelayResetTooHigh met 429s in 4 of 10 runs:
// not traced.) A fixed window of 100 per 5 s stated as
// X-RateLimit-Reset in seconds, whose first 100 went 1.3 s into a window,
// held the next window's requests until 5 s after them, 1 s into it, in
// every window (the README recipe's aligned fixed window, x delta:
// 1.055× the minimum).
func (q *statedQuota) logSeen(now int64, inflight int) {
	if !q.logs() || q.raw < 0 {
		return
	}
	past, _ := slices.BinarySearch(q.log, now+1)
	// Compared, not summed: inflight may be absurd (an Outcome's
	// Unbooked is the caller's, and a count of absurd bookings wraps),
	// and the sum overflowed (FuzzUpstream). Below zero it keeps the
	// whole log: the safe side.
	if keep := q.limit - min(q.raw, q.limit); inflight >= 0 && inflight < past-keep {
		q.log = slices.Delete(q.log, 0, past-keep-inflight)
	}
}
