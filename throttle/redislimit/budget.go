package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress/internal/nilcheck"
	"github.com/egress-go/egress/throttle"
)

var (
	_ throttle.Limiter   = (*TokenBucket)(nil)
	_ throttle.Pauser    = (*LeakyBucket)(nil)
	_ throttle.Allower   = (*SlidingWindow)(nil)
	_ throttle.Deferrer  = (*SlidingWindowCounter)(nil)
	_ throttle.Inspector = (*FixedWindow)(nil)
	_ throttle.Deferrer  = (*Composite)(nil)
)

// budget runs one or more limits on a key in one script: it is what
// every limiter of this package is, and implements [throttle.Limiter],
// [throttle.Deferrer], [throttle.Pauser], [throttle.Allower] and
// [throttle.Inspector].
type budget struct {
	client   *Client
	own      bool // Close closes client
	limits   []limit
	most     int // the most units one call can get: the least of the limits'
	policy   FailurePolicy
	horizons *horizons             // under Fallback only
	leases   *leases               // under WithSlotLease only
	follow   *follow               // when a limit follows the upstream's statements (WithStated)
	boxed    atomic.Pointer[[]any] // see limitArgs
}

// constructors names the function that builds a limit of each algo, for
// errors.
var constructors = map[string]string{
	"tb": "NewTokenBucket", "lb": "NewLeakyBucket", "fw": "NewFixedWindow",
	"sl": "NewSlidingWindow", "swc": "NewSlidingWindowCounter",
}

// newBudget builds a budget on cfg's Client, or on a Client of its own
// for rdb.
func newBudget(rdb redis.Scripter, cfg config, limits ...limit) (*budget, error) {
	if nilcheck.Is(rdb) {
		panic("redislimit: nil redis.Scripter")
	}
	b := &budget{client: cfg.client, limits: limits, most: limits[0].most, policy: cfg.policy}
	for _, l := range limits[1:] {
		b.most = min(b.most, l.most)
	}
	if cfg.given("WithFloor") { // NewAdaptive's; it does not build a budget
		return nil, fmt.Errorf("redislimit: %s does not take WithFloor, which only NewAdaptive takes", constructors[limits[0].algo])
	}
	if err := checkStated(cfg); err != nil {
		return nil, err
	}
	if cfg.stated != "" {
		for i := range limits {
			limits[i].unit = cfg.stated
		}
		b.follow = newFollow(limits)
	}
	if _, ok := cfg.policy.(fallback); ok {
		b.horizons = newHorizons()
	}
	if cfg.leased() {
		var err error
		if b.leases, err = newLeases(b, cfg); err != nil {
			return nil, err
		}
	}
	if b.client == nil {
		b.client, b.own = newClient(rdb, cfg), true
		return b, nil
	}
	if err := cfg.only(false, "a limiter given WithClient"); err != nil {
		return nil, err
	}
	if !sameClient(rdb, b.client.rdb) {
		return nil, fmt.Errorf("redislimit: WithClient's Client is on another redis client than the limiter's")
	}
	return b, nil
}

// limit is one limit as the script sees it (see the .lua files).
type limit struct {
	algo   string // tb, lb, fw, sl or swc
	suffix string // names the limit's key: <algo>:<n>/<per> (a bucket's rate: see rateName)
	most   int    // the most units one call can get

	// GCRA (tb, lb): the time between units, interval µs and sub ns
	// (sub 0: see gcraLimit), and units at once.
	interval, sub, burst int64
	// Windows (fw, sl, swc): units per window, and (µs) its length,
	// offset and tolerance.
	perWindow, window, offset, tolerance int64
	// unit is the unit of the upstream's quotas the limit follows
	// (WithStated), or "".
	unit string
}

