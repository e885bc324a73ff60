package redislimit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress/internal/nilcheck"
	"github.com/egress-go/egress/throttle"
)

var (
	_ throttle.Limiter  = (*Adaptive)(nil)
	_ throttle.Deferrer = (*Adaptive)(nil)
	_ throttle.Pauser   = (*Adaptive)(nil)
	_ throttle.Learner  = (*Adaptive)(nil)
)

// adaptiveSuffix names a key's learned state, after the hash tag. Its
// number is the state's layout: a script that packs the state otherwise
// takes a new number, so that the processes of two releases sharing a
// prefix during a rolling deploy each learn on a key of their own instead
// of misreading each other's state.
const adaptiveSuffix = "adaptive4"

// MaxAdaptiveCeiling is the highest ceiling [NewAdaptive] takes, in units
// per second: the script spaces units in whole microseconds.
const MaxAdaptiveCeiling = 1_000_000

// maxSignals bounds the answers a process keeps for one key until the
// key's next call carries them: past it, the oldest go. A Transport
// reserves again as soon as an answer comes, so few ever wait.
const maxSignals = 256

// WithFloor sets the lowest rate an [Adaptive] limiter falls to, as
// [throttle.WithFloor] does in process (default
// [throttle.DefaultFloorPerSecond], or the ceiling when that is lower).
// It must be at least one unit per [throttle.DefaultMaxHold]. Other
// limiters refuse it.
func WithFloor(r throttle.Rate) Option {
	return floorOption{option{"WithFloor", false, func(*config) {}}, r}
}

// floorOption carries [WithFloor]'s rate to [NewAdaptive].
type floorOption struct {
	option
	r throttle.Rate
}

// Adaptive is [throttle.Adaptive] with the learned rate in Redis: a
// [throttle.Limiter] that needs no published limit, whose rate every
// process on the same prefix, key and ceiling shares. It starts each key
// at the ceiling, cuts on throttling (a 429, a 503, or a quota stated at
// 0 well before its reset), climbs back carefully, and takes a limit the
// upstream states as the rate at once: the algorithm, its constants and
// their names are those of throttle/adaptive.go, run in the script
// (adaptive.lua).
//
// What a process learns costs no round trip: [Adaptive.Learn], which an
// egress Transport calls with every response, only keeps the answer in
// the process, and the key's next Reserve carries the answers waiting
// for it to Redis, where the script applies them before it books. So one
// worker's 429 cuts the fleet's rate in the next call its process makes
// on the key, and every booking is one script run: one round trip per
// request. A Transport makes that call at once for the caller's next
// request, but a retry without a server delay first backs off locally:
// a 429 can wait that long (100 ms at first, by default) unless another
// caller in the process books meanwhile.
//
// Units are paced evenly at the key's rate. A cut lays the bookings
// already ahead out again at the new rate, as in process (the script
// keeps the last 1 024 of them), and a pause ([Adaptive.Pause], capped at
// [throttle.DefaultMaxHold]) moves them later. The script publishes each
// such change on the Client's channel and keeps the last 32; each reply
// also carries those the process has not heard of, the backstop for
// pub/sub. A Reservation's Wait follows what its process has heard when
// it wakes. On a client without Subscribe, a process hears of changes
// from its own replies only: a sleeper whose process makes no call on
// the key meanwhile wakes at the slot it knew.
//
// The state is one string at prefix{key}:adaptive4:<ceiling>, kept ten
// minutes past the key's last answer, slot and pause, so one key is one
// cluster slot. A non-persistent restart forgets what was learned: the
// rate starts at the ceiling again.
//
// When Redis cannot decide, the [FailurePolicy] does, as for the other
// limiters; answers learned meanwhile wait for the next call that
// reaches it. Adaptive is safe for concurrent use. Close it when done.
type Adaptive struct {
	client  *Client
	own     bool
	ceiling float64 // units per second
	floor   float64
	maxHold time.Duration
	suffix  string
	policy  FailurePolicy
	script  *script

	// rec learns where the windows of the quotas this process's answers
	// state end (throttle/windowend.go), as the in-process Adaptive's
	// does; it books nothing. Its mutex is taken inside mu.
	rec *throttle.Upstream

	// mu guards views and every view's fields.
	mu    sync.Mutex
	views map[string]*adaptiveView
}

