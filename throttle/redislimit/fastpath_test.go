package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// recorder is a redis.Scripter over one server that keeps the reply of
// the latest script run. With general, it negates the frozen time of
// every budget script run, which turns the bucket fast path off (see
// now.lua). It has no Pipeline or Subscribe, so calls go one by one.
type recorder struct {
	rdb     *redis.Client
	general bool
	last    string // the latest reply, or its error
}

func (r *recorder) args(args []any) []any {
	if !r.general || len(args) < 2 {
		return args
	}
	at, ok := args[1].(int64)
	if !ok || at <= 0 {
		panic(fmt.Sprintf("recorder: the frozen time is %v, want a positive int64", args[1]))
	}
	args = slices.Clone(args)
	args[1] = -at
	return args
}

func (r *recorder) keep(c *redis.Cmd) *redis.Cmd {
	v, err := c.Result()
	r.last = fmt.Sprintf("%#v %v", v, err)
	return c
}

func (r *recorder) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return r.keep(r.rdb.Eval(ctx, script, keys, r.args(args)...))
}

func (r *recorder) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return r.keep(r.rdb.EvalSha(ctx, sha, keys, r.args(args)...))
}

func (r *recorder) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return r.keep(r.rdb.EvalRO(ctx, script, keys, r.args(args)...))
}

func (r *recorder) EvalShaRO(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return r.keep(r.rdb.EvalShaRO(ctx, sha, keys, r.args(args)...))
}

func (r *recorder) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	return r.rdb.ScriptExists(ctx, hashes...)
}

func (r *recorder) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	return r.rdb.ScriptLoad(ctx, script)
}

