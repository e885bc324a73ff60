package egressprom

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/internal/metriclabel"
	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// Observer returns an [egress.Observer] that records attempts sent,
// waits, refusals, retries and pauses in m, then passes each event on to next's func of
// the same name, if next is not nil and has one. Funcs of next that m
// does not record are kept as they are. Install it with
// [egress.WithObserver]; to keep a program's own Observer, pass it as
// next:
//
//	egress.WithObserver(m.Observer(&egress.Observer{Paused: alert}))
func (m *Metrics) Observer(next *egress.Observer) *egress.Observer {
	own := &egress.Observer{
		Waited:  m.waited,
		Refused: m.refused,
		Sent:    m.sent,
		Retrying: func(r egress.RetryInfo) {
			m.retries.WithLabelValues(m.keys.Label(r.Key), strconv.Itoa(r.StatusCode)).Inc()
		},
		Paused: m.paused,
	}
	return own.Then(next)
}

func (m *Metrics) waited(w egress.WaitInfo) {
	key := m.keys.Label(w.Key)
	if w.Queue > 0 {
		m.queueWait.WithLabelValues(key).Observe(w.Queue.Seconds())
	}
	if w.Limiter > 0 {
		m.limiterWait.WithLabelValues(key).Observe(w.Limiter.Seconds())
	}
}

func (m *Metrics) refused(r egress.RefusalInfo) {
	reason := metriclabel.RefusalReason(r.Err)
	switch reason {
	case metriclabel.ReasonQueueFull:
		m.refusedFull.Add(1)
	case metriclabel.ReasonLimit:
		m.refusedLimit.Add(1)
	case metriclabel.ReasonTimeout:
		m.timeouts.Add(1)
	default:
		m.limiterErrors.Add(1)
	}
	m.refusals.WithLabelValues(m.keys.Label(r.Key), reason).Inc()
}

func (m *Metrics) paused(p egress.PauseInfo) {
	key := m.keys.Label(p.Key)
	if p.Err != nil {
		m.pauseFailures.WithLabelValues(key).Inc()
		return
	}
	m.pauses.WithLabelValues(key).Observe(p.Duration.Seconds())
}

// ended counts a request that failed because its own context ended
// before a response came. Refusals are not counted here: the Observer
// counts them.
func (m *Metrics) ended(req *http.Request, err error) {
	var le *throttle.LimitError
	if errors.As(err, &le) || errors.Is(err, queue.ErrFull) {
		return
	}
	switch ctxErr := req.Context().Err(); {
	case errors.Is(ctxErr, context.Canceled):
		m.canceled.Add(1)
	case errors.Is(ctxErr, context.DeadlineExceeded):
		m.timeouts.Add(1)
	}
}

// RedisObserver returns a func for [redislimit.WithObserver] that counts
// failed calls to Redis and recoveries in m and tracks whether Redis is
// failing, then passes each event on to next, if next is not nil.
func (m *Metrics) RedisObserver(next func(redislimit.Event)) func(redislimit.Event) {
	return func(e redislimit.Event) {
		switch {
		case e.Recovered:
			m.redisRecover.Inc()
			m.redisOpen.Set(0)
		case e.Err != nil:
			m.redisErrors.Inc()
			m.redisOpen.Set(1)
		}
		if next != nil {
			next(e)
		}
	}
}
