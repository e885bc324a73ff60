package redislimit

import (
	"sync"
	"sync/atomic"
	"time"
)

// pauses is a process's view of the pause state of the keys it holds
// bookings on, fed by pub/sub and by script replies. Reading it is local,
// so Reservation.Wait can follow a pause without a round trip.
type pauses struct {
	start time.Time // local monotonic origin

	// mu guards lines and sweepAt; a line's fields are atomics, so that
	// bookings read them without it.
	mu      sync.Mutex
	lines   map[string]*line // pause key -> its current epoch
	sweepAt int
}

// line is what one process knows of one epoch of one key's pause state:
// the total shift, in microseconds, that pauses have applied in it.
type line struct {
	epoch atomic.Int64 // 0 until the key's pause state exists
	moved atomic.Int64
	due   atomic.Int64 // latest local due time of a booking, unshifted
}

const minSweep = 1024

func (p *pauses) init() {
	p.start = time.Now()
	p.lines = make(map[string]*line)
	p.sweepAt = minSweep
}

// now returns the local monotonic time in nanoseconds.
func (p *pauses) now() int64 { return int64(time.Since(p.start)) }

// learn records that key's pause state is at (epoch, moved). With track
// it returns the line a booking made under that state follows, creating
// it if need be; otherwise it only updates a line already tracked.
func (p *pauses) learn(key string, epoch, moved int64, track bool) *line {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lines[key]
	switch {
	case l == nil:
		if !track {
			return nil
		}
		l = p.add(key, epoch, moved)
	case l.epoch.Load() == epoch:
		if moved > l.moved.Load() {
			l.moved.Store(moved)
		}
	case l.epoch.Load() == 0 && epoch > 0:
		// The key had no pause state when these bookings were made, so
		// every shift of its first epoch applies to them.
		l.epoch.Store(epoch)
		l.moved.Store(max(l.moved.Load(), moved))
	case epoch > l.epoch.Load() || epoch == 0:
		// The state was recreated (or dropped): after an expiry, which
		// bookings outlive only once they are due, or a restart.
		l = p.add(key, epoch, moved)
	default:
		// A stale report of an epoch already replaced.
		if !track {
			return nil
		}
		l = &line{}
		l.epoch.Store(epoch)
		l.moved.Store(moved)
	}
	return l
}

// add starts tracking a line for key. p.mu is held.
func (p *pauses) add(key string, epoch, moved int64) *line {
	if len(p.lines) >= p.sweepAt {
		p.sweep()
	}
	l := &line{}
	l.epoch.Store(epoch)
	l.moved.Store(moved)
	p.lines[key] = l
	return l
}

// sweep drops the lines whose bookings are all due: a pause can no
// longer move them, and a new booking starts a new line. p.mu is held.
func (p *pauses) sweep() {
	now := p.now()
	for k, l := range p.lines {
		if l.due.Load()+l.moved.Load()*int64(time.Microsecond) < now {
			delete(p.lines, k)
		}
	}
	p.sweepAt = max(minSweep, 2*len(p.lines))
}

// hold records a booking on l that is due at base plus l's shift.
func (l *line) hold(base int64) {
	for {
		d := l.due.Load()
		if base <= d || l.due.CompareAndSwap(d, base) {
			return
		}
	}
}

// shift returns l's total shift in nanoseconds.
func (l *line) shift() int64 { return l.moved.Load() * int64(time.Microsecond) }
