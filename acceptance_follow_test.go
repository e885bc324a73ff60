package egress_test

import (
	"context"
	"fmt"
	"github.com/egress-go/egress"
	"github.com/egress-go/egress/throttle"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/retryafter"
)

// An epoch reset is read as an instant on any clock, testing/synctest's
// (2000-01-01, where epochs are below 1e9) included: "now + 10 s" as a
// Unix time is 10 s away, not a delay of thirty years clamped to
// MaxPause.
func TestAcceptanceEpochResetOnSynctestClock(t *testing.T) {
	tests := []struct {
		name       string
		giveHeader []string // the reset is appended, as now+10s in Unix seconds
		giveReset  string
		wantName   string
	}{
		{name: "X-RateLimit", giveHeader: []string{"X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0"}, giveReset: "X-RateLimit-Reset", wantName: "x-ratelimit"},
		{name: "GitHub", giveHeader: []string{"X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0", "X-RateLimit-Used", "10", "X-RateLimit-Resource", "core"}, giveReset: "X-RateLimit-Reset", wantName: "core"},
		{name: "X (Twitter)", giveHeader: []string{"X-Rate-Limit-Limit", "10", "X-Rate-Limit-Remaining", "0"}, giveReset: "X-Rate-Limit-Reset", wantName: "x-rate-limit"},
		{name: "draft-03 RateLimit-Reset as an epoch", giveHeader: []string{"RateLimit-Limit", "10", "RateLimit-Remaining", "0"}, giveReset: "RateLimit-Reset", wantName: "ratelimit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				now := time.Now()
				h := http.Header{}
				for i := 0; i+1 < len(tt.giveHeader); i += 2 {
					h.Set(tt.giveHeader[i], tt.giveHeader[i+1])
				}
				h.Set(tt.giveReset, strconv.FormatInt(now.Add(10*time.Second).Unix(), 10))
				qs := retryafter.ParseQuota(h, now)
				require.Len(t, qs, 1)
				assert.Equal(t, tt.wantName, qs[0].Name)
				assert.Equal(t, 10*time.Second, qs[0].Reset)
				assert.True(t, qs[0].Absolute, "an epoch is an instant")
				d, ok := retryafter.Parse(h, now)
				assert.True(t, ok)
				assert.Equal(t, 10*time.Second, d, "remaining 0: wait for the reset")
			})
		})
	}
}

// Answers to requests in flight together come in any order: of two
// statements of one window for requests sent before either answer came
// back, the lower remaining wins, whichever arrives last (issue 13: the
// later statement wins only when it is known to be later: its request
// sent after the other's answer arrived, or so long after the other's that
// their ways there cannot make up for it). Under testing/synctest every
// request a burst sends leaves at the same instant; before the fix the
// last to arrive won, and a 200 stating remaining 5 after one stating 0
// let 5 more go before the reset. Against didip/tollbooth, a request
// sent 0.1 ms after another, while both were in flight, was taken as
// the later, and its higher remaining let 20 429s through.
func TestAcceptanceTiedStatementsLowerWins(t *testing.T) {
	stated := func(remaining int) throttle.Outcome {
		return throttle.Outcome{N: 1, Latency: 20 * time.Millisecond, Statements: []throttle.Statement{
			{Name: "x-ratelimit", Unit: throttle.UnitRequests, Limit: 10, Remaining: remaining, Reset: 5 * time.Second},
		}}
	}
	tests := []struct {
		name     string
		giveLast int           // remaining stated by the answer that arrives last
		giveSent time.Duration // when its request was sent, after the first's; 0: together
		giveGap  time.Duration // when it arrives, after the first answer
		wantOK   bool
	}{
		{name: "sent together, higher remaining arrives last", giveLast: 5, wantOK: false},
		{name: "sent together, lower remaining arrives last", giveLast: 0, wantOK: false},
		// Its round trip 4 ms longer: it may have reached the upstream
		// first.
		{name: "sent 1 ms later, answered 5 ms later", giveLast: 5, giveSent: time.Millisecond, giveGap: 5 * time.Millisecond, wantOK: false},
		{name: "sent 10 ms later, answered with it", giveLast: 5, giveSent: 10 * time.Millisecond, wantOK: true},
		{name: "sent after the first answer arrived, higher remaining: a sliding window's estimate decayed", giveLast: 5, giveSent: 25 * time.Millisecond, giveGap: 25 * time.Millisecond, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				u, err := throttle.NewUpstream()
				require.NoError(t, err)
				first := stated(0)
				if tt.giveLast == 0 {
					first = stated(5)
				}
				require.NoError(t, u.Learn(ctx, "k", first)) // sent 20 ms ago
				time.Sleep(tt.giveGap)
				last := stated(tt.giveLast)
				last.Latency = 20*time.Millisecond + tt.giveGap - tt.giveSent
				require.NoError(t, u.Learn(ctx, "k", last))
				r, err := u.Reserve(ctx, "k", 1, 0)
				require.NoError(t, err)
				assert.Equal(t, tt.wantOK, r.OK)
			})
		})
	}
}

