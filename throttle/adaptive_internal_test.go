package throttle

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/internal/sim"
)

// This file holds a discrete-event simulation of callers of an Adaptive
// limiter against a hidden token bucket (see package sim).

// simConfig describes one simulated run.
type simConfig struct {
	hidden, burst int           // the upstream's token bucket, per second
	callers       int           // each sends, waits for the answer, and books again
	way, back     time.Duration // the way to the upstream (drawn up to way) and back
	run           time.Duration
	seed          uint64
	ceiling       Rate
	change        func(at time.Duration) (hidden int, ok bool) // a hidden limit that moves, if set
	// headers, when set, makes the upstream state its quota on every
	// answer, as a real limiter does: simGCRA or simWindow.
	headers int
	phase   time.Duration // simWindow: where in the second its windows start
	// stall, when set, holds every event of the client (wakes and
	// answers) that falls in [stall[0], stall[1]) until stall[1], as a
	// stalled machine does.
	stall [2]time.Duration
	// others, with simWindow, is another client the limiter never sees,
	// taking that many units a second, evenly, from the same window.
	others float64
}

// The upstreams that state their quota.
const (
	simHeaderless = iota
	// simGCRA is the token bucket stating what throttled/throttled
	// states: the burst as the limit, the whole tokens left, and the time
	// until the bucket is full rounded up to a second, as a delay.
	simGCRA
	// simWindow is a fixed window of hidden units a second, starting at
	// phase, stating what sethvargo/go-limiter states: the limit, what is
	// left, and the window's end truncated to the second, as an instant.
	simWindow
	// simWindowDelay is simWindow stating its end as a delay in whole
	// seconds, rounded up (X-RateLimit-Reset: 1).
	simWindowDelay
)

// simResult counts per 100 ms.
type simResult struct {
	admitted, throttled []int
	rates               []float64 // the key's rate at the end of each 100 ms
	others              int       // units the other client was admitted (simConfig.others)
}

// simulate runs c and returns what it counted.
func simulate(c simConfig) simResult {
	var now time.Duration
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	a, err := NewAdaptive(c.ceiling, WithClock(func() time.Time { return start.Add(now) }))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(c.seed, 7))
	bins := int(c.run / (100 * time.Millisecond))
	res := simResult{admitted: make([]int, bins), throttled: make([]int, bins), rates: make([]float64, bins)}

	hidden := float64(c.hidden)
	tokens, last := float64(c.burst), time.Duration(0)
	used, window := 0, time.Duration(-1)
	roll := func(at time.Duration) {
		if w := (at - c.phase + time.Second) / time.Second; w != window {
			window, used = w, 0
		}
	}
	var otherNext time.Duration
	take := func() (bool, []Statement) {
		if c.change != nil {
			if h, ok := c.change(now); ok {
				hidden = float64(h)
			}
		}
		if c.headers == simWindow || c.headers == simWindowDelay {
			for ; c.others > 0 && otherNext <= now; otherNext += time.Duration(float64(time.Second) / c.others) {
				roll(otherNext)
				if used < c.hidden {
					used++
					res.others++
				}
			}
			roll(now)
			ok := used < c.hidden
			if ok {
				used++
			}
			end := c.phase + window*time.Second
			if c.headers == simWindowDelay {
				reset := (end - now + time.Second - 1) / time.Second * time.Second
				return ok, []Statement{{Name: "x-ratelimit", Unit: UnitRequests, Limit: c.hidden, Remaining: c.hidden - used, Reset: reset}}
			}
			reset := max(end.Truncate(time.Second)-now.Truncate(time.Second), 0) // both truncated, as an HTTP-date and Date are
			return ok, []Statement{{Name: "x-ratelimit", Unit: UnitRequests, Limit: c.hidden, Remaining: c.hidden - used, Reset: reset, Absolute: true}}
		}
		tokens = min(float64(c.burst), tokens+(now-last).Seconds()*hidden)
		last = now
		ok := tokens >= 1
		if ok {
			tokens--
		}
		if c.headers != simGCRA {
			return ok, nil
		}
		full := time.Duration((float64(c.burst) - tokens) / hidden * float64(time.Second))
		reset := (full + time.Second - 1) / time.Second * time.Second
		return ok, []Statement{{Name: "x-ratelimit", Unit: UnitRequests, Limit: c.burst, Remaining: int(tokens), Reset: reset}}
	}

	type caller struct {
		r      *Reservation
		sent   time.Duration
		ok     bool
		stated []Statement
	}
	callers := make([]caller, c.callers)
	q := &sim.Queue{}
	push := q.Push
	for i := range callers {
		push(0, i, sim.Book)
	}
	nextBin := 0
	for q.Len() > 0 {
		e := q.Pop()
		for nextBin < bins && time.Duration(nextBin+1)*100*time.Millisecond <= e.At {
			now = time.Duration(nextBin+1) * 100 * time.Millisecond
			res.rates[nextBin] = a.Rate("k")
			nextBin++
		}
		now = e.At
		if now >= c.run {
			break
		}
		if (e.Kind == sim.Wake || e.Kind == sim.Answer) && now >= c.stall[0] && now < c.stall[1] {
			push(c.stall[1], e.Caller, e.Kind)
			continue
		}
		cl := &callers[e.Caller]
		switch e.Kind {
		case sim.Book:
			r, err := a.Reserve(ctx, "k", 1, -1)
			if err != nil || !r.OK {
				panic("simulate: Reserve refused")
			}
			cl.r = r
			push(now+max(r.booking.Until(), 0), e.Caller, sim.Wake) // as Wait does
		case sim.Wake:
			if d := cl.r.booking.Until(); d > 0 {
				push(now+d, e.Caller, sim.Wake) // moved by a cut or a pause
				continue
			}
			cl.sent = now
			push(now+time.Duration(rng.Int64N(int64(c.way)+1)), e.Caller, sim.Arrive)
		case sim.Arrive:
			cl.ok, cl.stated = take()
			bin := int(now / (100 * time.Millisecond))
			if cl.ok {
				res.admitted[bin]++
			} else {
				res.throttled[bin]++
			}
			push(now+c.back, e.Caller, sim.Answer)
		case sim.Answer:
			_ = a.Learn(ctx, "k", Outcome{N: 1, Throttled: !cl.ok, Latency: now - cl.sent, Statements: cl.stated})
			push(now, e.Caller, sim.Book)
		}
	}
	return res
}

