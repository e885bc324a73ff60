package redislimit

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// sources holds the budget script, one file per concept, beside the Go
// file of the same concept.
//
//go:embed *.lua
var sources embed.FS

// scriptFiles is the order in which the files join into one script.
var scriptFiles = []string{
	"now.lua", "fastpath.lua", "state.lua", "gcra.lua", "fixedwindow.lua", "slidingwindow.lua",
	"slidingwindowcounter.lua", "message.lua", "pause.lua", "settle.lua", "stated.lua", "budget.lua",
}

// script is the budget script, run as go-redis Script runs one: EVALSHA,
// and EVAL when Redis does not have it.
type script struct {
	src    string
	sha    string
	loaded atomic.Bool // Redis has answered an EVAL or EVALSHA of it
}

func newScript() *script { return joinScript(scriptFiles...) }

// joinScript joins embedded files, in order, into one script.
func joinScript(names ...string) *script {
	var b strings.Builder
	for _, name := range names {
		src, err := sources.ReadFile(name)
		if err != nil {
			panic(fmt.Sprintf("redislimit: embedded %s: %v", name, err)) // cannot happen: embedded
		}
		b.Write(src)
		b.WriteByte('\n')
	}
	sum := sha1.Sum([]byte(b.String()))
	return &script{src: b.String(), sha: hex.EncodeToString(sum[:])}
}

// run runs the script with EVALSHA once Redis is known to have it, and
// with EVAL until then or after a NOSCRIPT (a flush, a restart or a
// failover), which loads it again. So the calls a process starts at once
// each run the script once, rather than each failing with NOSCRIPT first.
func (s *script) run(ctx context.Context, rdb redis.Scripter, keys []string, args []any) (any, error) {
	if s.loaded.Load() {
		v, err := rdb.EvalSha(ctx, s.sha, keys, args...).Result()
		if err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return v, err
		}
		s.loaded.Store(false)
	}
	v, err := rdb.Eval(ctx, s.src, keys, args...).Result()
	if err == nil {
		s.loaded.Store(true)
	}
	return v, err
}

// integer checks that v is an integer reply.
func integer(v any, what string) (int64, error) {
	i, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("redislimit: unexpected reply: %s is %T, want an integer", what, v)
	}
	return i, nil
}

// integers checks that the first len(what) values of v are integers.
func integers(v []any, what ...string) ([]int64, error) {
	out := make([]int64, len(what))
	if err := readIntegers(out, v, what...); err != nil {
		return nil, err
	}
	return out, nil
}

// readIntegers is integers into out, which the caller may keep on its
// stack.
func readIntegers(out []int64, v []any, what ...string) error {
	for i, w := range what {
		var err error
		if out[i], err = integer(v[i], w); err != nil {
			return err
		}
	}
	return nil
}

// text checks that v is a string reply.
func text(v any, what string) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("redislimit: unexpected reply: %s is %T, want a string", what, v)
	}
	return s, nil
}

// array checks that v is an array reply of at least n values.
func array(v any, n int, what string) ([]any, error) {
	a, ok := v.([]any)
	if !ok || len(a) < n {
		return nil, fmt.Errorf("redislimit: unexpected reply to %s: %T of %d values, want at least %d", what, v, len(a), n)
	}
	return a, nil
}