// rateName names the rate r in a key: as a whole count per second,
// minute or hour where one is whole (else per millisecond, microsecond or
// nanosecond; else as r is written), so that one rate written two ways
// names one key: PerMinute(600) and PerSecond(10) are both "10/s". Named
// as written, a fleet that changed one for the other in a rolling deploy
// paced two buckets at once, at twice the rate.
func rateName(r throttle.Rate) string {
	for _, u := range []time.Duration{time.Second, time.Minute, time.Hour, time.Millisecond, time.Microsecond, time.Nanosecond} {
		if r.Per > 0 && int64(r.N) <= math.MaxInt64/int64(u) && int64(r.N)*int64(u)%int64(r.Per) == 0 {
			return throttle.Rate{N: int(int64(r.N) * int64(u) / int64(r.Per)), Per: u}.String()
		}
	}
	return r.String()
}

// args appends the limit's arguments to the script's.
func (l limit) args(a []any) []any {
	switch l.algo {
	case "tb", "lb":
		return append(a, l.algo, l.interval, l.sub, l.burst)
	case "fw":
		return append(a, l.algo, l.perWindow, l.window, l.offset, l.tolerance)
	}
	return append(a, l.algo, l.perWindow, l.window)
}

// args returns the script's arguments for op, before the op's own, with
// room for extra more. op is a constant at every call, so that passing it
// as an any costs nothing.
func (b *budget) args(op any, extra int) []any {
	limits := b.limitArgs()
	a := make([]any, 0, 3+len(limits)+extra)
	a = append(a, op, b.client.frozenMicros(), len(b.limits))
	return append(a, limits...)
}

// limitArgs returns every limit's arguments, boxed once: the same on
// every call. Speed only: Redis decisions/s ≥ 0.9× redis_rate (bench/micro
// RedisDecision); boxing them on each call costs an allocation or more
// per limit.
func (b *budget) limitArgs() []any {
	if p := b.boxed.Load(); p != nil {
		return *p
	}
	var a []any
	for _, l := range b.limits {
		a = l.args(a)
	}
	b.boxed.Store(&a) // racing callers store the same
	return a
}

// pauseSuffix names a key's pause state.
const pauseSuffix = "pause"

// keys returns the pause key and each limit's key for key, all under one
// hash tag.
func (b *budget) keys(key string) ([]string, error) {
	switch {
	case key == "" || key[0] == '}':
		return nil, fmt.Errorf("redislimit: key must be non-empty and not start with '}', got %q", key)
	case len(key) > throttle.MaxKeyLen:
		return nil, fmt.Errorf("redislimit: key of %d bytes is longer than throttle.MaxKeyLen (%d)", len(key), throttle.MaxKeyLen)
	}
	// One string holds every key, and each key is a part of it: two
	// allocations for any number of limits. Speed only: Redis
	// decisions/s ≥ 0.9× redis_rate (bench/micro RedisDecision).
	tag := len(b.client.prefix) + len(key) + 3
	var sb strings.Builder
	sb.Grow(tag*(1+len(b.limits)) + len(pauseSuffix) + b.suffixLen())
	b.writeKey(&sb, key, pauseSuffix)
	for _, l := range b.limits {
		b.writeKey(&sb, key, l.suffix)
	}
	all := sb.String()
	ks := make([]string, 1+len(b.limits))
	ks[0], all = all[:tag+len(pauseSuffix)], all[tag+len(pauseSuffix):]
	for i, l := range b.limits {
		ks[1+i], all = all[:tag+len(l.suffix)], all[tag+len(l.suffix):]
	}
	return ks, nil
}

// writeKey writes prefix{key}:suffix.
func (b *budget) writeKey(sb *strings.Builder, key, suffix string) {
	sb.WriteString(b.client.prefix)
	sb.WriteByte('{')
	sb.WriteString(key)
	sb.WriteString("}:")
	sb.WriteString(suffix)
}

// suffixLen is the length of the limits' key suffixes together.
func (b *budget) suffixLen() int {
	n := 0
	for _, l := range b.limits {
		n += len(l.suffix)
	}
	return n
}

var errNilContext = errors.New("redislimit: nil context")

func (b *budget) check(ctx context.Context, key string, n int) ([]string, error) {
	switch {
	case ctx == nil:
		return nil, errNilContext
	case n <= 0:
		return nil, fmt.Errorf("redislimit: n must be positive, got %d", n)
	case n > b.most:
		return nil, fmt.Errorf("%w: n is %d, at most %d fit", throttle.ErrExceedsCapacity, n, b.most)
	}
	return b.keys(key)
}