// TestBucketFastPath runs the same random reserves, allows, cancels,
// pauses, forgotten pauses and inspects on a bucket twice, step by step
// on one frozen clock: on one server with fastpath.lua, on another with
// it off. After every step the script's replies must be equal, and so
// must every key the servers hold, its value and its expiry.
func TestBucketFastPath(t *testing.T) {
	t.Parallel()
	servers := [2]*redis.Client{startRedis(t).client(t), startRedis(t).client(t)}
	tests := []struct {
		name     string
		give     func(rdb redis.Scripter, c *clock) (*budget, error)
		giveSeed uint64
	}{
		{
			name: "token bucket 10/s burst 3",
			give: func(rdb redis.Scripter, c *clock) (*budget, error) {
				l, err := NewTokenBucket(rdb, throttle.PerSecond(10), 3, c.option())
				if err != nil {
					return nil, err
				}
				return l.budget, nil
			},
			giveSeed: 1,
		},
		{
			name: "token bucket 1000/s burst 10 with tolerance",
			give: func(rdb redis.Scripter, c *clock) (*budget, error) {
				l, err := NewTokenBucket(rdb, throttle.PerSecond(1000), 10, c.option(), WithTolerance(throttle.DefaultTolerance))
				if err != nil {
					return nil, err
				}
				return l.budget, nil
			},
			giveSeed: 2,
		},
		{
			name: "token bucket 7/min burst 1",
			give: func(rdb redis.Scripter, c *clock) (*budget, error) {
				l, err := NewTokenBucket(rdb, throttle.Rate{N: 7, Per: time.Minute}, 1, c.option())
				if err != nil {
					return nil, err
				}
				return l.budget, nil
			},
			giveSeed: 3,
		},
		{
			name: "leaky bucket 50/s capacity 4",
			give: func(rdb redis.Scripter, c *clock) (*budget, error) {
				l, err := NewLeakyBucket(rdb, throttle.PerSecond(50), 4, c.option())
				if err != nil {
					return nil, err
				}
				return l.budget, nil
			},
			giveSeed: 4,
		},
		{
			name: "token bucket 30000/s burst 50", // 33 334 ns: µs and ns
			give: func(rdb redis.Scripter, c *clock) (*budget, error) {
				l, err := NewTokenBucket(rdb, throttle.PerSecond(30_000), 50, c.option())
				if err != nil {
					return nil, err
				}
				return l.budget, nil
			},
			giveSeed: 5,
		},
		{
			name: "leaky bucket 150M/min capacity 99", // 400 ns: less than a µs
			give: func(rdb redis.Scripter, c *clock) (*budget, error) {
				l, err := NewLeakyBucket(rdb, throttle.PerMinute(150_000_000), 99, c.option())
				if err != nil {
					return nil, err
				}
				return l.budget, nil
			},
			giveSeed: 6,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			c := newClock(0)
			var recs [2]*recorder
			var bs [2]*budget
			for i := range bs {
				require.NoError(t, servers[i].FlushAll(ctx).Err())
				require.NoError(t, servers[i].ConfigResetStat(ctx).Err())
				recs[i] = &recorder{rdb: servers[i], general: i == 1}
				b, err := tt.give(recs[i], c)
				require.NoError(t, err)
				closeAll(t, b)
				bs[i] = b
			}
			rng := rand.New(rand.NewPCG(tt.giveSeed, 0))
			interval := time.Duration(bs[0].limits[0].nanos())
			span := interval * time.Duration(bs[0].limits[0].burst)
			keys := []string{"a", "b", "c"}
			var bookings [][2]*booking
			expiry := map[string][2]int64{} // a part key's PEXPIRETIME, fast and general
			for step := range 300 {
				key := keys[rng.IntN(len(keys))]
				n := 1 + rng.IntN(bs[0].most)
				var what string
				var do func(i int) error
				switch x := rng.IntN(100); {
				case x < 25:
					d := []time.Duration{0, time.Microsecond, interval / 2, interval - time.Microsecond, interval, time.Duration(rng.Int64N(int64(2 * span))), 10 * time.Second}[rng.IntN(7)]
					c.advance(d)
					what = fmt.Sprintf("advance %v", d)
				case x < 60:
					maxWait := []time.Duration{-1, 0, time.Duration(rng.Int64N(int64(3 * span)))}[rng.IntN(3)]
					var after time.Duration
					if rng.IntN(4) == 0 {
						after = time.Duration(rng.Int64N(int64(2 * interval)))
					}
					what = fmt.Sprintf("reserve %s n=%d maxWait=%v after=%v", key, n, maxWait, after)
					var got [2]*booking
					do = func(i int) error {
						_, b, err := bs[i].reserve(ctx, key, n, after, maxWait, true)
						got[i] = b
						if i == 1 && got[0] != nil && got[1] != nil {
							bookings = append(bookings, got)
						}
						return err
					}
				case x < 70:
					what = fmt.Sprintf("allow %s n=%d", key, n)
					do = func(i int) error { _, err := bs[i].AllowN(ctx, key, n); return err }
				case x < 85:
					if len(bookings) == 0 {
						continue
					}
					j := rng.IntN(len(bookings))
					what = fmt.Sprintf("cancel booking %d", j)
					do = func(i int) error { return bookings[j][i].Cancel(ctx) }
				case x < 90:
					d := time.Duration(rng.Int64N(int64(2 * time.Second)))
					what = fmt.Sprintf("pause %s for %v", key, d)
					do = func(i int) error { return bs[i].Pause(ctx, key, d) }
				case x < 94:
					// As if the pause state had expired: the parts keep the
					// epoch and shift they applied.
					what = fmt.Sprintf("forget the pause of %s", key)
					do = func(i int) error {
						ks, err := bs[i].keys(key)
						if err != nil {
							return err
						}
						recs[i].last = ""
						return servers[i].Del(ctx, ks[0]).Err()
					}
				default:
					what = fmt.Sprintf("inspect %s", key)
					do = func(i int) error { _, err := bs[i].Inspect(ctx, key); return err }
				}
				if do == nil {
					continue
				}
				start := time.Now()
				for i := range bs { // the fast side first: see expiry below
					require.NoError(t, do(i), "step %d: %s", step, what)
				}
				took := time.Since(start)
				require.Equal(t, recs[0].last, recs[1].last, "step %d: %s: replies", step, what)
				states := [2]map[string]string{dump(t, servers[0]), dump(t, servers[1])}
				require.Equal(t, states[0], states[1], "step %d: %s: keys", step, what)
				for k := range states[0] {
					if strings.HasSuffix(k, pauseSuffix) {
						continue // written by the general path alone
					}
					var at [2]int64
					for i, rdb := range servers {
						var err error
						at[i], err = rdb.Do(ctx, "PEXPIRETIME", k).Int64()
						require.NoError(t, err)
					}
					if at == expiry[k] {
						continue
					}
					// The two SETs ran this step, the fast one first, at
					// most took apart: the same TTL puts the general one's
					// expiry no earlier, and no more than took later.
					expiry[k] = at
					msg := fmt.Sprintf("step %d: %s: expiry of %s (fast %d, general %d, %v apart)", step, what, k, at[0], at[1], took)
					require.GreaterOrEqual(t, at[1], at[0], msg)
					require.LessOrEqual(t, at[1]-at[0], took.Milliseconds()+1, msg)
				}
			}
			// Both sides ran what they should: the fast side the fast path
			// (EXISTS, and no HMGET when it went through), the other never.
			var stats [2]string
			for i, rdb := range servers {
				var err error
				stats[i], err = rdb.Info(ctx, "commandstats").Result()
				require.NoError(t, err)
			}
			require.Positive(t, cmdCalls(stats[0], "exists"), "the fast path ran")
			require.Less(t, cmdCalls(stats[0], "hmget"), cmdCalls(stats[1], "hmget"), "the fast path went through")
			require.Zero(t, cmdCalls(stats[1], "exists"), "the general side ran no fast path")
		})
	}
}

// dump returns every key on rdb with its type and value.
func dump(t *testing.T, rdb *redis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		require.NoError(t, err)
		switch typ {
		case "string":
			v, err := rdb.Get(ctx, k).Result()
			require.NoError(t, err)
			out[k] = fmt.Sprintf("string %q", v)
		case "hash":
			v, err := rdb.HGetAll(ctx, k).Result()
			require.NoError(t, err)
			out[k] = fmt.Sprintf("hash %v", v)
		default:
			t.Fatalf("key %s is a %s", k, typ)
		}
	}
	return out
}
