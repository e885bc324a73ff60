package throttle

import (
	"cmp"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestAdaptiveFindsHiddenLimit checks the goals of issue 13 against a
// simulated headerless upstream (a token bucket with a tenth of a second
// of burst unless the row says otherwise, answering only "admitted" or
// "throttled"), starting from a ceiling of 10 000/s: from 5 s on, the
// learned rate stays within ±10% of the hidden limit, at most 1% of the
// answers are throttled, and the upstream's limit is at least 90% used.
//
// A burst of a second or half of one (x/time/rate's rate.NewLimiter(10,
// 10) as a server's limiter) doubles what the first second admits: the
// rate settled there, and each refusal nudged it 2%. 10/s with a burst of
// 10 was at 11.8-16.6/s with 26% throttled after 5 s; 100/s with a burst
// of 100 had 1.1-1.3% throttled.
func TestAdaptiveFindsHiddenLimit(t *testing.T) {
	tests := []struct {
		name        string
		giveHidden  int
		giveBurst   int // a tenth of the hidden limit when 0
		giveCallers int
		giveBack    time.Duration
		giveSeed    uint64
	}{
		{name: "10/s", giveHidden: 10, giveCallers: 32, giveBack: 2 * time.Millisecond, giveSeed: 1},
		{name: "10/s, another draw", giveHidden: 10, giveCallers: 32, giveBack: 2 * time.Millisecond, giveSeed: 2},
		{name: "10/s, 8 callers, 20 ms back", giveHidden: 10, giveCallers: 8, giveBack: 20 * time.Millisecond, giveSeed: 3},
		{name: "100/s", giveHidden: 100, giveCallers: 32, giveBack: 2 * time.Millisecond, giveSeed: 1},
		{name: "100/s, another draw", giveHidden: 100, giveCallers: 32, giveBack: 2 * time.Millisecond, giveSeed: 2},
		{name: "100/s, 100 callers, 50 ms back", giveHidden: 100, giveCallers: 100, giveBack: 50 * time.Millisecond, giveSeed: 3},
		{name: "1000/s", giveHidden: 1000, giveCallers: 32, giveBack: 2 * time.Millisecond, giveSeed: 1},
		{name: "1000/s, another draw", giveHidden: 1000, giveCallers: 32, giveBack: 2 * time.Millisecond, giveSeed: 2},
		{name: "1000/s, 100 callers, 50 ms back", giveHidden: 1000, giveCallers: 100, giveBack: 50 * time.Millisecond, giveSeed: 3},
		{name: "10/s, burst 10", giveHidden: 10, giveBurst: 10, giveCallers: 32, giveBack: 2 * time.Millisecond, giveSeed: 1},
		{name: "10/s, burst 10, another draw", giveHidden: 10, giveBurst: 10, giveCallers: 32, giveBack: 2 * time.Millisecond, giveSeed: 2},
		{name: "10/s, burst 5", giveHidden: 10, giveBurst: 5, giveCallers: 32, giveBack: 2 * time.Millisecond, giveSeed: 3},
		{name: "10/s, burst 10, 8 callers, 20 ms back", giveHidden: 10, giveBurst: 10, giveCallers: 8, giveBack: 20 * time.Millisecond, giveSeed: 1},
		{name: "100/s, burst 100", giveHidden: 100, giveBurst: 100, giveCallers: 32, giveBack: 2 * time.Millisecond, giveSeed: 1},
		{name: "100/s, burst 100, another draw", giveHidden: 100, giveBurst: 100, giveCallers: 32, giveBack: 2 * time.Millisecond, giveSeed: 2},
		{name: "100/s, burst 50", giveHidden: 100, giveBurst: 50, giveCallers: 32, giveBack: 2 * time.Millisecond, giveSeed: 3},
		{name: "1000/s, burst 500", giveHidden: 1000, giveBurst: 500, giveCallers: 32, giveBack: 2 * time.Millisecond, giveSeed: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const run, settle = 20 * time.Second, 5 * time.Second
			res := simulate(simConfig{
				hidden: tt.giveHidden, burst: cmp.Or(tt.giveBurst, max(tt.giveHidden/10, 1)), callers: tt.giveCallers,
				way: 4 * time.Millisecond, back: tt.giveBack, run: run, seed: tt.giveSeed, ceiling: PerSecond(10_000),
			})

			admitted, throttled, lo, hi := res.after(settle)
			hidden := float64(tt.giveHidden)
			utilization := float64(admitted) / (hidden * (run - settle).Seconds())
			refused := float64(throttled) / float64(admitted+throttled)
			t.Logf("rate after %v in [%.1f, %.1f], utilization %.3f, throttled %.4f (%d of %d)",
				settle, lo, hi, utilization, refused, throttled, admitted+throttled)
			assert.GreaterOrEqual(t, lo, 0.9*hidden, "learned rate too low")
			assert.LessOrEqual(t, hi, 1.1*hidden, "learned rate too high")
			assert.GreaterOrEqual(t, utilization, 0.9, "utilization")
			assert.LessOrEqual(t, refused, 0.01, "throttled answers")
		})
	}
}

