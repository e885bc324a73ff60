package redislimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/egress-go/egress/throttle"
)

// WithSlotLease has a [TokenBucket] or [LeakyBucket] lease its units to
// this process in blocks, so that most decisions make no round trip to
// Redis. span is about how long one lease lasts: the units a process
// holds cover what it asked for in about the last span (its measured
// rate), at most the bucket's burst less the reserve, and a lease booked
// in the background tops them up to that while a quarter span's worth is
// still in hand, so that in the steady state no caller waits for Redis. (A [Queue]'s [WithLease] is another thing: how
// long its permits last.)
//
// A lease is a reservation of k units, booked in Redis at the slots GCRA
// gives them, and the process hands each out once, in order, to a caller
// who goes no earlier than its slot. A unit may go up to span after its
// slot (plus the round trip that leased it, the lateness of a one-trip
// reservation), so the bucket keeps span's worth of units of its burst
// in reserve: the fleet then stays within the configured bucket, whatever
// each process does, that is at most burst + rate×W units in any window
// of length W, the bound of the same bucket without leases (for at most
// L in any second, configure rate + burst ≤ L). A unit still held a span
// after its slot is dropped: quota lost, never granted twice. A process
// killed holding leased units loses what it held, at most one lease (a
// span of its demand), and the units its callers were waiting on, as
// without leases. WithSlotLease on a bucket whose burst cannot
// spare span's worth of units is an error, as are a span that is not
// positive and WithSlotLease on any other limiter.
//
// Other behaviour follows from the units being bookings:
//   - A process whose lease comes back empty knows when the next unit
//     fits, and refuses every caller who will not wait that long at
//     once, with no round trip on the caller's path. The first such
//     refusal leases, in the background, the units from then on (once
//     for each such time learned, and when callers come at least twice
//     a span), for the callers who come when they are due: else the
//     other processes, which book up to a span ahead, would have booked
//     past that time again when it came, and a process whose callers
//     use maxWait 0 would admit nothing. The
//     callers who will wait share one lease from then on; when other
//     processes book ahead of it twice running, a caller books one unit
//     in Redis, as without WithSlotLease.
//   - A pause moves the units in Redis. A process that learns of it (by
//     pub/sub or from a reply) drops the units it holds, and its next
//     lease comes back empty, with the pause's end as Delay.
//   - [throttle.Reservation.Cancel] of leased units puts them back in
//     the process's lease, at their own slots, for its next callers
//     (within a span of the slots, as any leased unit); Redis takes
//     nothing back, since other units of their block follow them. Close gives back the unused
//     tail of each key's newest blocks, while no other booking followed
//     them (the rule [throttle.Reservation.Cancel] follows).
//   - When a span passes with no call, the process gives back, under the
//     same rule, the tail of its newest block beyond what two spans of
//     its new rate need.
//   - While Redis is away, the process keeps handing out the units it
//     holds. Then [FailClosed], [FailOpen] and [Fallback] decide as
//     without leases, and [FailShare] takes the process's share.
//   - The slots are the server's time, so a client clock that steps
//     changes nothing: the process measures from each reply by its
//     monotonic clock.
//
// Reserve and AllowN take leased units; ReserveAfter (and so [All])
// books in Redis as without WithSlotLease. Leased units cannot be
// settled: [throttle.Reservation.Settle] of a reservation from Reserve
// returns [throttle.ErrNoSettle], and the units keep their estimate. A
// budget whose costs are settled (an LLM API's, with egress.WithEstimate)
// books through [All], which settles in Redis.
func WithSlotLease(span time.Duration) Option {
	return option{"WithSlotLease", false, func(c *config) { c.slotLease = span }}
}

// FailShare is a [FailurePolicy] for limiters given [WithSlotLease]:
// while Redis is away, once the units in hand are spent, a process takes
// its share of the budget in process: the limit (rate and burst) divided
// by the processes that leased on the key lately, which each lease call
// counts (a process counts for a hundred spans, and at least 10 s, after
// its last lease call). It starts three spans after the first failed
// call, when every unit leased before the outage has gone; once Redis is
// back, its next lease books no slot before the last one the share gave.
// A process that was alone when it last reached Redis takes the whole
// budget. A process idle for longer drops out of the others' count, so
// that if it wakes into an outage the fleet may pass the limit: by its
// share, at most.
const FailShare FailMode = -1