// A refilling quota (OpenAI, Anthropic) at 0 with a reset minutes ahead
// holds the next request for one unit's refill: "0 left, full in 6m0s"
// of 60 is one more every 6 s. Before the fix the reset was cut to
// MaxPause (60 s) and Remaining raised to keep the pace, to 50: fifty
// requests went at once, and met 429s.
func TestAcceptanceRefillingQuotaAtZero(t *testing.T) {
	tests := []struct {
		name       string
		giveHeader []string
		wantGapMin time.Duration
	}{
		{name: "OpenAI 6m0s", giveHeader: []string{"x-ratelimit-limit-requests", "60", "x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "6m0s"}, wantGapMin: 6 * time.Second},
		{name: "Anthropic, 6 minutes ahead", giveHeader: []string{"anthropic-ratelimit-requests-limit", "60", "anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2000-01-01T00:06:00Z"}, wantGapMin: 6 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := firstSays(http.StatusOK, tt.giveHeader...)
				var clamped []egress.ClampInfo
				tr := egress.NewTransport(base, append(retryOnly(t), egress.WithObserver(&egress.Observer{Clamped: func(c egress.ClampInfo) { clamped = append(clamped, c) }}))...)
				for range 2 {
					resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
					require.NoError(t, err)
					drainClose(t, resp)
				}
				sent := base.times()
				require.Len(t, sent, 2)
				assert.GreaterOrEqual(t, sent[1].Sub(sent[0]), tt.wantGapMin, "nothing is left: the next waits for a unit to refill")
				assert.Less(t, sent[1].Sub(sent[0]), time.Minute, "but not for the whole reset")
				assert.Empty(t, clamped, "a reset of minutes on a refilling quota is not absurd")
			})
		})
	}
}

// Of two statements of a refilling quota for requests sent at the same
// instant, the emptier one wins, whichever arrives last.
func TestAcceptanceTiedRefillingStatements(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		u, err := throttle.NewUpstream()
		require.NoError(t, err)
		stated := func(remaining int) throttle.Outcome {
			return throttle.Outcome{N: 1, Latency: 20 * time.Millisecond, Statements: []throttle.Statement{
				{Name: "requests", Unit: throttle.UnitRequests, Limit: 60, Remaining: remaining, Reset: time.Duration(60-remaining) * time.Second, Refills: true},
			}}
		}
		require.NoError(t, u.Learn(ctx, "k", stated(0)))
		require.NoError(t, u.Learn(ctx, "k", stated(5))) // sent together with the first, handled before it
		r, err := u.Reserve(ctx, "k", 1, 0)
		require.NoError(t, err)
		assert.False(t, r.OK, "the bucket is empty")
	})
}