// TestAdaptiveProbesRarelyAtLowRates holds the steady state of a hidden
// 10/s bucket of burst 1 to the goal of at most 1% throttled over a
// minute, for wire jitter up to 8 ms: each probe that finds the limit
// costs two or three throttled answers, so at 10/s a probe must span
// some hundreds of units. On the cubic's clock alone they spanned ~250,
// and 1.0-2.0% of the answers after 5 s were throttled.
func TestAdaptiveProbesRarelyAtLowRates(t *testing.T) {
	for _, way := range []time.Duration{time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond} {
		for seed := uint64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("jitter %v, draw %d", way, seed), func(t *testing.T) {
				const run, settle = time.Minute, 5 * time.Second
				res := simulate(simConfig{
					hidden: 10, burst: 1, callers: 32, way: way, back: 2 * time.Millisecond,
					run: run, seed: seed, ceiling: PerSecond(10_000),
				})
				admitted, throttled, lo, hi := res.after(settle)
				utilization := float64(admitted) / (10 * (run - settle).Seconds())
				refused := float64(throttled) / float64(admitted+throttled)
				t.Logf("rate after %v in [%.2f, %.2f], utilization %.3f, throttled %.4f (%d of %d)",
					settle, lo, hi, utilization, refused, throttled, admitted+throttled)
				assert.LessOrEqual(t, refused, 0.01, "throttled answers")
				assert.GreaterOrEqual(t, utilization, 0.9, "utilization")
			})
		}
	}
}

// TestAdaptiveSurvivesHostileUpstream checks that an upstream that
// throttles everything drives the rate to the floor and no lower, and
// that the rate comes back once it admits again: within about the time
// the callers' bookings take to go out at the floor (8 s here), plus a
// climb that doubles at most every such span.
func TestAdaptiveSurvivesHostileUpstream(t *testing.T) {
	const hostileFrom, hostileTo, run = 5 * time.Second, 15 * time.Second, 60 * time.Second
	res := simulate(simConfig{
		hidden: 100, burst: 10, callers: 8, way: 4 * time.Millisecond, back: 2 * time.Millisecond,
		run: run, seed: 1, ceiling: PerSecond(10_000),
		change: func(at time.Duration) (int, bool) {
			if at >= hostileFrom && at < hostileTo {
				return 0, true
			}
			return 100, true
		},
	})
	_, _, lo, _ := res.after(0)
	assert.GreaterOrEqual(t, lo, 1.0, "the rate fell below the floor")
	assert.InDelta(t, 1.0, res.rates[int(hostileTo/(100*time.Millisecond))-1], 0.01, "the storm drives the rate to the floor")
	_, _, lo, hi := res.after(run - 10*time.Second)
	assert.GreaterOrEqual(t, lo, 90.0, "the rate has not come back")
	assert.LessOrEqual(t, hi, 110.0, "the rate came back too far")
}