// oneTrip, as reserve's after, books in Redis without the lease.
const oneTrip time.Duration = -1

// liveFor is how long a lease call counts its process as live: a hundred
// spans, and at least 10 s, so that a process idle for a while still
// counts when an outage finds it busy again.
func liveFor(span time.Duration) time.Duration { return max(100*span, 10*time.Second) }

// leases hands out a budget's units from blocks it leases per key. It
// exists for the bench/leases goals (≤ 0.05 round trips per admitted
// request, ≥ 10× redis_rate's decisions per second on one key).
type leases struct {
	b      *budget
	span   int64 // ns
	id     string
	script *script
	share  bool // the policy is FailShare

	// mu guards keys and sweepAt. A keyLease's mu may be taken under it,
	// never the other way round.
	mu      sync.Mutex
	keys    map[string]*keyLease
	sweepAt int

	// life guards closed, and so wg's Add; it may be taken under a
	// keyLease's mu.
	life   sync.Mutex
	closed bool
	wg     sync.WaitGroup // lease calls and give-backs in the background
}

// newLeases checks that b can lease.
func newLeases(b *budget, cfg config) (*leases, error) {
	share := cfg.policy == FailShare
	switch {
	case share && !cfg.given("WithSlotLease"):
		return nil, errors.New("redislimit: FailShare needs WithSlotLease")
	case cfg.slotLease <= 0:
		return nil, fmt.Errorf("redislimit: WithSlotLease must be positive, got %v", cfg.slotLease)
	case len(b.limits) != 1 || (b.limits[0].algo != "tb" && b.limits[0].algo != "lb"):
		return nil, errors.New("redislimit: WithSlotLease takes a TokenBucket or a LeakyBucket")
	}
	// A leased unit may go up to a span after its slot, so the bucket
	// keeps a span's units of its burst in reserve: any window of the
	// fleet's then holds no more than the configured limit.
	lim := &b.limits[0]
	iv := lim.nanos()
	keep := cfg.slotLease.Nanoseconds() / iv // ceil, without the sum that overflowed for a span near MaxInt64
	if cfg.slotLease.Nanoseconds()%iv != 0 {
		keep++
	}
	if keep >= lim.burst {
		return nil, fmt.Errorf("redislimit: WithSlotLease of %v keeps %d units in reserve, more than the burst of %d allows; shorten it or raise the burst", cfg.slotLease, keep, lim.burst)
	}
	lim.burst -= keep
	lim.most -= int(keep)
	b.most = lim.most
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &leases{
		b: b, span: int64(cfg.slotLease), id: hex.EncodeToString(id[:]), share: share,
		script: joinScript("now.lua", "state.lua", "gcra.lua", "message.lua", "pause.lua", "slotlease.lua"),
		keys:   make(map[string]*keyLease), sweepAt: minSweep,
	}, nil
}

// leased reports whether a limiter built with c is to lease.
func (c config) leased() bool { return c.policy == FailShare || c.given("WithSlotLease") }

// given reports whether the option named name was given.
func (c config) given(name string) bool {
	return slices.ContainsFunc(c.set, func(o option) bool { return o.name == name })
}

// keyLease is one key's leased slots and what sizes the next lease.
type keyLease struct {
	// mu guards every field. It is never held during I/O.
	mu       sync.Mutex
	blocks   []*block      // oldest first
	renewing chan struct{} // closed when the lease call on the wire ends
	spent    int64         // local ns: nothing fits in Redis before it
	ahead    int64         // the spent a lease was last booked from, for refused callers
	seen     [2]int64      // the pause epoch and shift spent was learned under
	asked    int           // units asked for since askedAt
	askedAt  int64         // when the rate was last measured
	lastAsk  int64         // when units were last asked for
	lastDue  int64         // the latest due time of a unit handed out
	rate     float64       // units per second, smoothed
	live     int64         // processes Redis last counted, at least 1
	liveAt   int64         // when Redis last counted them (local ns)
	down     bool          // the last lease call found Redis unavailable
	shareTat int64         // the share's GCRA state, local ns (0: unused)
	shareAt  int64         // no share slot before it
	dropped  int64         // units leased but dropped unused
	given    int64         // units given back as demand dropped
	err      error         // the last lease call's, when Redis was not to blame
}

