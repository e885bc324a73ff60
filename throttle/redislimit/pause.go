package redislimit

import (
	"sync"
	"sync/atomic"
)

// pauses is a process's view of the pause state of the keys it holds
// bookings on, fed by pub/sub and by script replies. Reading it is local,
// so Reservation.Wait follows a pause without a round trip.
//
// A key's pause state in Redis (see pause.lua) has an epoch, the time it
// was created, and a shift, the total that pauses have moved the key's
// schedule, in microseconds. A booking records both when it is made, and
// its slot moves by however much the shift grows in the same epoch.
type pauses struct {
	now func() int64 // local monotonic nanoseconds

	// mu guards keys and sweepAt. A pauseState's fields are atomics, so
	// that bookings read them without it.
	mu      sync.Mutex
	keys    map[string]*pauseState // pause key -> its current epoch
	sweepAt int
}

// pauseState is what one process knows of one epoch of one key's pause.
type pauseState struct {
	epoch atomic.Int64 // 0 until the key's pause state exists
	shift atomic.Int64 // microseconds
	due   atomic.Int64 // latest local due time of a booking, unshifted, ns
}

// minSweep is how many keys the view holds before it first sweeps.
const minSweep = 1024

func (p *pauses) init(now func() int64) {
	p.now = now
	p.keys = make(map[string]*pauseState)
	p.sweepAt = minSweep
}

// learn records that key's pause state is at (epoch, shift). With track
// it returns the state a booking made under it follows, creating it if
// need be; otherwise it only updates a state already tracked.
func (p *pauses) learn(key string, epoch, shift int64, track bool) *pauseState {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.keys[key]
	switch {
	case s == nil:
		if !track {
			return nil
		}
		s = p.add(key, epoch, shift)
	case s.epoch.Load() == epoch:
		if shift > s.shift.Load() {
			s.shift.Store(shift)
		}
	case s.epoch.Load() == 0 && epoch > 0:
		// The key had no pause state when these bookings were made, so
		// every shift of its first epoch applies to them.
		s.epoch.Store(epoch)
		s.shift.Store(max(s.shift.Load(), shift))
	case epoch > s.epoch.Load() || epoch == 0:
		// The state was recreated (or dropped): after an expiry, which
		// bookings outlive only once they are due, or a restart.
		s = p.add(key, epoch, shift)
	default:
		// A stale report of an epoch already replaced.
		if !track {
			return nil
		}
		s = newPauseState(epoch, shift)
	}
	return s
}

func newPauseState(epoch, shift int64) *pauseState {
	s := &pauseState{}
	s.epoch.Store(epoch)
	s.shift.Store(shift)
	return s
}

// add starts tracking key. p.mu is held.
func (p *pauses) add(key string, epoch, shift int64) *pauseState {
	if len(p.keys) >= p.sweepAt {
		p.sweep()
	}
	s := newPauseState(epoch, shift)
	p.keys[key] = s
	return s
}

// sweep drops the keys whose bookings are all due: a pause can no longer
// move them, and a new booking starts tracking again. p.mu is held.
func (p *pauses) sweep() {
	now := p.now()
	for k, s := range p.keys {
		if s.due.Load()+s.shiftNanos() < now {
			delete(p.keys, k)
		}
	}
	p.sweepAt = max(minSweep, 2*len(p.keys))
}

// hold records a booking that is due at base plus the state's shift.
func (s *pauseState) hold(base int64) {
	for {
		d := s.due.Load()
		if base <= d || s.due.CompareAndSwap(d, base) {
			return
		}
	}
}

// shiftNanos returns the total shift in nanoseconds.
func (s *pauseState) shiftNanos() int64 { return s.shift.Load() * 1000 }