// adaptiveView is what a process knows of one key's learned state: its
// rate and the changes of its schedule as of the last reply, and the
// answers waiting for the next call.
type adaptiveView struct {
	rate    float64
	born    int64 // when the state was made (server µs)
	gen     int64
	changes []adaptiveChange // by gen, the last maxChanges
	pending []adaptiveSignal
	used    int64           // local ns of the last call
	quotas  []adaptiveQuota // what this process's answers told of each quota stated
}

// adaptiveChange is a change of a key's schedule (see adaptive.lua): a
// relay after a cut moved the bookings in moves (by seq, to a slot in
// server µs); a pause moved every slot after at later by shift µs.
type adaptiveChange struct {
	gen   int64
	moves map[int64]int64 // a relay's, or nil
	at    int64
	shift int64
}

// maxChanges is how many changes a view keeps, as the script does.
const maxChanges = 32

// move returns where booking seq, booked at slot at gen, lies after the
// changes since.
func (v *adaptiveView) move(seq, slot, gen int64) int64 {
	for _, c := range v.changes {
		switch {
		case c.gen <= gen:
		case c.moves != nil:
			if to, ok := c.moves[seq]; ok {
				slot = to
			}
		case slot > c.at:
			slot += c.shift
		}
	}
	return slot
}

// adaptiveSignal is one answer waiting to be carried.
type adaptiveSignal struct {
	arrived   int64 // local ns
	latency   time.Duration
	throttled bool
	stated    float64       // a limit per second the upstream stated, or 0
	early     time.Duration // until the next unit of a quota stated at 0 comes back, or -1
}

// bit is b as the script reads it.
func bit(b bool) int {
	if b {
		return 1
	}
	return 0
}