// Reserve implements [throttle.Limiter]. One call is one script run: the
// units are booked in Redis at the earliest slot every limit allows, and
// the returned Reservation's Wait sleeps locally until it, following any
// pause the process learns of meanwhile. When Redis cannot decide, the
// [FailurePolicy] does.
func (b *budget) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*throttle.Reservation, error) {
	r, _, err := b.reserve(ctx, key, n, 0, maxWait, true)
	return r, err
}

// ReserveAfter implements [throttle.Deferrer]: Reserve with the slot no
// earlier than after from the server's now. [throttle.All] uses it to
// book these limiters at the slot common to all its parts.
func (b *budget) ReserveAfter(ctx context.Context, key string, n int, after, maxWait time.Duration) (*throttle.Reservation, error) {
	r, _, err := b.reserve(ctx, key, n, max(after, 0), maxWait, true)
	return r, err
}

// AllowN implements [throttle.Allower]: it takes n units only if they are
// available now.
func (b *budget) AllowN(ctx context.Context, key string, n int) (bool, error) {
	r, _, err := b.reserve(ctx, key, n, 0, 0, false)
	if err != nil {
		return false, err
	}
	return r.OK, nil
}

// maxPause bounds a pause as in process, so that it stays exact in the
// script's doubles on top of the Unix time in microseconds.
const maxPause = time.Duration(math.MaxInt64 / 8)

// maxAheadMicros is how far ahead a slot may lie, as in process (about
// 73 years: a pause clamped to 36, and as much again): callers with no
// max wait pushed a key's schedule past int64 nanoseconds, and the delay
// came back negative.
const maxAheadMicros = math.MaxInt64 / 4 / int64(time.Microsecond)

// tooFarAhead is the error of a booking past maxAheadMicros. The units
// stay booked that far ahead, where they hold nothing anyone will wait
// for.
func tooFarAhead(key string) error {
	return fmt.Errorf("redislimit: key %q is booked more than %v ahead", key, time.Duration(maxAheadMicros)*time.Microsecond)
}

// micros converts d, clamped to [0, maxPause], to whole microseconds,
// rounding up.
func micros(d time.Duration) int64 {
	d = min(max(d, 0), maxPause)
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}

// reserve books n units no earlier than after, also returning the
// booking of an OK reservation made in Redis. With track, the booking
// follows pauses.
func (b *budget) reserve(ctx context.Context, key string, n int, after, maxWait time.Duration, track bool) (*throttle.Reservation, *booking, error) {
	if b.leases != nil && after == 0 {
		return b.leases.reserve(ctx, key, n, maxWait, track)
	}
	return b.reserveCosts(ctx, key, n, nil, nil, after, maxWait, track)
}

