package metriclabel

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisHook returns a go-redis hook that calls record with each round
// trip's duration and, when it failed, the error: one call per command,
// and one per pipeline (or transaction), which goes out in one round
// trip. An error reply from Redis is an answer, not a failure: err is
// set when no answer came (a timeout, a broken connection).
func RedisHook(record func(ctx context.Context, d time.Duration, err error)) redis.Hook {
	return redisHook{record: record, epoch: time.Now()}
}

type redisHook struct {
	record func(context.Context, time.Duration, error)
	// epoch makes time.Since a read of the monotonic clock alone, half
	// the cost of time.Now, which reads the wall clock too.
	epoch time.Time
}

// DialHook implements [redis.Hook]: dials are not round trips.
func (redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements [redis.Hook].
func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Since(h.epoch)
		err := next(ctx, cmd)
		h.record(ctx, time.Since(h.epoch)-start, failure(err))
		return err
	}
}

// ProcessPipelineHook implements [redis.Hook].
func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Since(h.epoch)
		err := next(ctx, cmds)
		h.record(ctx, time.Since(h.epoch)-start, failure(err))
		return err
	}
}

// failure returns err unless Redis answered: a reply of redis.Nil or an
// error reply (NOSCRIPT before the script is loaded, say) is an answer.
func failure(err error) error {
	var reply redis.Error
	if errors.Is(err, redis.Nil) || errors.As(err, &reply) {
		return nil
	}
	return err
}
