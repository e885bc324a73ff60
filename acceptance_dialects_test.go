package egress_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// Against an upstream nobody here wrote the Transport with WithRetry and
// WithUpstream (no limiter) keeps to every dialect's statement: "R more
// before T" sends at most R before T (so the upstream never answers 429),
// and the pace goes on after T (the key is not stalled).
func TestAcceptanceDialectsShapeThePace(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name        string
		give        *simUpstream
		giveWorkers int
		giveIn      []time.Duration // request latencies, cycled
		giveOut     []time.Duration // answer latencies, cycled
		wantUsed    float64         // at least this share of what the upstream allows
		wantRefused int             // at most this many 429s (0 unless said)
		skip        string          // a known failure, described for the fix
	}{
		{name: "IETF RateLimit + RateLimit-Policy", give: &simUpstream{algo: "fixed", limit: 10, window: 10 * time.Second, dialect: "ietf", ceilSec: true}, giveWorkers: 4, wantUsed: 0.8},
		{name: "X-RateLimit epoch reset, truncated", give: &simUpstream{algo: "fixed", limit: 10, window: 10 * time.Second, dialect: "x-epoch"}, giveWorkers: 4, wantUsed: 0.8},
		{name: "X-RateLimit epoch reset, rounded up", give: &simUpstream{algo: "fixed", limit: 10, window: 10 * time.Second, dialect: "x-epoch", ceilSec: true}, giveWorkers: 4, wantUsed: 0.8},
		{name: "X-RateLimit delta reset, rounded up", give: &simUpstream{algo: "fixed", limit: 10, window: 10 * time.Second, dialect: "x-delta", ceilSec: true}, giveWorkers: 4, wantUsed: 0.8},
		{name: "GitHub used and resource", give: &simUpstream{algo: "fixed", limit: 10, window: 10 * time.Second, dialect: "github"}, giveWorkers: 4, wantUsed: 0.8},
		{name: "OpenAI 6m0s-style resets", give: &simUpstream{algo: "bucket", limit: 10, window: 10 * time.Second, dialect: "openai"}, giveWorkers: 4, wantUsed: 0.8},
		{name: "OpenAI, minutes", give: &simUpstream{algo: "bucket", limit: 60, window: 6 * time.Minute, dialect: "openai"}, giveWorkers: 4, wantUsed: 0.8},
		{name: "Anthropic RFC 3339 resets", give: &simUpstream{algo: "bucket", limit: 10, window: 10 * time.Second, dialect: "anthropic"}, giveWorkers: 4, wantUsed: 0.8},
		{name: "Shopify leaky bucket", give: &simUpstream{algo: "leaky", limit: 40, window: 20 * time.Second, dialect: "shopify"}, giveWorkers: 4, wantUsed: 0.8},

		// Second-granularity resets on windows that do not start on a second.
		{name: "epoch reset, window offset 300ms", give: &simUpstream{algo: "fixed", limit: 10, window: 2 * time.Second, offset: 300 * ms, dialect: "x-epoch"}, giveWorkers: 4, wantUsed: 0.7},
		{name: "delta reset truncated, window offset 700ms", give: &simUpstream{algo: "fixed", limit: 10, window: 2 * time.Second, offset: 700 * ms, dialect: "x-delta"}, giveWorkers: 4, wantUsed: 0.7},
		{name: "IETF, 1 s windows, offset 400ms", give: &simUpstream{algo: "fixed", limit: 20, window: time.Second, offset: 400 * ms, dialect: "ietf", ceilSec: true}, giveWorkers: 8, wantUsed: 0.7},
		{name: "IETF, 1 s windows, offset 400ms, one worker", give: &simUpstream{algo: "fixed", limit: 20, window: time.Second, offset: 400 * ms, dialect: "ietf", ceilSec: true}, giveWorkers: 1, wantUsed: 0.7},

		// Windows that start at the first request after the last one
		// ended (ulule/limiter): their boundaries move with the client.
		// The phase of one window's end says nothing of the next one's: the
		// record tells that from a request sent after the end the phase
		// said and still counted in the old window (which may be refused:
		// one 429), and from then on takes each end from its first answer.
		{name: "on-demand windows, epoch reset truncated", give: &simUpstream{algo: "ondemand", limit: 20, window: time.Second, dialect: "x-epoch"}, giveWorkers: 8, wantUsed: 0.7},
		{name: "on-demand windows, 2 s, epoch reset truncated", give: &simUpstream{algo: "ondemand", limit: 10, window: 2 * time.Second, dialect: "x-epoch"}, giveWorkers: 4, wantUsed: 0.7},
		{name: "on-demand windows, 2 s, uneven latency", give: &simUpstream{algo: "ondemand", limit: 20, window: 2 * time.Second, dialect: "x-epoch"}, giveWorkers: 8,
			giveIn: []time.Duration{30 * ms, 10 * ms}, giveOut: []time.Duration{50 * ms, 20 * ms, 5 * ms}, wantUsed: 0.9, wantRefused: 1},
		{name: "on-demand windows, 1 s, 48 a window, uneven latency", give: &simUpstream{algo: "ondemand", limit: 48, window: time.Second, dialect: "x-epoch"}, giveWorkers: 32,
			giveIn: []time.Duration{30 * ms, 10 * ms}, giveOut: []time.Duration{50 * ms, 20 * ms, 5 * ms}, wantUsed: 0.9, wantRefused: 1},
		{name: "on-demand windows, 1 s, slow answers", give: &simUpstream{algo: "ondemand", limit: 10, window: time.Second, dialect: "x-epoch"}, giveWorkers: 4,
			giveIn: []time.Duration{20 * ms, 5 * ms}, giveOut: []time.Duration{80 * ms, 10 * ms}, wantUsed: 0.9, wantRefused: 1},
		// Every answer states "0": the resets cannot tell one window
		// from the next, what is left coming back does. The one refusal
		// is the probe that tells a window from a bucket (unpaced.go).
		// At caeadaf: 15 refusals, each remaining that came back taken
		// for a sliding window's.
		{name: "1 s windows, delta reset truncated", give: &simUpstream{algo: "fixed", limit: 10, window: time.Second, dialect: "x-delta"}, giveWorkers: 4, wantUsed: 0.85, wantRefused: 1},
		{name: "on-demand windows, 2 s, delta reset truncated", give: &simUpstream{algo: "ondemand", limit: 10, window: 2 * time.Second, dialect: "x-delta"}, giveWorkers: 4, wantUsed: 0.7},

		// Clock skew: the server's clock minutes off, told by Date.
		{name: "server 5 minutes ahead, epoch", give: &simUpstream{algo: "fixed", limit: 10, window: 10 * time.Second, dialect: "x-epoch", skew: 5 * time.Minute}, giveWorkers: 4, wantUsed: 0.8},
		{name: "server 7 minutes behind, epoch", give: &simUpstream{algo: "fixed", limit: 10, window: 10 * time.Second, dialect: "x-epoch", skew: -7 * time.Minute}, giveWorkers: 4, wantUsed: 0.8},
		{name: "server 3 minutes ahead, RFC 3339", give: &simUpstream{algo: "bucket", limit: 10, window: 10 * time.Second, dialect: "anthropic", skew: 3 * time.Minute}, giveWorkers: 4, wantUsed: 0.8},
		{name: "server 90 s ahead, offset window, no skew visible in delta", give: &simUpstream{algo: "fixed", limit: 10, window: 10 * time.Second, offset: 250 * ms, dialect: "x-delta", skew: 90 * time.Second, ceilSec: true}, giveWorkers: 4, wantUsed: 0.8},

		// Answers out of order: the later statement of a window wins.
		{name: "out of order, epoch", give: &simUpstream{algo: "fixed", limit: 10, window: 2 * time.Second, dialect: "x-epoch"}, giveWorkers: 6,
			giveIn: []time.Duration{5 * ms, 40 * ms, 10 * ms}, giveOut: []time.Duration{300 * ms, 20 * ms, 150 * ms, 5 * ms}, wantUsed: 0.6},
		{name: "out of order, IETF", give: &simUpstream{algo: "fixed", limit: 10, window: 2 * time.Second, dialect: "ietf", ceilSec: true}, giveWorkers: 6,
			giveIn: []time.Duration{5 * ms, 40 * ms, 10 * ms}, giveOut: []time.Duration{300 * ms, 20 * ms, 150 * ms, 5 * ms}, wantUsed: 0.6},
		{name: "out of order, OpenAI", give: &simUpstream{algo: "bucket", limit: 10, window: 2 * time.Second, dialect: "openai"}, giveWorkers: 6,
			giveIn: []time.Duration{5 * ms, 40 * ms, 10 * ms}, giveOut: []time.Duration{300 * ms, 20 * ms, 150 * ms, 5 * ms}, wantUsed: 0.6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.skip != "" {
				t.Skip(tt.skip)
			}
			synctest.Test(t, func(t *testing.T) {
				up := tt.give
				base := &simBase{h: up, in: spread(10 * ms), out: spread(10 * ms)}
				if tt.giveIn != nil {
					base.in, base.out = spread(tt.giveIn...), spread(tt.giveOut...)
				}
				u, err := throttle.NewUpstream()
				require.NoError(t, err)
				tr := egress.NewTransport(base, egress.WithRetry(retryafter.Policy{}), egress.WithUpstream(u), egress.WithMaxWait(-1))
				run := 20 * up.window
				start := time.Now()
				failed, first := drive(tr, tt.giveWorkers, run)
				admitted, refused := up.stats()
				allowed := float64(up.limit) * float64(run) / float64(up.window)
				t.Logf("admitted %d of %.0f (%.2f), refused %d, failed %d", admitted, allowed, float64(admitted)/allowed, refused, failed)
				assert.LessOrEqual(t, refused, tt.wantRefused, "the upstream answered 429")
				assert.Zero(t, failed, "requests failed: %v", first)
				assert.GreaterOrEqual(t, float64(admitted)/allowed, tt.wantUsed, "share of the quota used")
				// The pace goes on after every reset: no window of the
				// last half is empty.
				for w := run / 2; w < run; w += up.window {
					assert.NotZero(t, up.admittedBetween(start.Add(w), start.Add(w+up.window)), "nothing sent in [%v, %v)", w, w+up.window)
				}
			})
		})
	}
}