// block is one lease: k units, the first next of them handed out or
// dropped. Times are the server's microseconds, but tat and interval,
// which are its nanoseconds, as the script adds them up (gcra.lua); off
// converts microseconds to local ns, late by the reply's trip.
type block struct {
	next, k                     int
	first, tat, interval, burst int64
	off                         int64
	grace                       int64 // ns a slot may be handed out late: the span (off is late by the trip already)
	epoch, shifted, seq, before int64
	ps                          *pauseState
}

// slot returns the local due time of unit i (0-based).
func (bl *block) slot(i int) int64 {
	return bl.micros(i)*1000 + bl.off
}

// micros returns the server's due time of unit i (0-based), rounded up to
// a whole microsecond as the script rounds a slot.
func (bl *block) micros(i int) int64 {
	return max(bl.first, ceilMicros(bl.tat+(int64(i)+1-bl.burst)*bl.interval))
}

// ceilMicros returns ns nanoseconds in whole microseconds, rounded up.
func ceilMicros(ns int64) int64 {
	us := ns / 1000 // toward zero: rounded up when ns < 0
	if ns%1000 > 0 {
		us++
	}
	return us
}

// unit returns unit i of bl as a block of its own: what Cancel puts back.
// Its seq is -1, so that it is never given back to Redis (it is not the
// bucket's latest booking).
func (bl *block) unit(i int) *block {
	u := *bl
	us := bl.micros(i)
	u.next, u.k, u.first, u.tat, u.burst = 0, 1, us, us*1000, 1
	u.seq, u.before = -1, -1
	return &u
}

// put puts back the units of a cancelled reservation that may still go,
// among the blocks in the order of their slots. kl.mu is held.
func (kl *keyLease) put(units []*block, now int64) {
	for _, u := range units {
		at := u.slot(0)
		if at+u.grace < now {
			continue // it would be dropped at once
		}
		i := 0
		for i < len(kl.blocks) && kl.blocks[i].slot(kl.blocks[i].next) <= at {
			i++
		}
		kl.blocks = slices.Insert(kl.blocks, i, u)
	}
}

// tatAfter returns the bucket's tat (ns) had the block booked only j
// units.
func (bl *block) tatAfter(j int) int64 {
	if j == 0 {
		return bl.tat
	}
	return max(bl.tat, bl.first*1000) + int64(j)*bl.interval
}

func (l *leases) key(key string) *keyLease {
	l.mu.Lock()
	defer l.mu.Unlock()
	kl := l.keys[key]
	if kl == nil {
		if len(l.keys) >= l.sweepAt {
			l.sweep()
		}
		kl = &keyLease{live: 1}
		l.keys[key] = kl
	}
	return kl
}

// sweep drops the keys that hold nothing and know nothing that a new
// lease call would not tell again. Blocks whose every slot has passed
// hold nothing: a key that went idle holding units had been kept for
// good. A key marked down is dropped once its share's start has passed,
// and one that counted other processes once that count is as old as
// the count Redis keeps of this process (liveFor): else a key swept
// just before an outage took the whole budget under FailShare, as if
// alone. l.mu is held.
func (l *leases) sweep() {
	now := l.b.client.now()
	stale := int64(liveFor(time.Duration(l.span)))
	for k, kl := range l.keys {
		kl.mu.Lock()
		kl.dropPassed(now)
		if len(kl.blocks) == 0 && kl.renewing == nil && (!kl.down || kl.shareAt <= now) &&
			kl.spent <= now && kl.shareTat <= now && (kl.live <= 1 || now-kl.liveAt >= stale) {
			delete(l.keys, k)
		}
		kl.mu.Unlock()
	}
	l.sweepAt = max(minSweep, 2*len(l.keys))
}