// reserveCosts is reserve, booking costs[i] units on limit i when costs
// is not nil (n is then 1, for the checks). partCosts are the costs
// ReserveParts was given, for a Fallback.
func (b *budget) reserveCosts(ctx context.Context, key string, n int, costs, partCosts []int, after, maxWait time.Duration, track bool) (*throttle.Reservation, *booking, error) {
	ks, err := b.check(ctx, key, n)
	if err != nil {
		return nil, nil, err
	}
	wait := int64(-1)
	if maxWait >= 0 {
		wait = int64(min(maxWait, maxPause) / time.Microsecond)
	}
	sent := b.client.now()
	notBefore := after
	if b.horizons != nil {
		notBefore = max(after, b.horizons.local(key, sent)) // recovering from Fallback
	}
	var args []any
	if costs == nil {
		args = append(b.args("reserve", 4), n, wait, micros(notBefore))
	} else {
		args = append(b.args("parts", 3+len(costs)), wait, micros(notBefore))
		for _, c := range costs {
			args = append(args, c)
		}
	}
	v, err := b.call(ctx, key, ks, append(args, b.client.channelArg))
	if err != nil && costs != nil {
		r, err := b.failParts(ctx, key, partCosts, maxWait, err)
		return r, nil, err
	}
	if err != nil {
		r, err := b.fail(ctx, key, n, after, maxWait, err)
		return r, nil, err
	}
	arrived := b.client.now()
	a, err := array(v, 6, "reserve")
	if err != nil {
		return nil, nil, err
	}
	var f [6]int64
	if err := readIntegers(f[:], a, "ok", "delay", "remaining", "epoch", "shifted", "slot"); err != nil {
		return nil, nil, err
	}
	ok, delay, left, epoch, shifted, slot := f[0], f[1], f[2], f[3], f[4], f[5]
	if ok == 0 {
		b.client.pauses.learn(ks[0], epoch, shifted, false)
		return throttle.Refused(time.Duration(min(delay, maxAheadMicros))*time.Microsecond, int(left)), nil, nil
	}
	if len(a) != 6+len(b.limits) {
		return nil, nil, fmt.Errorf("redislimit: unexpected reply to reserve: %d values, want %d", len(a), 6+len(b.limits))
	}
	if delay > maxAheadMicros {
		return nil, nil, tooFarAhead(key)
	}
	bk := &booking{budget: b, key: key, epoch: epoch, shifted: shifted, slot: slot, costs: costs}
	bk.tokens = bk.one.tokens[:]
	if len(b.limits) > 1 {
		bk.tokens = make([]string, len(b.limits))
	}
	if costs == nil {
		bk.costs = bk.one.costs[:]
		if len(b.limits) > 1 {
			bk.costs = make([]int, len(b.limits))
		}
		for i := range bk.costs {
			bk.costs[i] = n
		}
	}
	for i, l := range b.limits {
		if bk.tokens[i], err = text(a[6+i], "token"); err != nil {
			return nil, nil, err
		}
		if l.algo == "fw" && bk.tokens[i] != unbooked { // a pause may push it further than the shift
			seq, _, _ := strings.Cut(bk.tokens[i], ":")
			n, err := strconv.ParseInt(seq, 10, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("redislimit: unexpected reply: token %q", bk.tokens[i])
			}
			bk.seqs = append(bk.seqs, partSeq{suffix: l.suffix, seq: n})
		}
	}
	d := time.Duration(delay) * time.Microsecond
	if b.horizons != nil {
		b.horizons.sawRedis(key, sent+int64(d), sent)
	}
	bk.pause = b.client.pauses.learn(ks[0], epoch, shifted, track)
	if bk.pause != nil {
		bk.base = arrived + int64(d) - shifted*int64(time.Microsecond)
		bk.pause.hold(bk.base)
	}
	return throttle.NewReservation(bk, d, int(left)), bk, nil
}

// Pause implements [throttle.Pauser]: every slot of key still in the
// future, in every process, and every new booking move later, so that
// nothing is due for d from the server's now. Pauses do not compound. d
// is clamped to about 36 years, as in process. Callers asleep in other
// processes hear of it through pub/sub (see [Client]); requests already
// sent cannot be recalled.
//
// When Redis cannot be reached, FailClosed returns the error, FailOpen
// nothing, Fallback pauses the local limiter, and FailShare the
// process's share. A bucket given WithSlotLease also drops the units it
// holds, whose slots the pause would have moved.
func (b *budget) Pause(ctx context.Context, key string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("redislimit: pause must not be negative, got %v", d)
	}
	ks, err := b.check(ctx, key, 1)
	if err != nil {
		return err
	}
	v, err := b.call(ctx, key, ks, append(b.args("pause", 2), micros(d), b.client.channelArg))
	if err != nil {
		if b.leases != nil && errors.Is(err, ErrUnavailable) {
			// The units held and the share would otherwise go on inside
			// the pause (found by a user's test).
			if b.leases.pauseLocal(key, d) {
				return nil
			}
		}
		return failPause(ctx, b.policy, key, d, err)
	}
	a, err := array(v, 4, "pause")
	if err != nil {
		return err
	}
	f, err := integers(a, "changed", "epoch", "shifted")
	if err != nil {
		return err
	}
	msg, err := text(a[3], "message")
	if err != nil {
		return err
	}
	b.client.pauses.learn(ks[0], f[1], f[2], false)
	b.client.pauses.hear(msg) // the pushes, when it made any
	return nil
}