// NewAdaptive returns a limiter whose rate per key starts at ceiling and
// is learned from the upstream's answers, in Redis, by every process on
// the same prefix. Of the options, [WithClient], [WithPrefix],
// [WithTimeout], [WithObserver], [WithFailurePolicy] (not FailShare) and
// [WithFloor] apply. A ceiling above [MaxAdaptiveCeiling] per second, or a
// floor below one unit per [throttle.DefaultMaxHold], is an error.
func NewAdaptive(rdb redis.Scripter, ceiling throttle.Rate, opts ...Option) (*Adaptive, error) {
	if nilcheck.Is(rdb) {
		panic("redislimit: nil redis.Scripter")
	}
	if _, err := ceiling.Interval(); err != nil {
		return nil, fmt.Errorf("redislimit: NewAdaptive ceiling: %w", err)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	for _, o := range cfg.set {
		switch o.name {
		case "WithTolerance", "WithWindowOffset", "WithSlotLease", "WithStated":
			return nil, fmt.Errorf("redislimit: NewAdaptive does not take %s", o.name)
		}
	}
	if cfg.policy == FailShare {
		return nil, fmt.Errorf("redislimit: NewAdaptive does not take FailShare")
	}
	up := perSecond(ceiling)
	if up > MaxAdaptiveCeiling {
		return nil, fmt.Errorf("redislimit: NewAdaptive ceiling %v is above MaxAdaptiveCeiling (%d/s)", ceiling, MaxAdaptiveCeiling)
	}
	floor := throttle.PerSecond(throttle.DefaultFloorPerSecond)
	for _, o := range opts {
		if f, ok := o.(floorOption); ok {
			floor = f.r
			if _, err := floor.Interval(); err != nil {
				return nil, fmt.Errorf("redislimit: WithFloor: %w", err)
			}
			if perSecond(floor) > up {
				return nil, fmt.Errorf("redislimit: WithFloor %v is above the ceiling %v", floor, ceiling)
			}
		}
	}
	hold := throttle.DefaultMaxHold
	down := min(perSecond(floor), up)
	if down*hold.Seconds() < 1 {
		if down < perSecond(floor) {
			return nil, fmt.Errorf("redislimit: NewAdaptive ceiling %v is below one unit per max hold (%v)", ceiling, hold)
		}
		return nil, fmt.Errorf("redislimit: WithFloor %v is below one unit per max hold (%v)", floor, hold)
	}
	a := &Adaptive{
		client: cfg.client, ceiling: up, floor: down, maxHold: hold, policy: cfg.policy,
		suffix: adaptiveSuffix + ":" + rateName(ceiling), script: joinScript("now.lua", "message.lua", "adaptive.lua"),
		views: map[string]*adaptiveView{},
	}
	if a.client == nil {
		a.client, a.own = newClient(rdb, cfg), true
	} else {
		if err := cfg.only(false, "a limiter given WithClient"); err != nil {
			return nil, err
		}
		if !sameClient(rdb, a.client.rdb) {
			return nil, fmt.Errorf("redislimit: WithClient's Client is on another redis client than the limiter's")
		}
	}
	rec, err := throttle.NewUpstream(throttle.WithClock(a.client.wall), throttle.WithMaxHold(hold), throttle.WithForget())
	if err != nil {
		return nil, err
	}
	a.rec = rec
	a.client.learners.Store(a, struct{}{})
	return a, nil
}

// changeMessage starts what adaptive.lua publishes on the Client's
// channel when a call changes a key's schedule.
const changeMessage = "change "

// changed hands a published change to every Adaptive on c.
func (c *Client) changed(msg string) {
	c.learners.Range(func(a, _ any) bool {
		a.(*Adaptive).hear(msg)
		return true
	})
}

// hear reads "<state key> <born> <rate> <gen kind at value>..." as
// adaptive.lua publishes it (the key as message.lua writes it), for a
// key this limiter holds a view of. It
// takes the changes that follow the view's last one, and stops at a gap:
// the next reply fills it.
func (a *Adaptive) hear(msg string) {
	f := messageFields(msg)
	if len(f) < 7 || (len(f)-3)%4 != 0 {
		return
	}
	key, ok := strings.CutPrefix(messageKey(f[0]), a.client.prefix+"{")
	if !ok {
		return
	}
	if key, ok = strings.CutSuffix(key, "}:"+a.suffix); !ok {
		return
	}
	born, err1 := strconv.ParseInt(f[1], 10, 64)
	rate, err2 := strconv.ParseFloat(f[2], 64)
	if err1 != nil || err2 != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	v := a.views[key]
	if v == nil || v.born != born {
		return
	}
	for i := 3; i+3 < len(f); i += 4 {
		c, ok := parseChange(strings.Join(f[i:i+4], " "))
		if !ok || c.gen > v.gen+1 {
			return
		}
		if c.gen == v.gen+1 {
			v.changes = append(v.changes, c)
			v.gen = c.gen
			v.rate = rate
		}
	}
	if len(v.changes) > maxChanges {
		v.changes = slices.Delete(v.changes, 0, len(v.changes)-maxChanges)
	}
}

func perSecond(r throttle.Rate) float64 { return float64(r.N) / r.Per.Seconds() }

// Rate returns key's rate in units per second as this process last heard
// it from Redis (no I/O): the ceiling for a key it has not called on.
func (a *Adaptive) Rate(key string) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if v := a.views[key]; v != nil && v.rate > 0 {
		return v.rate
	}
	return a.ceiling
}

// view returns key's view, creating it. a.mu is held.
func (a *Adaptive) view(key string, now int64) *adaptiveView {
	if v := a.views[key]; v != nil {
		return v
	}
	if len(a.views) >= throttle.DefaultMaxKeys {
		// Drop the views idle for the max hold with nothing to carry:
		// their bookings keep the view they hold.
		for k, v := range a.views {
			if len(v.pending) == 0 && now-v.used > int64(a.maxHold) {
				delete(a.views, k)
			}
		}
	}
	v := &adaptiveView{}
	if len(a.views) < throttle.DefaultMaxKeys {
		a.views[key] = v
	}
	return v
}

// keys returns the key's state key.
func (a *Adaptive) keys(ctx context.Context, key string, n int) ([]string, error) {
	switch {
	case ctx == nil:
		return nil, errNilContext
	case n <= 0:
		return nil, fmt.Errorf("redislimit: n must be positive, got %d", n)
	case key == "" || key[0] == '}':
		return nil, fmt.Errorf("redislimit: key must be non-empty and not start with '}', got %q", key)
	case len(key) > throttle.MaxKeyLen:
		return nil, fmt.Errorf("redislimit: key of %d bytes is longer than throttle.MaxKeyLen (%d)", len(key), throttle.MaxKeyLen)
	}
	return []string{a.client.prefix + "{" + key + "}:" + a.suffix}, nil
}

