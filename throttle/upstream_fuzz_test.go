package throttle_test

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// This file fuzzes the Upstream record with what a hostile or broken
// upstream may send (issue 13, "Bad input and limits"): the fuzz bytes
// are decoded into a short run of operations on one or two keys, on a
// manual clock, and each step checks that nothing holds a key back for
// longer than the max hold allows.

// fuzzBytes reads the fuzz input one choice at a time; once it runs out,
// every choice is 0, so that any input decodes to a finite run.
type fuzzBytes struct{ b []byte }

// byte returns the next byte, or 0.
func (r *fuzzBytes) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// pick returns an index below n.
func (r *fuzzBytes) pick(n int) int { return int(r.byte()) % n }

// bool returns the next choice as a bool.
func (r *fuzzBytes) bool() bool { return r.byte()&1 == 1 }

// The values a field is drawn from: the ordinary ones, the edges, and
// the absurd ones real upstreams have sent (negative, a reset years
// ahead, remaining 10¹⁸).
var (
	fuzzCounts = []int{-1, 0, 1, 2, 3, 5, 10, 48, 100, 1000, -7, throttle.MaxStatedCount, throttle.MaxStatedCount + 1, 1e18, math.MaxInt, math.MinInt}
	fuzzDelays = []time.Duration{0, time.Millisecond, 20 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second,
		30 * time.Second, time.Minute, 61 * time.Second, time.Hour, 6 * time.Minute, -time.Second, 365 * 24 * time.Hour,
		math.MaxInt64, math.MinInt64, 1500 * time.Millisecond}
	fuzzPrecisions = []time.Duration{0, time.Millisecond, time.Second, time.Minute, time.Hour, -time.Second, math.MaxInt64, 10 * time.Millisecond}
	fuzzNames      = []string{"", "a", "b"}
	fuzzUnits      = []string{"", throttle.UnitRequests, "tokens"}
)

// count draws a count: from the table, or a small one from the byte.
func (r *fuzzBytes) count() int {
	c := r.byte()
	if c < 128 {
		return int(c) % 16
	}
	return fuzzCounts[int(c)%len(fuzzCounts)]
}

// delay draws a duration: from the table, or some milliseconds.
func (r *fuzzBytes) delay() time.Duration {
	c := r.byte()
	if c < 128 {
		return time.Duration(c) * 10 * time.Millisecond
	}
	return fuzzDelays[int(c)%len(fuzzDelays)]
}

// statement draws a Statement, every field of it, its ResetAt on now.
func (r *fuzzBytes) statement(now time.Time) throttle.Statement {
	s := throttle.Statement{
		Name:      fuzzNames[r.pick(len(fuzzNames))],
		Unit:      fuzzUnits[r.pick(len(fuzzUnits))],
		Limit:     r.count(),
		Remaining: r.count(),
		Reset:     r.delay(),
		Window:    r.delay(),
	}
	flags := r.byte()
	s.Absolute, s.Refills = flags&1 != 0, flags&2 != 0
	if flags&4 != 0 {
		s.Precision = fuzzPrecisions[r.pick(len(fuzzPrecisions))]
		s.ResetAt = now.Add(r.delay())
		if flags&8 != 0 {
			s.ResetAt = s.ResetAt.Truncate(time.Second).Add(time.Second) // an epoch second, rounded up
		}
	}
	return s
}

// fuzzBooking is a reservation the run made and has not answered yet.
type fuzzBooking struct {
	key string
	n   int
	r   *throttle.Reservation
}

// fuzzSlack is how much later than the bound below a slot may lie: a
// reset stated in whole seconds by a server that truncates them is
// taken to end up to a second after what it says (upstream.go, record),
// after it was cut to the max hold; and a few holds' milliseconds.
const fuzzSlack = time.Second + 10*time.Millisecond