// TestAdaptiveFollowsStatedQuota checks the goal of issue 13 for "no
// limit configured, headers present" against simulated upstreams that
// state their quota as real ones do: a GCRA that states only its burst
// and what is left (throttled/throttled), and fixed windows whose
// reset is truncated to the second (sethvargo/go-limiter), in several
// phases. Over the whole run, the learning included, at most 1% of the
// answers are throttled and at least 90% of what the upstream allows is
// used (while the client is not stalled).
func TestAdaptiveFollowsStatedQuota(t *testing.T) {
	tests := []struct {
		name        string
		giveHeaders int
		giveHidden  int
		giveBurst   int
		givePhase   time.Duration
		giveStall   [2]time.Duration
		giveSeed    uint64
	}{
		{name: "GCRA 48/s, burst 9", giveHeaders: simGCRA, giveHidden: 48, giveBurst: 9, giveSeed: 1},
		{name: "GCRA 48/s, burst 9, another draw", giveHeaders: simGCRA, giveHidden: 48, giveBurst: 9, giveSeed: 2},
		{name: "GCRA 200/s, burst 20", giveHeaders: simGCRA, giveHidden: 200, giveBurst: 20, giveSeed: 3},
		{name: "GCRA 48/s, burst 9, the client stalls 650 ms", giveHeaders: simGCRA, giveHidden: 48, giveBurst: 9, giveStall: [2]time.Duration{4 * time.Second, 4650 * time.Millisecond}, giveSeed: 4},
		{name: "window 48/s, the client stalls 650 ms", giveHeaders: simWindow, giveHidden: 48, givePhase: 370 * time.Millisecond, giveStall: [2]time.Duration{4 * time.Second, 4650 * time.Millisecond}, giveSeed: 5},
		{name: "window 48/s", giveHeaders: simWindow, giveHidden: 48, giveSeed: 1},
		{name: "window 48/s, phase 370 ms", giveHeaders: simWindow, giveHidden: 48, givePhase: 370 * time.Millisecond, giveSeed: 2},
		{name: "window 48/s, phase 990 ms", giveHeaders: simWindow, giveHidden: 48, givePhase: 990 * time.Millisecond, giveSeed: 3},
		{name: "window 500/s, phase 500 ms", giveHeaders: simWindow, giveHidden: 500, givePhase: 500 * time.Millisecond, giveSeed: 4},
		// Steered as a bucket, what remains fell all window long and the
		// rate with it: 31-36% used before the window was told.
		{name: "window 30/s, reset a delay", giveHeaders: simWindowDelay, giveHidden: 30, giveSeed: 1},
		{name: "window 48/s, phase 370 ms, reset a delay", giveHeaders: simWindowDelay, giveHidden: 48, givePhase: 370 * time.Millisecond, giveSeed: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const run = 12 * time.Second
			res := simulate(simConfig{
				hidden: tt.giveHidden, burst: tt.giveBurst, callers: 32, way: 4 * time.Millisecond, back: 2 * time.Millisecond,
				run: run, seed: tt.giveSeed, ceiling: PerSecond(1000), headers: tt.giveHeaders, phase: tt.givePhase, stall: tt.giveStall,
			})
			admitted, throttled, lo, hi := res.after(0)
			allowed := float64(tt.giveBurst) + float64(tt.giveHidden)*(run-(tt.giveStall[1]-tt.giveStall[0])).Seconds()
			utilization := float64(admitted) / allowed
			refused := float64(throttled) / float64(admitted+throttled)
			t.Logf("rate in [%.1f, %.1f], utilization %.3f, throttled %.4f (%d of %d)", lo, hi, utilization, refused, throttled, admitted+throttled)
			assert.GreaterOrEqual(t, utilization, 0.9, "utilization")
			assert.LessOrEqual(t, refused, 0.01, "throttled answers")
		})
	}
}