// args returns the script's arguments for op on a state born then, at
// gen.
func (a *Adaptive) args(op string, born, gen int64, extra int) []any {
	args := make([]any, 0, 7+extra)
	return append(args, op, a.client.frozenMicros(), strconv.FormatFloat(a.ceiling, 'g', -1, 64),
		strconv.FormatFloat(a.floor, 'g', -1, 64), micros(a.maxHold), born, gen)
}

// Reserve implements [throttle.Limiter]: one script run applies the
// answers this process learned for key since its last call, then books
// n units at the learned rate.
func (a *Adaptive) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*throttle.Reservation, error) {
	return a.ReserveAfter(ctx, key, n, 0, maxWait)
}

// ReserveAfter implements [throttle.Deferrer]: Reserve with the slot no
// earlier than after from the server's now.
func (a *Adaptive) ReserveAfter(ctx context.Context, key string, n int, after, maxWait time.Duration) (*throttle.Reservation, error) {
	r, _, err := a.reserve(ctx, key, n, after, maxWait)
	return r, err
}

// reserve is ReserveAfter, also returning the booking of an OK
// reservation made in Redis.
func (a *Adaptive) reserve(ctx context.Context, key string, n int, after, maxWait time.Duration) (*throttle.Reservation, *adaptiveBooking, error) {
	ks, err := a.keys(ctx, key, n)
	if err != nil {
		return nil, nil, err
	}
	wait := int64(-1)
	if maxWait >= 0 {
		wait = int64(min(maxWait, maxPause) / time.Microsecond)
	}
	now := a.client.now()
	a.mu.Lock()
	v := a.view(key, now)
	v.used = now
	pending := v.pending
	v.pending = nil
	args := append(a.args("reserve", v.born, v.gen, 5+5*len(pending)), n, wait, micros(max(after, 0)), len(pending))
	a.mu.Unlock()
	for _, s := range pending {
		early := int64(-1)
		if s.early >= 0 {
			early = micros(s.early)
		}
		args = append(args, max(now-s.arrived, 0)/int64(time.Microsecond), micros(s.latency), bit(s.throttled),
			strconv.FormatFloat(s.stated, 'g', -1, 64), early)
	}
	reply, err := a.client.runScript(ctx, a.script, ks, append(args, a.client.channel))
	if err != nil {
		a.mu.Lock()
		v.pending = append(pending, v.pending...) // for the next call that reaches Redis
		v.trim()
		a.mu.Unlock()
		r, err := a.fail(ctx, key, n, after, maxWait, err)
		return r, nil, err
	}
	arrived := a.client.now()
	r, err := array(reply, 7, "adaptive reserve")
	if err != nil {
		return nil, nil, err
	}
	f, err := integers(r, "ok", "delay", "slot", "seq")
	if err != nil {
		return nil, nil, err
	}
	born, gen, err := a.heard(v, r[4:])
	if err != nil {
		return nil, nil, err
	}
	delay := time.Duration(min(f[1], maxAheadMicros)) * time.Microsecond
	if f[0] == 0 {
		return throttle.Refused(delay, 0), nil, nil
	}
	if f[1] > maxAheadMicros {
		return nil, nil, tooFarAhead(key)
	}
	b := &adaptiveBooking{a: a, key: key, v: v, seq: f[3], born: born, gen: gen, slot: f[2], due: arrived + int64(delay)}
	return throttle.NewReservation(b, delay, 0), b, nil
}