// after sums from from on, and returns the range of the rate there.
func (s simResult) after(from time.Duration) (admitted, throttled int, lo, hi float64) {
	lo = -1
	for i := int(from / (100 * time.Millisecond)); i < len(s.admitted); i++ {
		admitted += s.admitted[i]
		throttled += s.throttled[i]
		if lo < 0 || s.rates[i] < lo {
			lo = s.rates[i]
		}
		hi = max(hi, s.rates[i])
	}
	return admitted, throttled, lo, hi
}

// TestAdaptiveStatedRateRelaysBookings checks that a stated quota moves
// the slots already booked: later when the rate falls, earlier when it
// rises, but never sooner than a recheck from now, so that their callers,
// who look again that often, wake at them.
func TestAdaptiveStatedRateRelaysBookings(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name        string
		giveCeiling Rate
		givePrior   int // a limit per second stated before the bookings, or 0
		giveLimit   int
		wantBefore  []time.Duration
		wantAfter   []time.Duration
	}{
		{
			name: "falls: 1000/s to 97% of 10/s", giveCeiling: PerSecond(1000), giveLimit: 10,
			wantBefore: []time.Duration{0, 50 * ms, 51 * ms, 52 * ms},
			wantAfter:  []time.Duration{0, 103092784, 206185568, 309278352},
		},
		{
			name: "rises: 97% of 10/s to 97% of 100/s", giveCeiling: PerSecond(1000), givePrior: 10, giveLimit: 100,
			wantBefore: []time.Duration{0, 103092784, 206185568, 309278352},
			wantAfter:  []time.Duration{0, 50 * ms, 60309279, 70618558},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
			a, err := NewAdaptive(tt.giveCeiling, WithClock(func() time.Time { return start }))
			require.NoError(t, err)
			ctx := context.Background()
			stated := func(limit int) Outcome {
				return Outcome{N: 1, Statements: []Statement{
					{Name: "q", Unit: UnitRequests, Limit: limit, Remaining: limit - 1, Reset: time.Second, Window: time.Second},
				}}
			}
			if tt.givePrior > 0 {
				require.NoError(t, a.Learn(ctx, "k", stated(tt.givePrior)))
			}
			var rs []*Reservation
			var before []time.Duration
			for range 4 {
				r, err := a.Reserve(ctx, "k", 1, -1)
				require.NoError(t, err)
				rs = append(rs, r)
				before = append(before, r.Delay)
			}
			require.NoError(t, a.Learn(ctx, "k", stated(tt.giveLimit)))
			var after []time.Duration
			for _, r := range rs {
				after = append(after, time.Duration(r.booking.(*adaptiveBooking).slot))
			}
			assert.Equal(t, tt.wantBefore, before)
			assert.Equal(t, tt.wantAfter, after)
			assert.LessOrEqual(t, rs[3].booking.Until(), adaptiveRecheck, "a caller looks again within a recheck")
		})
	}
}

