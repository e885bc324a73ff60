package egressotel

import (
	"context"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel/metric"

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
			m.retries.Add(context.Background(), 1, metric.WithAttributes(KeyAttr.String(m.keys.Label(r.Key)), statusAttr.Int(r.StatusCode)))
		},
		Paused: m.paused,
	}
	return own.Then(next)
}

func (m *Metrics) waited(w egress.WaitInfo) {
	key := metric.WithAttributes(KeyAttr.String(m.keys.Label(w.Key)))
	if w.Queue > 0 {
		m.queueWait.Record(context.Background(), w.Queue.Seconds(), key)
	}
	if w.Limiter > 0 {
		m.limiterWait.Record(context.Background(), w.Limiter.Seconds(), key)
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
	m.refusals.Add(context.Background(), 1, metric.WithAttributes(KeyAttr.String(m.keys.Label(r.Key)), ReasonAttr.String(reason)))
}

func (m *Metrics) paused(p egress.PauseInfo) {
	key := metric.WithAttributes(KeyAttr.String(m.keys.Label(p.Key)))
	if p.Err != nil {
		m.pauseFailures.Add(context.Background(), 1, key)
		return
	}
	m.pauses.Record(context.Background(), p.Duration.Seconds(), key)
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
			m.redisRecover.Add(context.Background(), 1)
			m.redisOpen.Store(false)
		case e.Err != nil:
			m.redisErrors.Add(context.Background(), 1)
			m.redisOpen.Store(true)
		}
		if next != nil {
			next(e)
		}
	}
}
