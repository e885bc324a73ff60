package redislimit

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// fastPathGuard opens budget.lua's branch for a reservation on one token
// bucket.
const fastPathGuard = "if op == 'r' and nparts == 1 and ARGV[4] == 'tb' then"

// TestTokenBucketFastPath runs the same random reservations, pauses,
// cancels and All bookings on one key through budget.lua and through a
// copy without its token bucket branch, with the scripts' clock frozen at
// the test offset: every reply, every field and every TTL must match.
func TestTokenBucketFastPath(t *testing.T) {
	rdb := startRedis(t).client(t)
	ctx := context.Background()
	frozen := strings.Replace(budgetSource, "local t = redis.call('TIME')", "local t = {'0', '0'}", 1)
	require.NotEqual(t, budgetSource, frozen)
	require.Contains(t, frozen, fastPathGuard)
	scripts := [2]*redis.Script{
		redis.NewScript(frozen),
		redis.NewScript(strings.Replace(frozen, fastPathGuard, "if false then", 1)),
	}
	for _, s := range scripts {
		require.NoError(t, s.Load(ctx, rdb).Err())
	}
	prefixes := [2]string{"fast:", "general:"}

	tests := []struct {
		name      string
		giveRate  throttle.Rate
		giveBurst int
		giveSeed  uint64
	}{
		{"10/s burst 3", throttle.PerSecond(10), 3, 1},
		{"100/s burst 1", throttle.PerSecond(100), 1, 2},
		{"1000/s burst 10", throttle.PerSecond(1000), 10, 3},
		{"7/min burst 5", throttle.Rate{N: 7, Per: time.Minute}, 5, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb, err := NewTokenBucket(rdb, tt.giveRate, tt.giveBurst)
			require.NoError(t, err)
			fw, err := NewFixedWindow(rdb, 2*tt.giveBurst, time.Second)
			require.NoError(t, err)
			closeAll(t, tb, fw)
			one, both := tb.specs, append(append([]spec(nil), tb.specs...), fw.specs...)
			x := one[0].x
			var shift atomic.Int64
			c := &core{cfg: config{shift: &shift}}
			shift.Store(1_700_000_000_000_000 * int64(time.Microsecond))
			rng := rand.New(rand.NewPCG(tt.giveSeed, 0))
			var last []any // the latest OK reply to a token bucket reservation
			for step := range 2000 {
				shift.Add(rng.Int64N(3*x) * int64(time.Microsecond))
				waits := []int64{-1, 0, rng.Int64N(5 * x)}
				specs, op, extra := one, "r", []any{1 + rng.IntN(tt.giveBurst), waits[rng.IntN(len(waits))]}
				switch k := rng.IntN(20); {
				case k >= 17 && last != nil:
					op, extra = "c", []any{extra[0], last[3], last[4], last[5], last[6]}
				case k == 13: // the token bucket learns of it from the pause state
					specs, op, extra = fw.specs, "p", []any{rng.Int64N(10 * x), "test:pause"}
				case k == 14:
					specs, extra = both, []any{1, int64(-1)}
				case k == 15:
					op, extra = "p", []any{rng.Int64N(10 * x), "test:pause"}
				case k == 16:
					specs, op, extra = both, "p", []any{rng.Int64N(10 * x), "test:pause"}
				}
				// Both sides run in one transaction, and their TTLs are read
				// in it, so that both were set and are read at one time.
				var runs [2]*redis.Cmd
				var ttls [2][]*redis.DurationCmd
				_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
					for i, script := range scripts {
						ks, err := keys(prefixes[i], "k", specs)
						require.NoError(t, err)
						runs[i] = script.EvalSha(ctx, p, ks, append(c.args(op, specs, len(extra)), extra...)...)
						for _, k := range ks[1:] { // a pause's TTL depends on PTTL
							ttls[i] = append(ttls[i], p.PTTL(ctx, k))
						}
					}
					return nil
				})
				require.NoError(t, err, "step %d", step)
				replies := [2]any{runs[0].Val(), runs[1].Val()}
				require.Equal(t, replies[1], replies[0], "step %d: %s on %d parts", step, op, len(specs))
				if a, ok := replies[0].([]any); ok && op == "r" && len(specs) == 1 && a[0] == int64(1) {
					last = a
				}
				// Each side reads TIME itself and rounds its TTL up to a
				// millisecond, and each PTTL is read a moment apart in
				// whole milliseconds: on a loaded machine they can differ
				// by 2 ms while following one rule.
				for j := range ttls[0] {
					assert.InDelta(t, ttls[1][j].Val(), ttls[0][j].Val(), float64(3*time.Millisecond), "step %d: TTL of part %d", step, j)
				}
				pause := "{k}:pause"
				require.Equal(t, rdb.HGetAll(ctx, prefixes[1]+pause).Val(), rdb.HGetAll(ctx, prefixes[0]+pause).Val(), "step %d: pause", step)
				state := "{k}:" + one[0].suffix
				require.Equal(t, rdb.Get(ctx, prefixes[1]+state).Val(), rdb.Get(ctx, prefixes[0]+state).Val(), "step %d: state", step)
			}
		})
	}
}