func TestAdaptiveLeavesOthersTheirShare(t *testing.T) {
	tests := []struct {
		name       string
		givePhase  time.Duration
		giveOthers float64
		giveSeed   uint64
		// wantThrottled bounds the throttled answers: those of the
		// first window, before a window's samples tell the others'
		// share, and the 2% cut each costs. Without the estimate they
		// were 2.9%, 2.7% and 11.6%.
		wantThrottled float64
	}{
		{name: "window 48/s, another client 9.6/s", giveOthers: 9.6, giveSeed: 1, wantThrottled: 0.01},
		{name: "window 48/s, phase 370 ms, another client 9.6/s", givePhase: 370 * time.Millisecond, giveOthers: 9.6, giveSeed: 2, wantThrottled: 0.01},
		{name: "window 48/s, phase 990 ms, another client 24/s", givePhase: 990 * time.Millisecond, giveOthers: 24, giveSeed: 3, wantThrottled: 0.02},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const run, hidden = 15 * time.Second, 48
			res := simulate(simConfig{
				hidden: hidden, callers: 32, way: 4 * time.Millisecond, back: 2 * time.Millisecond,
				run: run, seed: tt.giveSeed, ceiling: PerSecond(1000), headers: simWindow, phase: tt.givePhase, others: tt.giveOthers,
			})
			admitted, throttled, lo, hi := res.after(0)
			left := hidden*run.Seconds() - float64(res.others)
			used := float64(admitted) / left
			refused := float64(throttled) / float64(admitted+throttled)
			t.Logf("rate in [%.1f, %.1f], other client admitted %d, %.3f of what it left used, throttled %.4f (%d of %d)", lo, hi, res.others, used, refused, throttled, admitted+throttled)
			assert.GreaterOrEqual(t, used, 0.9, "what the other client left, used")
			assert.LessOrEqual(t, refused, tt.wantThrottled, "throttled answers")
		})
	}
}

// TestAdaptiveFollowsFallingLimit checks that a hidden limit that halves
// mid-run is followed within a few seconds, the issue's "cuts on
// throttling": from 3 s after the fall to the end of the run, the learned
// rate stays within ±10% of the new limit. Without the cut for a limit
// that fell, each throttled answer at the settled rate cut it by 2%, and
// 10/s falling to 5/s was still at 7.2/s 20 s later.
func TestAdaptiveFollowsFallingLimit(t *testing.T) {
	tests := []struct {
		name       string
		giveHidden int
		giveSeed   uint64
	}{
		{name: "10/s to 5/s", giveHidden: 10, giveSeed: 1},
		{name: "10/s to 5/s, another draw", giveHidden: 10, giveSeed: 2},
		{name: "100/s to 50/s", giveHidden: 100, giveSeed: 1},
		{name: "100/s to 50/s, another draw", giveHidden: 100, giveSeed: 2},
		{name: "1000/s to 500/s", giveHidden: 1000, giveSeed: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const fall, within, run = 10 * time.Second, 3 * time.Second, 30 * time.Second
			res := simulate(simConfig{
				hidden: tt.giveHidden, burst: max(tt.giveHidden/10, 1), callers: 32,
				way: 4 * time.Millisecond, back: 2 * time.Millisecond, run: run, seed: tt.giveSeed, ceiling: PerSecond(10_000),
				change: func(at time.Duration) (int, bool) {
					if at >= fall {
						return tt.giveHidden / 2, true
					}
					return tt.giveHidden, true
				},
			})
			admitted, throttled, lo, hi := res.after(fall + within)
			limit := float64(tt.giveHidden) / 2
			t.Logf("rate from %v in [%.2f, %.2f], throttled %d of %d", fall+within, lo, hi, throttled, admitted+throttled)
			assert.GreaterOrEqual(t, lo, 0.9*limit, "learned rate too low")
			assert.LessOrEqual(t, hi, 1.1*limit, "learned rate too high")
		})
	}
}
