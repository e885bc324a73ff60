package throttle

import "math"

// A quota that states its resets as instants and no window is paced
// after its reset at its limit per the window learned from successive
// resets (spacing): httprate, ulule and GitHub state window boundaries
// so. A token bucket can state its time until full that way too, as an
// epoch second (the middleware with ResetEpoch does): its resets are a
// second apart, the window learned from them is a second, and its burst
// is the limit. Paced at that, the README recipe against a bucket of
// 20/s and burst 10 sent 9 a second to 32 goroutines (2.26× the
// minimum), every answer saying 9 were left: the pace booked the callers
// far ahead, and answers that said more was left could not undo it.
//
// No window of the limit says that much is left. Once the upstream has
// admitted k requests that stated one reset, each sent after the answers
// before it had arrived (so handled after them), a fixed window (one
// window, named by its reset), a sliding log or a sliding counter (whose
// estimate counts the k in full) has at most limit − k left, as long as
// the k were sent within a window (for a sliding log, whose reset is when
// its oldest unit leaves, the same reset can be stated for longer; the
// window taken is the shortest the resets allow). An answer that says more
// is a bucket's, which refilled in between (or a window much shorter than
// the one learned). Requests in flight together are handled in any order:
// two sent 0.1 ms apart into go-limiter's fixed window of 48 came back
// stating 44, then 45, and counted as in order they told the window a
// bucket; left to the configured limiter 25% too high, 60 went into each
// window of 48 (5c: 28 and 132 429s in 2 of 3 passes on a busy machine).
// So an answer counts only when its request was sent after every counted
// answer arrived. Once told a bucket, the record stops pacing it after its
// reset, as it does a bucket that states its resets as delays, and the
// configured limiter paces (1.21× the minimum). Nor, beside a limiter,
// does its "0 left" hold the key until the reset, its time until full:
// held there, the README recipe at the published numbers fell, in about
// one run in thirty, into sending the bucket's burst at each second and
// nothing between (2.00× the minimum). An Upstream booked alone still
// holds there: nothing else paces the key.

// named counts the answers in order that stated one reset as an instant.
type named struct {
	reset  int64 // the reset they stated
	first  int64 // when the first of them was sent
	n      int   // admitted requests in order that stated it, sent within a window of the first
	at     int64 // when the latest of those n arrived
	sent   int64 // the latest request answered was sent
	bucket bool  // an answer said more was left than a window of the limit could have
}

// note adds an answer to a request sent at sent (math.MinInt64: at now),
// which stated remaining of limit and the reset as an instant at reset
// (Unix nanoseconds, as stated), and was admitted when ok. alone says no
// request sent before it is still unanswered; w is the shortest the
// quota's window can be.
func (m *named) note(reset, sent, now, w int64, ok, alone bool, remaining, limit int) {
	if sent == math.MinInt64 {
		sent = now
	}
	later := sent > m.sent || m.n == 0 && m.sent == 0
	m.sent = max(m.sent, sent)
	if !ok || !alone || !later || remaining < 0 || limit < 2 {
		return
	}
	if reset != m.reset || m.n == 0 || sent-m.first >= w {
		m.reset, m.first, m.n = reset, sent, 0
	} else if sent < m.at {
		return // in flight with a counted one: handled before or after it
	}
	m.n++
	m.at = now
	if m.n >= 2 && remaining > limit-m.n {
		m.bucket = true
	}
}

// bucketLike reports whether q stated more left than any window of its
// limit could have (see named): it is not paced after its reset.
func (q *statedQuota) bucketLike() bool { return q.named.bucket }