func FuzzUpstream(f *testing.F) {
	// Each seed: the options byte, then steps, each a key, an operation
	// (see the switch) and its choices; fuzzDelays[i] and fuzzCounts[i]
	// are drawn by the byte 128+i, a count below 16 and a delay of c×10
	// ms by the byte c.
	const (
		k, answer, free, reserve, reserveAfter, units, all, cancel, pause, inspect, tick, jump, unbookedOp = 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11
		year, sixMin, minute, huge                                                                         = 128 + 12, 128 + 10, 128 + 7, 128 + 13
		c48, c1000, c1e18                                                                                  = 128 + 7, 128 + 9, 128 + 13
	)
	step := func(op byte, args ...byte) []byte { return append([]byte{k, op}, args...) }
	// learn is a free answer (N 1, 480 ms latency) stating stmts; each
	// statement is name, unit, limit, remaining, reset, window, flags
	// (1 Absolute, 2 Refills, 4 ResetAt and Precision follow).
	learn := func(stmts ...[]byte) []byte {
		b := step(free, 1, 0, 48, 0, byte(len(stmts)))
		for _, st := range stmts {
			b = append(b, st...)
		}
		return b
	}
	seed := func(opts byte, steps ...[]byte) {
		f.Add(append([]byte{opts}, slices.Concat(steps...)...))
	}
	waitForever := []byte{0, 0, 1} // n 1, maxWait -1
	seed(0)
	// A quota of 10 at 0 for a year: booked alone, through All, then a
	// minute on (the max hold).
	seed(0, learn([]byte{0, 0, 10, 0, year, 0, 0}), step(reserve, waitForever...), step(all, waitForever...), step(jump, minute), step(reserve, 0, 0, 0))
	// OpenAI's tokens: a refilling quota at 0 of 1000 for 6m0s, booked
	// by ReserveUnits, beside requests booked queued, one cancelled.
	seed(0, learn([]byte{1, 2, c1000, 0, sixMin, 0, 2}), step(units, 0, 5, 0, minute), step(reserve, waitForever...),
		step(reserve, waitForever...), step(cancel, 0), step(inspect))
	// An answer a year late stating 1e18 left of 48, a pause of a year,
	// and a booking through it.
	seed(0, step(free, 1, 0, year, huge, 1, 0, 0, c48, c1e18, 100, minute, 0), step(pause, year), step(reserve, waitForever...), step(inspect))
	// A window stated as an epoch second (httprate): spent, booked
	// past its reset, answered in the next window with its limit back.
	spent := []byte{0, 0, c48, 0, 48, 0, 1 | 4 | 8, 2, 48}
	seed(1, learn(spent), step(reserve, waitForever...), step(reserve, waitForever...), step(answer, 1, 0, 0, 10, 0, 0),
		step(tick, 200), learn([]byte{0, 0, c48, c48, 48, 0, 1 | 4 | 8, 2, 148}), step(reserve, 0, 0, 0))
	// WithFirstAnswer: requests sent unbooked, the first booking's
	// answer awaited, then answered with SentUnbooked.
	seed(4, step(unbookedOp, 1), step(reserve, 0, 48, 0), step(reserve, 0, 48, 0), step(tick, 60),
		step(answer, 1, 0, 4, 2, 0, 1, 0, 0, 3, 1, 30, 0, 0), step(reserve, waitForever...))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{b: data}
		ctx := context.Background()
		clk := newManualClock()
		opts := []throttle.Option{throttle.WithClock(clk.Now)}
		flags := in.byte()
		maxHold := []time.Duration{time.Minute, time.Second, 10 * time.Second, 90 * time.Second}[flags&3]
		opts = append(opts, throttle.WithMaxHold(maxHold))
		if flags&4 != 0 {
			opts = append(opts, throttle.WithFirstAnswer(throttle.DefaultFirstAnswer))
		}
		u, err := throttle.NewUpstream(opts...)
		require.NoError(t, err)
		// Beside the record, a bucket that never delays a run this short.
		tb, err := throttle.NewTokenBucket(throttle.PerSecond(1000), 1000, throttle.WithClock(clk.Now))
		require.NoError(t, err)
		both := throttle.All(tb, u)
		keys := []string{"k", "j"}
		logf := func(format string, args ...any) {
			if testing.Verbose() { // rerun a crasher with -v to read its steps
				t.Logf("%v: "+format, append([]any{clk.Since()}, args...)...)
			}
		}

		var open []fuzzBooking
		unbooked := 0
		var pausedUntil time.Time // the latest end of a pause asked, clamped
		// horizon is, per key, where the queue of bookings ends at the
		// slowest pace the record may set, a max hold per unit: every
		// unit booked counts, answered or not, since a refilling quota
		// takes every unit booked since the upstream spoke off what it
		// stated. Pauses since move it later.
		horizon := map[string]time.Duration{} // since epoch, saturated
		// bound returns the latest a booking of units units of key, made
		// now, may be due, after after. A statement holds a key back for
		// at most the max hold from its arrival (so from now), after any
		// pause. By design, bookings also queue: units after a reset are
		// paced at the limit per window, a refilling quota holds a
		// booking for its own units' refill (Statement.Clamp), each unit
		// at most a window (the max hold) apart, and keeps in reserve
		// what others drained between two statements, at most a max hold
		// (refill's gap); so a booking may also go a max hold per unit,
		// and one more, after the end of the queue.
		bound := func(key string, after time.Duration, units int) time.Duration {
			now := clk.Now()
			paused := max(pausedUntil.Sub(now), 0)
			held := satAdd(max(after, 0), paused+maxHold+fuzzSlack)
			queued := satAdd(max(horizon[key]-clk.Since(), 0), satAdd(paused+maxHold+fuzzSlack, satMul(maxHold+fuzzSlack, units)))
			return max(held, queued)
		}
		check := func(op, key string, r *throttle.Reservation, after time.Duration, units int) {
			t.Helper()
			require.NotNil(t, r, op)
			require.GreaterOrEqual(t, r.Delay, time.Duration(0), op)
			require.LessOrEqual(t, r.Delay, bound(key, after, units), "%s: OK %v, held %v, delay beyond the max hold %v", op, r.OK, r.Held(), maxHold)
			require.GreaterOrEqual(t, r.Remaining, 0, op)
			if r.OK { // its units take up to a max hold each, after the queue's
				horizon[key] = satAdd(max(horizon[key], satAdd(clk.Since(), r.Delay)), satMul(maxHold+fuzzSlack, units))
			}
		}

		for step := 0; step < 64 && len(in.b) > 0; step++ {
			key := keys[in.pick(len(keys))]
			switch op := in.pick(12); op {
			case 0, 1: // an answer to an open booking, or to none
				o := throttle.Outcome{N: in.count()}
				if op == 0 && len(open) > 0 {
					i := in.pick(len(open))
					key, o.N = open[i].key, open[i].n
					open = append(open[:i], open[i+1:]...)
				}
				flags := in.byte()
				o.Throttled, o.Failed = flags&1 != 0, flags&2 != 0
				o.Latency = in.delay()
				o.Unbooked = in.count()
				if flags&4 != 0 && unbooked > 0 {
					o.SentUnbooked = true
					unbooked--
				}
				for range in.pick(3) {
					o.Statements = append(o.Statements, in.statement(clk.Now()))
				}
				logf("Learn %s %+v", key, o)
				require.NoError(t, u.Learn(ctx, key, o))
			case 2, 3: // a booking alone
				n, wait := 1+in.pick(8), in.delay()
				if in.bool() {
					wait = -1
				}
				var after time.Duration
				var r *throttle.Reservation
				if op == 3 {
					after = in.delay()
					r, err = u.ReserveAfter(ctx, key, n, after, wait)
				} else {
					r, err = u.Reserve(ctx, key, n, wait)
				}
				require.NoError(t, err)
				logf("Reserve %s n=%d after=%v maxWait=%v: OK %v held %v delay %v remaining %d", key, n, after, wait, r.OK, r.Held(), r.Delay, r.Remaining)
				check("Reserve", key, r, after, n)
				if r.OK {
					require.False(t, wait >= 0 && r.Delay > wait, "booked past maxWait")
					open = append(open, fuzzBooking{key, n, r})
				}
			case 4: // a booking of tokens at the configured limiter's slot
				n, cost, after, wait := 1+in.pick(4), in.count(), in.delay(), in.delay()
				r, err := u.ReserveUnits(ctx, key, n, map[string]int{"tokens": cost}, after, wait)
				if cost < 0 {
					require.Error(t, err, "a negative cost")
					break
				}
				require.NoError(t, err)
				logf("ReserveUnits %s n=%d tokens=%d after=%v maxWait=%v: OK %v held %v delay %v", key, n, cost, after, wait, r.OK, r.Held(), r.Delay)
				check("ReserveUnits", key, r, after, n+min(cost, math.MaxInt-n))
				if r.OK {
					open = append(open, fuzzBooking{key, n, r})
				}
			case 5: // a booking through All, paced by the bucket beside
				n, wait := 1+in.pick(8), in.delay()
				if in.bool() {
					wait = -1
				}
				r, err := both.Reserve(ctx, key, n, wait)
				require.NoError(t, err)
				logf("All %s n=%d maxWait=%v: OK %v held %v delay %v", key, n, wait, r.OK, r.Held(), r.Delay)
				check("All", key, r, 0, n)
				if r.OK {
					open = append(open, fuzzBooking{key, n, r})
				}
			case 6: // a caller gives up
				if len(open) > 0 {
					i := in.pick(len(open))
					logf("Cancel %s n=%d", open[i].key, open[i].n)
					require.NoError(t, open[i].r.Cancel(ctx))
					open = append(open[:i], open[i+1:]...)
				}
			case 7: // a 429's Retry-After
				d := in.delay()
				logf("Pause %s %v", key, d)
				require.NoError(t, u.Pause(ctx, key, d))
				if end := clk.Now().Add(min(d, maxHold)); d > 0 && end.After(pausedUntil) {
					pausedUntil = end
				}
				if h := horizon[key]; d > 0 && h > clk.Since() {
					horizon[key] = satAdd(h, min(d, maxHold)) // a pause shifts the queue
				}
			case 8: // what an Observer reads
				s, err := u.Inspect(ctx, key)
				require.NoError(t, err)
				logf("Inspect %+v, Stated %+v", s, u.Stated(key))
				require.GreaterOrEqual(t, s.Remaining, 0)
				require.GreaterOrEqual(t, s.Next, time.Duration(0))
				require.LessOrEqual(t, s.Next, bound(key, 0, 1), "Inspect.Next")
				require.LessOrEqual(t, s.Paused, maxHold)
				for _, st := range u.Stated(key) {
					require.GreaterOrEqual(t, st.Remaining, -1, "Stated %+v", st)
					require.False(t, st.Limit > 0 && st.Remaining > st.Limit, "Stated more left than its limit: %+v", st)
					require.GreaterOrEqual(t, st.Reset, time.Duration(0), "Stated %+v", st)
				}
			case 9: // the clock moves a little
				clk.Advance(time.Duration(in.byte()) * time.Millisecond)
			case 10: // the clock moves a lot
				clk.Advance(max(in.delay()%(2*time.Hour), 0))
			case 11: // a request sent before the record heard anything
				if in.bool() || unbooked == 0 {
					u.SendUnbooked()
					unbooked++
				} else {
					u.AnsweredUnbooked()
					unbooked--
				}
			}
		}

		// Liveness: with every booking answered or given up, and more
		// than the max hold (and any pause) gone by, nothing holds a key.
		for _, b := range open {
			require.NoError(t, u.Learn(ctx, b.key, throttle.Outcome{N: b.n}))
		}
		for range unbooked {
			u.AnsweredUnbooked()
		}
		clk.Set(maxTime(clk.Now(), pausedUntil).Add(maxHold + fuzzSlack))
		for _, key := range keys {
			r, err := u.Reserve(ctx, key, 1, 0)
			require.NoError(t, err)
			require.True(t, r.OK, "key %q still held after the max hold: held %v, delay %v", key, r.Held(), r.Delay)
			require.Zero(t, r.Delay, "key %q", key)
		}
	})
}

// maxTime returns the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// satAdd returns a+b for non-negative a and b, saturated at the largest
// Duration.
func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// satMul returns d×n for non-negative d and n, saturated at the largest
// Duration.
func satMul(d time.Duration, n int) time.Duration {
	if n > 0 && d > math.MaxInt64/time.Duration(n) {
		return math.MaxInt64
	}
	return d * time.Duration(n)
}
