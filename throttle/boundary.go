package throttle

import "math"

// This file asks at a window's boundary. A window quota stated as an
// instant (a reset named by its window, see windowend.go) and not told
// sliding books what comes after its reset at its limit per window,
// evenly (spacing): a sliding counter whose old window was spent in full
// has no room at the boundary, and gets it back at that pace from there
// (paceStart). A fixed window has its whole limit at the boundary. Booked
// at the pace, the units stay there for good: the configured sliding log
// books each unit one window after the one it replaces, so the README
// recipe against a fixed window that starts at the first request (5c:
// sethvargo/go-limiter; 5f: ulule/limiter) paced every window after the
// first evenly: 12.6-12.9 s for 600 requests at 48 a second, where the
// upstream allows 12.0 (1.05-1.07×).
//
// So at a boundary one unit goes ahead and asks: every other booking
// past the reset waits for its answer, which states what the new window
// has left. A fixed window's limit is then booked at once; a counter's
// answer leaves nothing (and tells it sliding), and the held units go at
// the pace, about an answer's latency later than they would have been
// booked. At the first boundary two go, a spacing apart, and bookings
// with room before the new reset wait for both while they are due
// within two spacings: a token bucket can state its time until full as
// an epoch second (the middleware with ResetEpoch), and after a second of
// silence it looks like a fixed window that came back; only an answer a
// spacing later says it refilled in between (bucketlike.go), and from
// then on the configured limiter paces it. Not at every boundary: the
// second asker delays each window's burst by a spacing and an answer,
// and a window that starts at a request (ulule/limiter) starts that much
// later each time (4 callers against windows of 10 a second with 100 ms
// answers used 86-95% of them, where one asker uses all).
//
// A booking before the reset where the window may already have ended
// (unsure) asks the same way: its answer says which window it met.
//
// Not where another client was seen spending from the quota (others.go):
// a burst at the window's start takes the room the other client's sends
// later in the window would have had. On bench 5e (go-limiter, another
// client at a fifth of its limit) the README recipe met 7 429s and the
// other client was admitted 85 of its ~150; paced as before, 0 and 152.
//
// A hold ends when the answer is later than two answers' latency past
// its due (a hung upstream): the booking then goes where the record's
// pace puts it, as without the asking. A booking that would ask right
// after an answer, while units the answer may have counted are still in
// flight, waits one hold step instead: what is left may come back as
// their answers come in (a dip, see hold.go), and an asker books past
// the reset on the configured limiter too, which books nothing before it
// again.

// askers is how many units go ahead at the first boundary.
const askers = 2

// holdBoundary returns how long a booking of n units of q at from must
// wait for the answers of the units asking at q's boundary, or 0.
func (k *statedKey) holdBoundary(q *statedQuota, now, from int64, n int) int64 {
	if q.stamp == math.MinInt64 || q.sliding || !q.whole || q.shared || from >= q.expires {
		return 0 // not a window stated as an instant that came back at its start, or one shared
	}
	room := q.left >= n && from < q.reset && !q.unsure(from)
	if room && q.windows > 2 {
		return 0 // room before the reset, past the first boundary: no walk of the flight
	}
	// The askers in flight: units booked past a reset, or taking the
	// pace after it (unsure); the two due first. counted counts the
	// units taken from what is left that q's latest statement may have
	// counted: booked before it was learned, and sent before it came.
	count, counted, first, second := 0, 0, int64(math.MaxInt64), int64(math.MaxInt64)
	for i := range k.flight {
		f := &k.flight[i]
		j := f.b.part(q.name)
		if j < 0 {
			continue
		}
		d := k.due(f)
		if f.b.parts[j].before && f.b.parts[j].tatAfter == 0 {
			if f.learns < q.statedSeq && d <= q.statedAt {
				counted += f.of(q.unit)
			}
			continue
		}
		count++
		switch {
		case d < first:
			first, second = d, first
		case d < second:
			second = d
		}
	}
	need := 1
	if q.windows <= 1 {
		need = askers // the first boundary
	}
	switch {
	case room:
		if count == 0 || first > now+2*q.spacing() {
			return 0 // room before the reset, and no first boundary being asked
		}
	case q.earliest(from, n, k.paced) <= from:
		return 0 // the record holds nothing back (a bucket's refill, left to the limiter pacing the key)
	case count < need:
		if from < q.reset && q.left < n && now < q.heardAt+q.holdSpan() && q.left+counted >= n {
			return q.holdStep() // a dip: answers on their way may show room before the reset
		}
		return 0 // it asks
	}
	due := first // the earliest asker's answer, or at the first boundary the second's
	if count >= askers && q.windows <= 2 {
		due = second
	}
	wait := max(q.latency, int64(minHoldStep))
	end := due + max(2*wait, int64(minHoldSpan))
	switch {
	case now >= end:
		return 0
	case now < q.heardAt+q.holdSpan():
		return min(q.holdStep(), end-now)
	}
	return min(max(due-now, 0)+wait, end-now)
}
