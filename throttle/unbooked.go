package throttle

import "time"

// unbookedReadings estimates how many requests sent unbooked (before
// the record heard anything) are still pending as the record sees them:
// in flight, or answered and not yet learned here (in transit). A
// Transport counts those requests in flight on one counter, and each
// answer's Outcome.Unbooked is the counter just after that answer took
// itself off (or, for a booked request's answer, the counter as it was);
// the answers then reach the record's lock in any order. So a reading is
// stale: the counter has since gone down to the lowest reading learned,
// and the readings between that and the highest seen, once each, belong
// to answers taken off before; those not yet learned are in transit. An
// answer in transit is in neither Unbooked nor the answers learned, and
// the upstream may have counted it: taken for a pending request it
// counted, it let 5a's record, configured 25% too high, book up to 5
// more than its first window held (429s).
type unbookedReadings struct {
	seen     map[int]int // readings of unbooked answers learned, and how often
	low, top int         // the lowest and highest readings seen
	at       int64       // when the latest reading came
}

// maxReading bounds the readings kept: beyond it, none is tracked.
const maxReading = 1 << 12

// readingsKeep is how long the readings are kept after the latest one:
// answers are in transit for milliseconds; a reading not learned for a
// second never will be (a request that failed before the record heard
// anything is not reported to it).
const readingsKeep = int64(time.Second)

// pending returns how many unbooked requests are pending at the answer
// read v: the lowest reading learned, and the answers taken off before
// it and not yet learned. own is true when v is the reading of an
// unbooked answer, which counts as learned. A reading seen before, of an
// unbooked answer, means the counter went up again (requests booked
// before the record heard anything, sent after): the readings start over.
func (u *unbookedReadings) pending(v int, own bool, now int64) int {
	if v < 0 || v > maxReading {
		return max(v, 0)
	}
	if u.seen != nil && (now-u.at > readingsKeep || own && u.seen[v] > 0) {
		*u = unbookedReadings{}
	}
	if u.seen == nil {
		if !own {
			return v
		}
		u.seen, u.low, u.top = map[int]int{}, v, v
	}
	if own {
		u.seen[v]++
		u.at = now
	}
	u.low, u.top = min(u.low, v), max(u.top, v)
	n := u.low
	for r := u.low + 1; r <= u.top; r++ {
		if u.seen[r] == 0 {
			n++
		}
	}
	return n
}