// heard reads the rate, the born, the gen and the changes at the end of
// a reply into v, and returns the born and the gen.
func (a *Adaptive) heard(v *adaptiveView, r []any) (born, gen int64, err error) {
	rs, err := text(r[0], "rate")
	if err != nil {
		return 0, 0, err
	}
	rate, err := strconv.ParseFloat(rs, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("redislimit: unexpected reply: rate %q", rs)
	}
	f, err := integers(r[1:], "born", "gen")
	if err != nil {
		return 0, 0, err
	}
	born, gen = f[0], f[1]
	changes := make([]adaptiveChange, 0, len(r)-3)
	for _, x := range r[3:] {
		s, err := text(x, "change")
		if err != nil {
			return 0, 0, err
		}
		c, ok := parseChange(s)
		if !ok {
			return 0, 0, fmt.Errorf("redislimit: unexpected reply: change %q", s)
		}
		changes = append(changes, c)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case born < v.born:
		return born, gen, nil // a reply about a state since made again
	case born > v.born:
		// The state was made again (an expiry, a restart): start over.
		v.born, v.gen, v.changes = born, 0, nil
	}
	v.rate = rate
	for _, c := range changes {
		if c.gen > v.gen {
			v.changes = append(v.changes, c)
			v.gen = c.gen
		}
	}
	v.gen = max(v.gen, gen)
	if len(v.changes) > maxChanges {
		v.changes = slices.Delete(v.changes, 0, len(v.changes)-maxChanges)
	}
	return born, gen, nil
}

// parseChange reads "gen kind at value": kind 1 a relay, value
// "seq:slot,..."; kind 2 a pause, value its shift.
func parseChange(s string) (adaptiveChange, bool) {
	f := strings.Fields(s)
	if len(f) != 4 {
		return adaptiveChange{}, false
	}
	gen, err1 := strconv.ParseInt(f[0], 10, 64)
	at, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return adaptiveChange{}, false
	}
	c := adaptiveChange{gen: gen, at: at}
	switch f[1] {
	case "1":
		c.moves = map[int64]int64{}
		for m := range strings.SplitSeq(f[3], ",") {
			a, b, ok := strings.Cut(m, ":")
			seq, err1 := strconv.ParseInt(a, 10, 64)
			slot, err2 := strconv.ParseInt(b, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				return adaptiveChange{}, false
			}
			c.moves[seq] = slot
		}
	case "2":
		shift, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return adaptiveChange{}, false
		}
		c.shift = shift
	default:
		return adaptiveChange{}, false
	}
	return c, true
}

// trim drops the oldest answers past maxSignals.
func (v *adaptiveView) trim() {
	if len(v.pending) > maxSignals {
		v.pending = slices.Delete(v.pending, 0, len(v.pending)-maxSignals)
	}
}

// fail applies the policy to err.
func (a *Adaptive) fail(ctx context.Context, key string, n int, after, maxWait time.Duration, err error) (*throttle.Reservation, error) {
	if !errors.Is(err, ErrUnavailable) {
		return nil, err
	}
	switch p := a.policy.(type) {
	case FailMode:
		if p == FailOpen {
			return &throttle.Reservation{OK: true}, nil
		}
	case fallback:
		if d, ok := p.local.(throttle.Deferrer); ok {
			return d.ReserveAfter(ctx, key, n, after, maxWait)
		}
		return p.local.Reserve(ctx, key, n, maxWait)
	}
	return nil, err
}

// Learn implements [throttle.Learner]: it keeps o for key's next call,
// with no I/O. An attempt that got no answer teaches nothing. A limit the
// upstream states with its window in requests ([throttle.Statement.Window])
// replaces the estimate, at 97% of it, until nothing has restated it for
// the max hold: the rate is then learned again. A quota in requests stated at 0
// holds the key, in every process, until its next unit comes back: at
// its reset, or for a bucket that refills (OpenAI's, Anthropic's, whose
// reset is when it is full again, or one seen to be) after one unit's
// refill; the hold rides in the key's next call, as the answer does, so
// a Transport does not pause the key for it. It also counts as
// throttling when that unit is more than two units off at the rate set.
func (a *Adaptive) Learn(ctx context.Context, key string, o throttle.Outcome) error {
	if ctx == nil {
		return errNilContext
	}
	if o.Failed {
		return nil
	}
	s := adaptiveSignal{arrived: a.client.now(), latency: max(o.Latency, 0), throttled: o.Throttled, early: -1}
	a.mu.Lock()
	defer a.mu.Unlock()
	v := a.view(key, s.arrived)
	var ss []throttle.Statement
	for _, st := range o.Statements {
		st, _ = st.Clamp(a.maxHold)
		if st.Unit == "" || st.Unit == throttle.UnitRequests {
			ss = append(ss, st)
		}
	}
	var recorded []throttle.Statement
	if len(ss) > 0 {
		_ = a.rec.Learn(ctx, key, throttle.Outcome{Latency: o.Latency, Statements: ss})
		recorded = a.rec.Stated(key)
	}
	for _, st := range ss {
		w := v.window(st)
		if st.Limit > 0 && w > 0 {
			r := float64(st.Limit) / w.Seconds()
			if s.stated == 0 || r < s.stated {
				s.stated = r
			}
		}
		reset := st.Reset // when the record, which learns where windows end, has it return
		known := false
		for _, l := range recorded {
			if l.Name == st.Name && endKnown(l) {
				reset, known = min(reset, l.Reset), true
			}
		}
		if st.Absolute && !known {
			// An instant cut to its precision, before any boundary
			// told which way: a server that cuts it down (go-limiter,
			// ulule) ends its window up to the precision after it. Held
			// to the instant, four processes went on into go-limiter's
			// spent first window: 4-7 429s.
			reset += st.Precision
		}
		if early, ok := v.spent(st, w, s, reset); ok {
			s.early = max(s.early, early)
		}
	}
	v.pending = append(v.pending, s)
	v.trim()
	return nil
}