// Inspect implements [throttle.Inspector]: it reads key's budget in one
// script run and takes nothing. Ahead counts the units booked for slots
// still in the future, in the part that holds most, as in process: the
// buckets report the span booked past now in whole units, and a sliding
// counter reports 1 while anything is booked ahead. When Redis cannot
// decide, Fallback inspects the local limiter if it can; otherwise the
// error is returned.
func (b *budget) Inspect(ctx context.Context, key string) (throttle.KeyState, error) {
	ks, err := b.check(ctx, key, 1)
	if err != nil {
		return throttle.KeyState{}, err
	}
	v, err := b.call(ctx, key, ks, append(b.args("inspect", 1), b.client.channelArg))
	if err != nil {
		if fb, ok := b.policy.(fallback); ok && errors.Is(err, ErrUnavailable) {
			if in, ok := fb.local.(throttle.Inspector); ok {
				return in.Inspect(ctx, key)
			}
		}
		return throttle.KeyState{}, err
	}
	a, err := array(v, 6, "inspect")
	if err != nil {
		return throttle.KeyState{}, err
	}
	f, err := integers(a, "remaining", "next", "ahead", "paused", "epoch", "shifted")
	if err != nil {
		return throttle.KeyState{}, err
	}
	b.client.pauses.learn(ks[0], f[4], f[5], false)
	return throttle.KeyState{
		Key:       key,
		Remaining: int(f[0]),
		Next:      time.Duration(f[1]) * time.Microsecond,
		Ahead:     int(f[2]),
		Paused:    time.Duration(f[3]) * time.Microsecond,
	}, nil
}

// Close closes the limiter's own [Client], if it built one; a Client
// given with [WithClient] stays open for its owner to close.
// Reservations already handed out keep their slots.
func (b *budget) Close() error {
	if b.leases != nil {
		b.leases.close()
	}
	if b.own {
		return b.client.Close()
	}
	return nil
}

// booking is the [throttle.Booking] of a reservation made in Redis.
type booking struct {
	budget  *budget
	key     string
	costs   []int // units booked on each limit
	epoch   int64 // the key's pause epoch and shifted when booked
	shifted int64
	slot    int64 // server microseconds
	tokens  []string
	seqs    []partSeq // on its fixed-window parts
	pause   *pauseState
	base    int64   // local due time in ns, less the shift when booked
	parts   [][]int // for a booking of ReserveParts: the limits of each of All's parts
	// one holds tokens and costs of a budget of one limit, in the
	// booking's own allocation. Speed only: Redis decisions/s ≥ 0.9×
	// redis_rate (bench/micro RedisDecision).
	one struct {
		tokens [1]string
		costs  [1]int
	}
}

// Until implements [throttle.Booking]: local, no I/O. The slot is
// measured from when the reply arrived, plus every shift learned since,
// and any push of a fixed window's pause past it. A caller whose slot
// had come but who had not yet woken when a pause was learned waits the
// pause out too: later than the script's schedule, never earlier.
func (b *booking) Until() time.Duration {
	if b.pause == nil {
		return 0
	}
	extra := b.pause.extra(b.shifted, b.seqs) * int64(time.Microsecond)
	return time.Duration(b.base + b.pause.shiftedNanos() + extra - b.budget.client.now())
}

// Cancel implements [throttle.Booking]. The script gives the units back
// only while the booking is the key's latest one still standing on each
// limit (the sliding log gives back any future units), and only once:
// it compares the booking's identity with the limit's state, so a resent
// command does nothing the second time.
func (b *booking) Cancel(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	ks, err := b.budget.keys(b.key)
	if err != nil {
		return err
	}
	args := append(b.budget.args("cancel", 4+2*len(b.tokens)), b.epoch, b.shifted, b.slot)
	for i, t := range b.tokens {
		args = append(args, t, b.costs[i])
	}
	args = append(args, b.budget.client.channelArg)
	v, err := b.budget.call(ctx, b.key, ks, args)
	if err != nil {
		return err
	}
	_, err = integer(v, "cancel")
	return err
}
