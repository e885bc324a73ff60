package redislimit

import (
	"fmt"
	"reflect"

	"github.com/redis/go-redis/v9"
)

// Part is implemented by the limiters of this package, so that [All] can
// book several limits on a key in one script.
type Part interface {
	part() *limiter
}

func (l *limiter) part() *limiter { return l }

// Composite is the limiter [All] returns: every part's limit on a key,
// booked together in one script.
type Composite struct {
	*limiter
}

// All returns a limiter that grants units only when every part grants
// them, at one common slot, in one script run: the check and the booking
// of every part are atomic, and a part that refuses leaves the others
// untouched. 20/s together with 10 000/day is
//
//	perSecond, _ := redislimit.NewTokenBucket(rdb, throttle.PerSecond(20), 20)
//	perDay, _ := redislimit.NewFixedWindow(rdb, 10_000, 24*time.Hour)
//	both, _ := redislimit.All(perSecond, perDay)
//
// Compare [throttle.All] over these limiters: it reserves them one by
// one, in separate round trips, and cancels the earlier ones when a later
// one refuses, so it is best effort where All is atomic.
//
// The parts must share one client and one prefix; the Composite uses the
// first part's client, options and listener. It implements
// [throttle.Limiter], [throttle.Pauser] and [throttle.Allower]; its Pause
// pauses the key for every part at once. Closing the parts closes it.
func All(parts ...Part) (*Composite, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("redislimit: All has no parts")
	}
	first := parts[0].part()
	var specs []spec
	for i, p := range parts {
		l := p.part()
		if !sameClient(l.c.rdb, first.c.rdb) {
			return nil, fmt.Errorf("redislimit: All's part %d uses another client than part 0", i)
		}
		if l.c.cfg.prefix != first.c.cfg.prefix {
			return nil, fmt.Errorf("redislimit: All's part %d has prefix %q, part 0 %q", i, l.c.cfg.prefix, first.c.cfg.prefix)
		}
		for _, s := range l.specs {
			if !hasSuffix(specs, s.suffix) {
				specs = append(specs, s)
			}
		}
	}
	return &Composite{limiter: newLimiter(first.c, specs...)}, nil
}

// sameClient compares two clients without panicking on a client type
// that is not comparable.
func sameClient(a, b redis.Scripter) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}

func hasSuffix(specs []spec, suffix string) bool {
	for _, s := range specs {
		if s.suffix == suffix {
			return true
		}
	}
	return false
}

// Close does nothing: the Composite shares its first part's client and
// listener, which that part's Close stops.
func (c *Composite) Close() error { return nil }
