package redislimit

import (
	"fmt"
	"reflect"

	"github.com/redis/go-redis/v9"
)

// Part is implemented by the limiters of this package, so that [All] can
// book several limits on a key in one script.
type Part interface {
	part() *budget
}

func (b *budget) part() *budget { return b }

// Composite is the limiter [All] returns: every part's limit on a key,
// booked together in one script.
type Composite struct {
	*budget
	partLimits [][]int // the limits of each of All's parts, for ReserveParts
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
// [throttle.All] over these limiters books them one by one, in separate
// round trips, at a common slot through [throttle.Deferrer]; All does it
// in one.
//
// The parts must share one redis client and prefix. The Composite runs
// on the first part's [Client] and failure policy. It implements
// [throttle.Limiter], [throttle.Deferrer], [throttle.Pauser],
// [throttle.Allower] and [throttle.Inspector]; its Pause pauses the key
// for every part at once.
func All(parts ...Part) (*Composite, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("redislimit: All has no parts")
	}
	for i, p := range parts {
		if v := reflect.ValueOf(p); p == nil || (v.Kind() == reflect.Pointer && v.IsNil()) {
			return nil, fmt.Errorf("redislimit: All's part %d is nil", i)
		}
	}
	first := parts[0].part()
	var limits []limit
	args := make([][]int, len(parts))
	for i, p := range parts {
		b := p.part()
		if !sameClient(b.client.rdb, first.client.rdb) {
			return nil, fmt.Errorf("redislimit: All's part %d uses another client than part 0", i)
		}
		if b.client.prefix != first.client.prefix {
			return nil, fmt.Errorf("redislimit: All's part %d has prefix %q, part 0 %q", i, b.client.prefix, first.client.prefix)
		}
		for _, l := range b.limits {
			j := indexOf(limits, l.suffix)
			if j < 0 {
				j = len(limits)
				limits = append(limits, l)
			}
			args[i] = append(args[i], j)
		}
	}
	c := &budget{client: first.client, limits: limits, most: limits[0].most, policy: first.policy, horizons: first.horizons}
	for _, l := range limits[1:] {
		c.most = min(c.most, l.most)
	}
	c.follow = newFollow(limits)
	return &Composite{budget: c, partLimits: args}, nil
}

// sameClient compares two clients without panicking on a client type
// that is not comparable.
func sameClient(a, b redis.Scripter) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}

// indexOf returns the index of the limit named suffix, or -1.
func indexOf(limits []limit, suffix string) int {
	for i, l := range limits {
		if l.suffix == suffix {
			return i
		}
	}
	return -1
}

// Close does nothing: a Composite owns no [Client]. It runs on its first
// part's, which that part's Close (or the Client's owner) closes.
func (c *Composite) Close() error { return nil }
