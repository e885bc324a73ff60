package egressprom

import (
	"context"
	"strconv"
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

func (m *Metrics) waited(w egress.WaitInfo) {
	key := m.core.Keys.Label(w.Key)
	if w.Queue > 0 {
		m.queueWait.WithLabelValues(key).Observe(w.Queue.Seconds())
	}
	if w.Limiter > 0 {
		m.limiterWait.WithLabelValues(key).Observe(w.Limiter.Seconds())
	}
}

func (m *Metrics) refused(r egress.RefusalInfo) {
	reason := m.core.Refused(r.Err)
	m.refusals.WithLabelValues(m.core.Keys.Label(r.Key), reason).Inc()
	if metriclabel.RefusedUnsent(r) {
		m.series.Get(metriclabel.RefusedKey(r.Request, r.Err)).Observe(r.Elapsed.Seconds())
	}
}

func (m *Metrics) retrying(r egress.RetryInfo) {
	m.retries.WithLabelValues(m.core.Keys.Label(r.Key), strconv.Itoa(r.StatusCode)).Inc()
}

func (m *Metrics) paused(p egress.PauseInfo) {
	key := m.core.Keys.Label(p.Key)
	if p.Err != nil {
		m.pauseFailures.WithLabelValues(key).Inc()
		return
	}
	m.pauses.WithLabelValues(key).Observe(p.Duration.Seconds())
}

func (m *Metrics) clamped(c egress.ClampInfo) {
	key := m.core.Keys.Label(c.Key)
	for _, f := range c.Fields {
		m.clamps.WithLabelValues(key, f).Inc()
	}
}

// RedisObserver returns a func for [redislimit.WithObserver] that counts
// failed calls to Redis, recoveries and settles dropped in m, and tracks
// whether Redis is failing, then passes each event on to next, if next is
// not nil. Give each redislimit Client a func of its own.
func (m *Metrics) RedisObserver(next func(redislimit.Event)) func(redislimit.Event) {
	return m.core.RedisObserver(next, m.redisErrors.Inc, m.redisRecover.Inc, func(n int) { m.redisDropped.Add(float64(n)) })
}

// RedisHook returns a go-redis hook that records each round trip to
// Redis in egress_redis_round_trip_duration_seconds: each command, and
// each pipeline, which is one round trip. Add it to the client that
// [redislimit.NewClient] is given (rdb.AddHook(m.RedisHook())); it counts
// every command on that client, egress's or not.
func (m *Metrics) RedisHook() redis.Hook {
	ok := m.redisTrips.WithLabelValues("")
	return metriclabel.RedisHook(func(_ context.Context, d time.Duration, err error) {
		o := ok
		if err != nil {
			o = m.redisTrips.WithLabelValues(metriclabel.ErrorType(err))
		}
		o.Observe(d.Seconds())
	})
}