// Pause implements [throttle.Pauser]: every slot of key still ahead, in
// every process, and every new booking move later, so that nothing is
// due for d from the server's now; d is capped at
// [throttle.DefaultMaxHold]. Pauses do not compound. It is a round trip
// of its own. When Redis cannot be reached, FailClosed returns the
// error, FailOpen nothing, and Fallback pauses the local limiter.
func (a *Adaptive) Pause(ctx context.Context, key string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("redislimit: pause must not be negative, got %v", d)
	}
	ks, err := a.keys(ctx, key, 1)
	if err != nil {
		return err
	}
	a.mu.Lock()
	v := a.view(key, a.client.now())
	born, gen := v.born, v.gen
	a.mu.Unlock()
	reply, err := a.client.runScript(ctx, a.script, ks, append(a.args("pause", born, gen, 2), micros(d), a.client.channel))
	if err != nil {
		return failPause(ctx, a.policy, key, d, err)
	}
	r, err := array(reply, 4, "adaptive pause")
	if err != nil {
		return err
	}
	if _, err := integer(r[0], "changed"); err != nil {
		return err
	}
	_, _, err = a.heard(v, r[1:])
	return err
}

// Close closes the limiter's own [Client], if it built one; a Client
// given with [WithClient] stays open for its owner to close. Answers
// still waiting for a call are dropped.
func (a *Adaptive) Close() error {
	a.client.learners.Delete(a)
	if a.own {
		return a.client.Close()
	}
	return nil
}

// adaptiveBooking is the [throttle.Booking] of an Adaptive reservation.
type adaptiveBooking struct {
	a    *Adaptive
	key  string
	v    *adaptiveView
	seq  int64
	born int64 // the state's, when booked
	gen  int64 // of the key's changes when booked
	slot int64 // server µs
	due  int64 // local ns the slot was due at when booked

	cancelled bool // guarded by a.mu
}

// Until implements [throttle.Booking]: local, no I/O. The slot follows
// the cuts and pauses the process has heard of since the booking.
func (b *adaptiveBooking) Until() time.Duration {
	b.a.mu.Lock()
	moved := int64(0)
	if b.v.born == b.born {
		moved = b.v.move(b.seq, b.slot, b.gen) - b.slot
	}
	b.a.mu.Unlock()
	return time.Duration(b.due + moved*int64(time.Microsecond) - b.a.client.now())
}

// Cancel implements [throttle.Booking]: the script gives the spacing back
// when the booking is still the key's latest, and only once.
func (b *adaptiveBooking) Cancel(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	b.a.mu.Lock()
	done := b.cancelled
	b.cancelled = true
	b.a.mu.Unlock()
	if done {
		return nil
	}
	ks, err := b.a.keys(ctx, b.key, 1)
	if err != nil {
		return err
	}
	v, err := b.a.client.runScript(ctx, b.a.script, ks, append(b.a.args("cancel", b.born, b.gen, 2), b.seq, b.a.client.channel))
	if err != nil {
		return err
	}
	_, err = integer(v, "cancel")
	return err
}