// TestAdaptiveReleaseKeepsPace checks the spacing of releases while a
// quota is stated: callers woken a little late at their slots all leave
// at once (no drift), and callers woken together after a stall leave one
// interval apart, not in a herd.
func TestAdaptiveReleaseKeepsPace(t *testing.T) {
	var now time.Duration
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	a, err := NewAdaptive(PerSecond(1000), WithClock(func() time.Time { return start.Add(now) }))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, a.Learn(ctx, "k", Outcome{N: 1, Statements: []Statement{
		{Name: "q", Unit: UnitRequests, Limit: 100, Remaining: 99, Reset: time.Second, Window: time.Second},
	}}))
	var bs []*adaptiveBooking
	for range 40 {
		r, err := a.Reserve(ctx, "k", 1, -1)
		require.NoError(t, err)
		bs = append(bs, r.booking.(*adaptiveBooking))
	}
	late := 0
	for _, b := range bs[:20] {
		now = time.Duration(b.slot) + 2*time.Millisecond // each timer fires 2 ms late
		if b.Until() > 0 {
			late++
		}
	}
	assert.Equal(t, 0, late, "callers woken a little late leave at once")
	now = time.Duration(bs[39].slot) + time.Second // a stall: the other 20 wake together
	var left []time.Duration
	for range 300 {
		for _, b := range bs[20:] {
			if !b.gone && b.Until() <= 0 {
				left = append(left, now)
			}
		}
		now += time.Millisecond
	}
	require.Len(t, left, 20)
	for i := 1; i < len(left); i++ {
		assert.GreaterOrEqual(t, left[i]-left[i-1], 5*time.Millisecond, "release %d", i)
	}
}

// TestAdaptiveLearnedReleaseKeepsInterval checks the spacing of releases
// at a learned rate: a unit that leaves late pushes the next by as much,
// so that no two leave closer together than the rate's interval (a
// bucket of burst 1 refuses the second), and none leaves before its
// slot.
func TestAdaptiveLearnedReleaseKeepsInterval(t *testing.T) {
	const ms = time.Millisecond
	var now time.Duration
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	a, err := NewAdaptive(PerSecond(10), WithClock(func() time.Time { return start.Add(now) }))
	require.NoError(t, err)
	ctx := context.Background()
	var bs []*adaptiveBooking
	for range 3 {
		r, err := a.Reserve(ctx, "k", 1, -1)
		require.NoError(t, err)
		bs = append(bs, r.booking.(*adaptiveBooking))
	}
	tests := []struct { // in time order: the limiter's clock never goes back
		name      string
		giveAt    time.Duration
		giveWho   int
		wantUntil time.Duration
	}{
		{name: "the first, 3 ms late, leaves", giveAt: 3 * ms, giveWho: 0, wantUntil: -3 * ms},
		{name: "the second, at its slot, waits the 3 ms", giveAt: 100 * ms, giveWho: 1, wantUntil: 3 * ms},
		{name: "then leaves", giveAt: 103 * ms, giveWho: 1, wantUntil: 0},
		{name: "the third, before its slot, waits an interval after the second left", giveAt: 150 * ms, giveWho: 2, wantUntil: 53 * ms},
		{name: "the third, at its slot, waits as much", giveAt: 200 * ms, giveWho: 2, wantUntil: 3 * ms},
	}
	for _, tt := range tests {
		now = tt.giveAt
		assert.Equal(t, tt.wantUntil, bs[tt.giveWho].Until(), tt.name)
	}
}

// TestAdaptiveMeasuresCoveredSpan checks what the learned rate is cut
// and bounded by: answers per second over the last second, for answers
// evenly 100 ms apart, read at every 10 ms of a bucket. The buckets
// counted cover up to a bucket more than the span asked for; divided by
// the span alone, the rate read up to 11/s, and a probe above the limit
// of a bucket of burst 1 was seen as admitted (calm), then cut to a
// bisect far below it (bench 6d).
func TestAdaptiveMeasuresCoveredSpan(t *testing.T) {
	const ms = int64(time.Millisecond)
	for offset := int64(0); offset < 100; offset += 10 {
		k := &adaptiveKey{first: 50 * ms}
		now := 4000*ms + offset*ms
		for at := 50 * ms; at <= now; at += 100 * ms {
			k.count(at, false)
		}
		admitted, throttled := k.admitted(now, time.Second)
		assert.InDelta(t, 10, admitted, 0.6, "admitted per second at %d ms", now/ms)
		assert.Zero(t, throttled)
		assert.InDelta(t, 10, k.sent(now, time.Second), 0.6, "sent per second at %d ms", now/ms)
		assert.InDelta(t, 10, k.sent(now, adaptiveClimb), 1.2, "sent per second over half a second at %d ms", now/ms)
	}
}
