package redislimit

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// channelSuffix follows the prefix in the name of the pause channel.
const channelSuffix = "pause"

// subscriber is the optional interface through which a Listener
// subscribes. redis.Scripter lacks it, but every go-redis client has it.
type subscriber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// Listener follows the pauses of every key on one client, so that a
// caller asleep until its slot wakes later when a worker in any process
// pauses the key. It holds one pub/sub subscription, on the channel
// prefix+"pause", and also learns from every script reply, so a lost
// message is made up for by the next reply on the key.
//
// When the client has no Subscribe method, a Listener learns only from
// replies: a caller already asleep in this process follows a pause made
// in another process only if this process calls Redis for the key again
// before the caller wakes.
//
// Each limiter starts its own Listener unless [WithListener] hands it a
// shared one. A Listener is safe for concurrent use; Close stops it.
type Listener struct {
	channel string
	pauses  pauses

	ps   *redis.PubSub // nil without Subscribe
	done chan struct{}
	once sync.Once
}

// NewListener starts a Listener on rdb's pause channel for the prefix
// that opts set. Pass it to limiters on rdb with [WithListener], and
// Close it after them.
func NewListener(rdb redis.Scripter, opts ...Option) (*Listener, error) {
	cfg, err := newConfig(rdb, opts)
	if err != nil {
		return nil, err
	}
	return newListener(rdb, cfg), nil
}

func newListener(rdb redis.Scripter, cfg config) *Listener {
	l := &Listener{channel: cfg.prefix + channelSuffix, done: make(chan struct{})}
	l.pauses.init()
	sub, ok := rdb.(subscriber)
	if !ok {
		close(l.done)
		return l
	}
	ctx, stop := context.WithTimeout(context.Background(), cfg.timeout)
	defer stop()
	l.ps = sub.Subscribe(ctx, l.channel)
	// Wait for the confirmation, so that pauses published once the
	// constructor returns are heard. When Redis is away, go on: the
	// subscription is made when it comes back.
	_, _ = l.ps.Receive(ctx)
	go l.loop(l.ps.Channel())
	return l
}

func (l *Listener) loop(ch <-chan *redis.Message) {
	defer close(l.done)
	for m := range ch {
		l.pauses.message(m.Payload)
	}
}

// Close ends the subscription and waits for its goroutine. It is
// idempotent.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		if l.ps != nil {
			err = l.ps.Close()
		}
		<-l.done
	})
	return err
}

// message reads "epoch moved key", as budget.lua publishes it.
func (p *pauses) message(payload string) {
	e, rest, ok1 := strings.Cut(payload, " ")
	m, key, ok2 := strings.Cut(rest, " ")
	epoch, err1 := strconv.ParseInt(e, 10, 64)
	moved, err2 := strconv.ParseInt(m, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		return // not ours
	}
	p.learn(key, epoch, moved, false)
}
