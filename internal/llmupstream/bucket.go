package llmupstream

import "time"

// bucket is one of the API's limits: a token bucket that holds up to limit
// tokens and refills continuously at limit per period, with exact integer
// arithmetic. Its level is kept in token-nanoseconds (tokens × period in
// ns), so that a refill of elapsed ns adds elapsed × limit and nothing is
// lost to rounding. It is not safe for concurrent use; API guards it.
type bucket struct {
	limit  int64
	period int64 // ns
	level  int64 // token-ns, in [0, limit×period]
	at     time.Time
}

func newBucket(limit int, period time.Duration, now time.Time) bucket {
	b := bucket{limit: int64(limit), period: int64(period), at: now}
	b.level = b.full()
	return b
}

func (b *bucket) full() int64 { return b.limit * b.period }

// refill brings the level up to now. A clock that goes backwards adds
// nothing.
func (b *bucket) refill(now time.Time) {
	elapsed := int64(now.Sub(b.at))
	if elapsed <= 0 {
		return
	}
	b.at = now
	if elapsed >= b.period { // also keeps elapsed × limit from overflowing
		b.level = b.full()
		return
	}
	b.level = min(b.level+elapsed*b.limit, b.full())
}

// wait returns how long until the bucket holds n tokens; 0 if it does now.
func (b *bucket) wait(n int) time.Duration {
	need := int64(n)*b.period - b.level
	if need <= 0 {
		return 0
	}
	return time.Duration((need + b.limit - 1) / b.limit)
}

// take removes n tokens; the caller has checked wait.
func (b *bucket) take(n int) { b.level -= int64(n) * b.period }

// give returns n tokens, never beyond full.
func (b *bucket) give(n int) { b.level = min(b.level+int64(n)*b.period, b.full()) }

// remaining is how many whole tokens the bucket holds.
func (b *bucket) remaining() int { return int(b.level / b.period) }

// untilFull is how long until the bucket is full again.
func (b *bucket) untilFull() time.Duration {
	return time.Duration((b.full() - b.level + b.limit - 1) / b.limit)
}
