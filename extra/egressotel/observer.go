package egressotel

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/internal/metriclabel"
	"github.com/egress-go/egress/throttle/redislimit"
)

// Observer returns an [egress.Observer] that records attempts sent,
// waits, refusals, retries, pauses and clamped quota statements in m,
// then passes each event on to next's func of the same name, if next is
// not nil and has one. Funcs of next that m
// does not record are kept as they are. Install it with
// [egress.WithObserver]; to keep a program's own Observer, pass it as
// next:
//
//	egress.WithObserver(m.Observer(&egress.Observer{Paused: alert}))
func (m *Metrics) Observer(next *egress.Observer) *egress.Observer {
	return metriclabel.Observer(next, m.waited, m.refused, m.sent, m.retrying, m.paused, m.clamped)
}

// key returns the options that record a measurement for key alone.
func (m *Metrics) key(key string) options {
	return m.keyed.Get(keyed{key: m.core.Keys.Label(key)})
}

func (m *Metrics) waited(w egress.WaitInfo) {
	key := m.key(w.Key).record
	if w.Queue > 0 {
		m.queueWait.Record(context.Background(), w.Queue.Seconds(), key...)
	}
	if w.Limiter > 0 {
		m.limiterWait.Record(context.Background(), w.Limiter.Seconds(), key...)
	}
}

func (m *Metrics) refused(r egress.RefusalInfo) {
	reason := m.core.Refused(r.Err)
	m.refusals.Add(context.Background(), 1, m.keyed.Get(keyed{key: m.core.Keys.Label(r.Key), reason: reason}).add...)
	if metriclabel.RefusedUnsent(r) {
		m.duration.Record(r.Request.Context(), r.Elapsed.Seconds(), m.series.Get(metriclabel.RefusedKey(r.Request, r.Err)).record...)
	}
}

func (m *Metrics) retrying(r egress.RetryInfo) {
	m.retries.Add(context.Background(), 1, m.keyed.Get(keyed{key: m.core.Keys.Label(r.Key), code: r.StatusCode}).add...)
}

func (m *Metrics) paused(p egress.PauseInfo) {
	key := m.key(p.Key)
	if p.Err != nil {
		m.pauseFailures.Add(context.Background(), 1, key.add...)
		return
	}
	m.pauses.Record(context.Background(), p.Duration.Seconds(), key.record...)
}

func (m *Metrics) clamped(c egress.ClampInfo) {
	key := m.core.Keys.Label(c.Key)
	for _, f := range c.Fields {
		m.clamps.Add(context.Background(), 1, m.keyed.Get(keyed{key: key, field: f}).add...)
	}
}

// RedisObserver returns a func for [redislimit.WithObserver] that counts
// failed calls to Redis, recoveries and settles dropped in m, and tracks
// whether Redis is failing, then passes each event on to next, if next is
// not nil. Give each redislimit Client a func of its own.
func (m *Metrics) RedisObserver(next func(redislimit.Event)) func(redislimit.Event) {
	ctx := context.Background()
	return m.core.RedisObserver(next,
		func() { m.redisErrors.Add(ctx, 1) },
		func() { m.redisRecover.Add(ctx, 1) },
		func(n int) { m.redisDropped.Add(ctx, int64(n)) })
}

// RedisHook returns a go-redis hook that records each round trip to
// Redis on egress.redis.round_trip.duration: each command, and each
// pipeline, which is one round trip. Add it to the client that
// [redislimit.NewClient] is given (rdb.AddHook(m.RedisHook())); it counts
// every command on that client, egress's or not.
func (m *Metrics) RedisHook() redis.Hook {
	ok := optionsOf()
	failed := metriclabel.NewCache(func(errorType string) options { return optionsOf(errorTypeAttr.String(errorType)) })
	return metriclabel.RedisHook(func(ctx context.Context, d time.Duration, err error) {
		opts := ok
		if err != nil {
			opts = failed.Get(metriclabel.ErrorType(err))
		}
		m.redisTrips.Record(ctx, d.Seconds(), opts.record...)
	})
}