// dropPassed drops the blocks whose every unit's slot has passed by more
// than the grace: none of them can be handed out. kl.mu is held.
func (kl *keyLease) dropPassed(now int64) {
	kl.blocks = slices.DeleteFunc(kl.blocks, func(bl *block) bool {
		if bl.next < bl.k && bl.slot(bl.k-1)+bl.grace >= now {
			return false
		}
		kl.dropped += int64(bl.k - bl.next)
		return true
	})
}

// goBackground runs f on a goroutine that close waits for, unless the
// leases are closed, and reports whether it did.
func (l *leases) goBackground(f func()) bool {
	l.life.Lock()
	defer l.life.Unlock()
	if l.closed {
		return false
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f()
	}()
	return true
}

// reserve takes n leased units for key, leasing more when the process
// holds too few.
func (l *leases) reserve(ctx context.Context, key string, n int, maxWait time.Duration, track bool) (*throttle.Reservation, *booking, error) {
	ks, err := l.b.check(ctx, key, n)
	if err != nil {
		return nil, nil, err
	}
	c := l.b.client
	kl := l.key(key)
	counted, joined := false, 0
	for {
		now := c.now()
		cur := c.pauses.current(ks[0])
		kl.mu.Lock()
		if !counted {
			// Silent: no call for a span, and no caller still waiting
			// for a unit handed out.
			silent := kl.askedAt != 0 && now-max(kl.lastAsk, kl.lastDue) >= l.span
			if kl.askedAt == 0 || silent {
				kl.asked, kl.askedAt, kl.rate = 0, now, 0
			}
			kl.asked += n
			kl.lastAsk = now
			counted = true
			if silent { // demand dropped
				kl.drop(now, cur)
				kl.measure(now, l.span)
				l.trimLocked(kl, ks, n)
			}
		}
		kl.drop(now, cur)
		kl.measure(now, l.span)
		if r, ok := kl.take(c, n, now, maxWait); ok {
			if kl.low(l.span, l.b.most) && kl.renewing == nil {
				l.renewLocked(kl, ks, n)
			}
			kl.mu.Unlock()
			return r, nil, nil
		}
		wait := func(d int64) bool { return maxWait >= 0 && time.Duration(d) > maxWait }
		if kl.spent > now && wait(kl.spent-now) {
			// The other processes book up to a span ahead, so that by
			// spent they have booked past it again: the units from
			// spent on are leased now, once per spent learned, for the
			// callers who come when they are due; unless callers come
			// less than twice a span, who would mostly find them gone.
			if kl.renewing == nil && kl.ahead != kl.spent && kl.rate*float64(l.span) >= 2e9 {
				kl.ahead = kl.spent
				l.renewLocked(kl, ks, n)
			}
			d := kl.spent - now - int64(maxWait)
			kl.mu.Unlock()
			return throttle.Refused(time.Duration(d), 0), nil, nil
		}
		if kl.down {
			if kl.renewing == nil {
				l.renewLocked(kl, ks, n) // probes, in the background
			}
			kl.mu.Unlock()
			return l.outage(ctx, kl, key, n, maxWait, now)
		}
		if kl.spent > now {
			if joined >= 2 { // the fleet keeps booking ahead of this process
				kl.mu.Unlock()
				return l.b.reserve(ctx, key, n, oneTrip, maxWait, track)
			}
			joined++ // a lease from spent on serves every caller who waits
		}
		ch := kl.renewing
		if ch == nil {
			ch = l.renewLocked(kl, ks, n)
		}
		kl.mu.Unlock()
		if ch == nil {
			// Closed: no lease call starts again, so a caller books in
			// Redis, as without WithSlotLease (it had spun forever).
			return l.b.reserve(ctx, key, n, oneTrip, maxWait, track)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		kl.mu.Lock()
		err := kl.err
		kl.mu.Unlock()
		if err != nil {
			return nil, nil, err
		}
	}
}

// drop discards the slots that passed unused and the blocks a pause made
// stale: cur is the key's pause state now. kl.mu is held.
func (kl *keyLease) drop(now int64, cur *pauseState) {
	if kl.spent > now && (cur == nil || cur.epoch.Load() != kl.seen[0] || cur.shifted.Load() != kl.seen[1]) {
		kl.spent = 0 // a pause moved it: ask Redis
	}
	for len(kl.blocks) > 0 {
		bl := kl.blocks[0]
		if bl.ps != cur || cur.epoch.Load() != bl.epoch || cur.shifted.Load() != bl.shifted {
			kl.dropped += int64(bl.k - bl.next)
			bl.next = bl.k // moved by a pause: void
		}
		for bl.next < bl.k && bl.slot(bl.next)+bl.grace < now {
			bl.next++
			kl.dropped++
		}
		if bl.next < bl.k {
			return
		}
		kl.blocks = kl.blocks[1:]
	}
}

// held returns how many units the blocks hold. kl.mu is held.
func (kl *keyLease) held() int {
	h := 0
	for _, bl := range kl.blocks {
		h += bl.k - bl.next
	}
	return h
}

// take hands out n units, if the blocks hold them, as one reservation due
// at the last one's slot. kl.mu is held.
func (kl *keyLease) take(c *Client, n int, now int64, maxWait time.Duration) (*throttle.Reservation, bool) {
	var held int
	var last *block
	var due int64
	for {
		if held = kl.held(); held < n {
			return nil, false
		}
		// The n-th unit ahead, across blocks.
		for i, bi := n, 0; i > 0; bi++ {
			bl := kl.blocks[bi]
			m := min(i, bl.k-bl.next)
			last, due = bl, bl.slot(bl.next+m-1)
			i -= m
		}
		// The n units go together, at the last one's slot: the first
		// may not go later than its own allows (drop saw to now).
		first := kl.blocks[0]
		if due <= first.slot(first.next)+first.grace {
			break
		}
		first.next++
		kl.dropped++
		if first.next == first.k {
			kl.blocks = kl.blocks[1:]
		}
	}
	delay := max(due-now, 0)
	if maxWait >= 0 && time.Duration(delay) > maxWait {
		return throttle.Refused(time.Duration(delay)-maxWait, kl.ready(now)), true
	}
	units := make([]*block, 0, n)
	for i := n; i > 0; {
		bl := kl.blocks[0]
		m := min(i, bl.k-bl.next)
		for j := range m {
			units = append(units, bl.unit(bl.next+j))
		}
		bl.next += m
		i -= m
		if bl.next == bl.k {
			kl.blocks = kl.blocks[1:]
		}
	}
	kl.lastDue = max(kl.lastDue, due)
	lb := &leaseBooking{c: c, ps: last.ps, base: due - last.shifted*1000, kl: kl, units: units}
	last.ps.hold(lb.base)
	return throttle.NewReservation(lb, time.Duration(delay), kl.ready(now)), true
}

// ready returns how many of the units held are due by now: those a
// caller could take at once, which is what a Reservation's Remaining
// states. Units held for slots ahead are not left now: a client told
// them as the RateLimit field's r, sending that many at once, was
// refused. The blocks are in the order of their slots, and so are each
// block's units. kl.mu is held.
func (kl *keyLease) ready(now int64) int {
	n := 0
	for _, bl := range kl.blocks {
		left := bl.k - bl.next
		due := sort.Search(left, func(i int) bool { return bl.slot(bl.next+i) > now })
		n += due
		if due < left {
			break
		}
	}
	return n
}

// low reports whether the units held last less than a quarter span at
// the rate this process asks for them (or a quarter of most), which is
// then worth leasing ahead for: the top-up is then at least three
// quarters of a lease. kl.mu is held.
func (kl *keyLease) low(span int64, most int) bool {
	need := min(kl.rate*float64(span)/1e9, float64(most))
	return need >= 1 && float64(kl.held()) < need/4 // else a caller leases when it comes
}

// measure updates the rate this process asks for units at: over the
// last span or more, or, within a span, what was asked so far counted as
// the span's, a lower bound, so that the rate rises at once. kl.mu is
// held.
func (kl *keyLease) measure(now, span int64) {
	if kl.askedAt == 0 {
		return
	}
	if el := now - kl.askedAt; el >= span {
		kl.rate = float64(kl.asked) * 1e9 / float64(el)
		kl.asked, kl.askedAt = 0, now
		return
	}
	kl.rate = max(kl.rate, float64(kl.asked)*1e9/float64(span))
}

// trimLocked gives back, in the background, the tail of the newest block
// beyond what two spans of the rate asked for (and n) need: reserve calls
// it when demand has dropped, after a span with no call. The units leave
// the block at once, so that none is handed out while the give-back is on
// the wire; Redis takes them back only while the block is the bucket's
// latest booking, as Cancel would, and otherwise they return to the
// block. kl.mu is held.
func (l *leases) trimLocked(kl *keyLease, ks []string, n int) {
	excess := kl.held() - n - int(math.Ceil(2*kl.rate*float64(l.span)/1e9))
	if excess <= 0 || len(kl.blocks) == 0 {
		return
	}
	bl := kl.blocks[len(kl.blocks)-1]
	if bl.seq < 0 {
		return // a unit put back by Cancel
	}
	keep := max(bl.k-excess, bl.next)
	if keep == bl.k {
		return
	}
	tail := *bl
	tail.next = keep
	bl.k = keep // none of them is handed out while the give-back is on the wire
	c := l.b.client
	l.goBackground(func() {
		given := l.giveBack(ks, &tail, c)
		kl.mu.Lock()
		defer kl.mu.Unlock()
		switch {
		case given:
			kl.given += int64(tail.k - keep)
		case bl.k == keep && slices.Contains(kl.blocks, bl):
			bl.k = tail.k // refused: the units are still this process's
		}
	})
}

// renewLocked starts a lease call for key's state kl, in the background,
// and returns the channel closed when it ends; a caller that needs it
// waits on the channel under its own context. It returns nil once the
// leases are closed. kl.mu is held.
func (l *leases) renewLocked(kl *keyLease, ks []string, n int) chan struct{} {
	ch := make(chan struct{})
	now := l.b.client.now()
	kl.measure(now, l.span)
	// One lease tops the units held up to a span of the rate asked for,
	// so that the process never holds more than one lease's worth: what
	// it loses if killed.
	need := min(int(math.Ceil(kl.rate*float64(l.span)/1e9)), l.b.most)
	want := max(need-kl.held(), n)
	// The lease reaches one span past from, the earliest its units may
	// lie: when the next unit fits, after the share's units. So a process
	// holds at most about a span of the fleet's units, however hot. Its
	// units start once those held will have gone, at the rate asked.
	from := max(kl.spent-now, kl.shareTat-now+1000, 0) / 1000 // µs
	after := from
	if held := kl.held(); held > 0 && kl.rate > 0 {
		after = min(max(after, int64(float64(held)/kl.rate*1e6)), from+l.span/2000)
	}
	kl.renewing = ch
	if !l.goBackground(func() { l.renew(kl, ks, want, after, from+l.span/1000, ch) }) {
		kl.renewing = nil
		close(ch)
		return nil // closed
	}
	return ch
}

// renew makes one lease call and files its block.
func (l *leases) renew(kl *keyLease, ks []string, want int, after, horizon int64, ch chan struct{}) {
	c := l.b.client
	defer func() {
		kl.mu.Lock()
		kl.renewing = nil
		kl.mu.Unlock()
		close(ch)
	}()
	lim := l.b.limits[0]
	keys := append(ks[:2:2], ks[1]+":live")
	args := []any{"lease", c.frozenMicros(), 1, lim.algo, lim.interval, lim.sub, lim.burst,
		want, horizon, after, l.id, int64(liveFor(time.Duration(l.span)) / time.Microsecond), c.channel}
	sent := c.now()
	v, err := c.runScript(context.Background(), l.script, keys, args)
	arrived := c.now()
	if err == nil {
		var bl *block
		var spent, live int64
		if bl, spent, live, err = l.parse(v, arrived); err == nil {
			l.file(kl, ks, bl, spent, live, arrived)
			return
		}
	}
	kl.mu.Lock()
	defer kl.mu.Unlock()
	if !errors.Is(err, ErrUnavailable) {
		kl.err = err
		return
	}
	if !kl.down {
		// Every unit leased before the outage goes within about two spans
		// of its start, which came before this call was sent: a lease
		// reaches at most a span ahead (of when the next unit fits), and
		// a unit goes at most a span after its slot.
		kl.down = true
		kl.shareAt = max(kl.shareAt, sent+3*l.span, kl.lastSlot())
	}
}

// file records a lease call's answer: its block, or when the next unit
// fits.
func (l *leases) file(kl *keyLease, ks []string, bl *block, spent, live, arrived int64) {
	bl.ps = l.b.client.pauses.learn(ks[0], bl.epoch, bl.shifted, true)
	kl.mu.Lock()
	defer kl.mu.Unlock()
	kl.down, kl.live, kl.liveAt, kl.err = false, max(live, 1), arrived, nil
	kl.shareTat, kl.shareAt = 0, 0
	if bl.k == 0 {
		kl.spent, kl.seen = arrived+spent, [2]int64{bl.epoch, bl.shifted}
		return
	}
	bl.ps.hold(bl.slot(bl.k-1) - bl.shifted*1000)
	kl.spent = 0
	kl.blocks = append(kl.blocks, bl)
}

// lastSlot returns the local time of the last slot held. kl.mu is held.
func (kl *keyLease) lastSlot() int64 {
	if len(kl.blocks) == 0 {
		return 0
	}
	bl := kl.blocks[len(kl.blocks)-1]
	return bl.slot(bl.k - 1)
}

// parse reads a lease reply: the block (k 0 when empty), how long until a
// unit fits when empty (ns), and the live processes.
func (l *leases) parse(v any, arrived int64) (*block, int64, int64, error) {
	a, err := array(v, 11, "lease")
	if err != nil {
		return nil, 0, 0, err
	}
	f, err := integers(a, "k", "delay", "live", "epoch", "shifted", "now", "first", "tat", "seq", "before", "owe")
	if err != nil {
		return nil, 0, 0, err
	}
	lim := l.b.limits[0]
	bl := &block{
		k: int(f[0]), first: f[6], tat: f[7]*1000 - f[10], interval: lim.nanos(), burst: lim.burst,
		off: arrived - f[5]*1000, grace: l.span,
		epoch: f[3], shifted: f[4], seq: f[8], before: f[9],
	}
	return bl, f[1] * 1000, f[2], nil
}

// outage takes n units from the process's share of the budget while
// Redis is away, as the FailurePolicy says.
func (l *leases) outage(ctx context.Context, kl *keyLease, key string, n int, maxWait time.Duration, now int64) (*throttle.Reservation, *booking, error) {
	if !l.share {
		r, err := l.b.fail(ctx, key, n, 0, maxWait, &UnavailableError{Err: ErrUnavailable})
		return r, nil, err
	}
	kl.mu.Lock()
	defer kl.mu.Unlock()
	lim := l.b.limits[0]
	live := kl.live
	interval := lim.nanos() * live
	burst := max(lim.burst/live, 1)
	if int64(n) > burst {
		return nil, nil, fmt.Errorf("%w: n is %d, the share holds %d", throttle.ErrExceedsCapacity, n, burst)
	}
	at := max(now, kl.shareAt, kl.shareTat+(int64(n)-burst)*interval)
	if maxWait >= 0 && time.Duration(at-now) > maxWait {
		return throttle.Refused(time.Duration(at-now)-maxWait, 0), nil, nil
	}
	kl.shareTat = max(kl.shareTat, at) + int64(n)*interval
	return throttle.NewReservation(&leaseBooking{c: l.b.client, base: at}, time.Duration(at-now), 0), nil, nil
}

// pauseLocal applies a pause that could not reach Redis to what the
// process decides alone: the units it holds, whose slots the pause would
// have moved, are dropped, and the share (FailShare) gives no slot before
// the pause ends, then resumes at its rate; once Redis is back, the next
// lease books no slot before that either. It reports whether the pause
// was taken, as it is under FailShare; otherwise the failure policy
// answers.
func (l *leases) pauseLocal(key string, d time.Duration) bool {
	kl := l.key(key)
	now := l.b.client.now()
	kl.mu.Lock()
	defer kl.mu.Unlock()
	kl.dropped += int64(kl.held())
	kl.blocks = nil
	if !l.share {
		return false
	}
	lim := l.b.limits[0]
	live := max(kl.live, 1)
	interval := lim.nanos() * live
	burst := max(lim.burst/live, 1)
	end := now + min(max(d, 0), maxPause).Nanoseconds()
	kl.shareAt = max(kl.shareAt, end)
	kl.shareTat = max(kl.shareTat, end+(burst-1)*interval)
	return true
}

// close waits for the lease calls on the wire and gives back the unused
// tail of each key's newest blocks.
func (l *leases) close() {
	l.life.Lock()
	l.closed = true
	l.life.Unlock()
	l.wg.Wait()
	l.mu.Lock()
	keys := make(map[string][]*block, len(l.keys))
	for key, kl := range l.keys {
		kl.mu.Lock()
		keys[key], kl.blocks = kl.blocks, nil
		kl.mu.Unlock()
	}
	l.mu.Unlock()
	c := l.b.client
	for key, blocks := range keys {
		ks, err := l.b.keys(key)
		if err != nil {
			continue
		}
		for i := len(blocks) - 1; i >= 0; i-- {
			if !l.giveBack(ks, blocks[i], c) {
				break
			}
		}
	}
}

// giveBack gives back the units of bl not yet handed out, if bl is still
// the bucket's latest booking, and reports whether it was.
func (l *leases) giveBack(ks []string, bl *block, c *Client) bool {
	if bl.seq < 0 {
		return false // a unit put back by Cancel
	}
	lim := l.b.limits[0]
	keys := append(ks[:2:2], ks[1]+":live")
	latest := bl.before // the block goes, and the one before may go next
	if bl.next > 0 {
		latest = bl.seq // what is left of it stays the latest booking
	}
	tat := bl.tatAfter(bl.next)
	us := ceilMicros(tat)
	args := []any{"giveback", c.frozenMicros(), 1, lim.algo, lim.interval, lim.sub, lim.burst,
		bl.seq, latest, us, us*1000 - tat, bl.epoch, bl.shifted, c.channel}
	v, err := c.runScript(context.Background(), l.script, keys, args)
	if err != nil {
		return false
	}
	given, err := integer(v, "giveback")
	return err == nil && given == 1
}

// leaseBooking is the [throttle.Booking] of leased units, or of units
// from the share.
type leaseBooking struct {
	c     *Client
	ps    *pauseState // nil from the share
	base  int64       // local due time in ns, less the shift when leased
	kl    *keyLease   // nil from the share
	units []*block    // the units, one block each, for Cancel
}

// Until implements [throttle.Booking]: local, no I/O. The slot follows
// every shift learned since it was leased.
func (b *leaseBooking) Until() time.Duration {
	at := b.base
	if b.ps != nil {
		at += b.ps.shiftedNanos()
	}
	return time.Duration(at - b.c.now())
}

// Cancel implements [throttle.Booking], locally: the units go back to
// the process's lease, at their own slots, for its next callers, unless
// a span has passed since. Redis takes nothing back, since other units
// of their block may follow them; a unit from the share gives nothing
// back.
func (b *leaseBooking) Cancel(context.Context) error {
	if b.kl == nil {
		return nil
	}
	b.kl.mu.Lock()
	defer b.kl.mu.Unlock()
	b.kl.put(b.units, b.c.now())
	return nil
}

// current returns the state tracked for key, or nil.
func (p *pauses) current(key string) *pauseState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keys[key]
}