// A reset stated as an instant on a server clock minutes off is moved by
// the skew the Date header shows, to the safe side: in the client's time
// it is never before the true reset, whatever fraction of a second Date
// was truncated by. Before the fix a client ahead of its server got a
// reset up to 2 s early (skew less 2 s of doubt), and 429s at every
// window boundary.
func TestAcceptanceSkewedResetIsNeverEarly(t *testing.T) {
	server := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC) // on the second
	for _, skew := range []time.Duration{7 * time.Minute, 3 * time.Second, 0, -3 * time.Second, -7 * time.Minute} {
		for _, frac := range []time.Duration{0, 300 * time.Millisecond, 999 * time.Millisecond} {
			t.Run(fmt.Sprintf("client %v ahead, Date %v into its second", skew, frac), func(t *testing.T) {
				serverNow := server.Add(frac)
				clientNow := serverNow.Add(skew)
				reset := server.Add(10 * time.Second) // a window boundary on the server's clock
				h := http.Header{}
				h.Set("Date", serverNow.Format(http.TimeFormat))
				h.Set("X-RateLimit-Limit", "10")
				h.Set("X-RateLimit-Remaining", "0")
				h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
				qs := retryafter.ParseQuota(h, clientNow)
				require.Len(t, qs, 1)
				assert.False(t, qs[0].ResetAt.Before(reset.Add(skew)), "ResetAt %v is before the true reset %v", qs[0].ResetAt, reset.Add(skew))
				assert.LessOrEqual(t, qs[0].ResetAt.Sub(reset.Add(skew)), 3*time.Second, "but not much after")
			})
		}
	}
}

// Issue 13, "Transport": with WithRetry alone (no limiter, no
// WithUpstream), the headers already shape the pace. Before the fix they
// did only with WithUpstream: WithRetry alone sent the next request at
// once after a 200 stating 0 left for 10 s.
func TestAcceptanceWithRetryAloneShapesThePace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := firstSays(http.StatusOK, "X-RateLimit-Limit", "2", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "10")
		tr := egress.NewTransport(base, egress.WithRetry(retryafter.Policy{}))
		for range 2 {
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
			require.NoError(t, err)
			drainClose(t, resp)
		}
		sent := base.times()
		require.Len(t, sent, 2)
		assert.Equal(t, 10*time.Second, sent[1].Sub(sent[0]))
	})
}

// A request that gives up while it waits for its slot (its context ends)
// loses no units: its booking on the record, and on the limiter beside
// it, is given back, so the next request takes the same slot.
func TestAcceptanceCancelMidWaitLosesNoUnits(t *testing.T) {
	tests := []struct {
		name     string
		giveOpts func(*testing.T) []egress.Option
		wantAt   time.Duration // when the next request goes: as if the cancelled one had never been
	}{
		{name: "WithRetry and WithUpstream", giveOpts: retryOnly, wantAt: 10 * time.Second},
		{name: "beside a token bucket", giveOpts: oneASecond, wantAt: 10 * time.Second},
		{name: "beside an Adaptive", giveOpts: func(t *testing.T) []egress.Option {
			a, err := throttle.NewAdaptive(throttle.PerSecond(10))
			require.NoError(t, err)
			return []egress.Option{egress.WithLimiter(a), egress.WithUpstream(mustUpstream(t))}
		}, wantAt: 10*time.Second + 100*time.Millisecond}, // the Adaptive's own spacing, also without the cancelled request
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := firstSays(http.StatusOK, "RateLimit-Policy", `"default";q=1;w=10`, "RateLimit", `"default";r=0;t=10`) // nothing more for 10 s, then 1 per 10 s
				tr := egress.NewTransport(base, tt.giveOpts(t)...)
				start := time.Now()
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
				require.NoError(t, err)
				drainClose(t, resp)

				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error)
				go func() {
					resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://api.test/", nil))
					if err == nil {
						resp.Body.Close()
					}
					done <- err
				}()
				time.Sleep(5 * time.Second)
				cancel()
				assert.ErrorIs(t, <-done, context.Canceled)

				resp, err = tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
				require.NoError(t, err)
				drainClose(t, resp)
				sent := base.times()
				require.Len(t, sent, 2, "the cancelled request was never sent")
				assert.Equal(t, tt.wantAt, sent[1].Sub(start), "the next request takes the slot given back")
			})
		})
	}
}
