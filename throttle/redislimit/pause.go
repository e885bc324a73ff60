package redislimit

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// pauses is a process's view of the pause state of the keys it holds
// bookings on, fed by pub/sub and by script replies. Reading it is local,
// so Reservation.Wait follows a pause without a round trip.
//
// A key's pause state in Redis (see pause.lua, and pause-names.md for the
// words) has an epoch, the time it was created, and shifted, the total
// that pauses have moved the key's schedule, in microseconds. A booking
// records both when it is made, and its slot moves by however much
// shifted grows in the same epoch, plus the pushes of a fixed window that
// a pause laid out again (see fixedwindow.lua).
type pauses struct {
	now func() int64 // local monotonic nanoseconds

	// mu guards keys and sweepAt. A pauseState's epoch and shifted are
	// atomics, so that bookings read them without it.
	mu      sync.Mutex
	keys    map[string]*pauseState // pause key -> its current epoch
	sweepAt int
}

// pauseState is what one process knows of one epoch of one key's pause.
type pauseState struct {
	epoch   atomic.Int64 // 0 until the key's pause state exists
	shifted atomic.Int64 // microseconds
	due     atomic.Int64 // latest local due time of a booking, unshifted, ns

	// mu guards pushes, which are rare: only a pause that carries a fixed
	// window's units into a full window pushes any.
	mu     sync.Mutex
	pushes []push
}

// push is how far one pause moved one fixed window's bookings beyond its
// uniform shift: steps, by booking seq.
type push struct {
	suffix  string // the limit's key suffix
	shifted int64  // the key's shifted once the pause was applied
	steps   []pushStep
}

// pushStep: every booking from seq on moved extra microseconds further, until
// the next step.
type pushStep struct{ seq, extra int64 }

// minSweep is how many keys the view holds before it first sweeps.
const minSweep = 1024

func (p *pauses) init(now func() int64) {
	p.now = now
	p.keys = make(map[string]*pauseState)
	p.sweepAt = minSweep
}

// learn records that key's pause state is at (epoch, shifted). With track
// it returns the state a booking made under it follows, creating it if
// need be; otherwise it only updates a state already tracked.
func (p *pauses) learn(key string, epoch, shifted int64, track bool) *pauseState {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.keys[key]
	switch {
	case s == nil:
		if !track {
			return nil
		}
		s = p.add(key, epoch, shifted)
	case s.epoch.Load() == epoch:
		if shifted > s.shifted.Load() {
			s.shifted.Store(shifted)
		}
	case s.epoch.Load() == 0 && epoch > 0:
		// The key had no pause state when these bookings were made, so
		// every shift of its first epoch applies to them.
		s.epoch.Store(epoch)
		s.shifted.Store(max(s.shifted.Load(), shifted))
	case epoch > s.epoch.Load() || epoch == 0:
		// The state was recreated (or dropped): after an expiry, which
		// bookings outlive only once they are due, or a restart.
		s = p.add(key, epoch, shifted)
	default:
		// A stale report of an epoch already replaced.
		if !track {
			return nil
		}
		s = newPauseState(epoch, shifted)
	}
	return s
}

// hear reads "epoch shifted pausekey [suffix=seq:extra,...]...", as
// pause.lua publishes it and replies to a pause, and learns it.
func (p *pauses) hear(msg string) {
	f := messageFields(msg)
	if len(f) < 3 {
		return // not ours
	}
	epoch, err1 := strconv.ParseInt(f[0], 10, 64)
	shifted, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return
	}
	s := p.learn(messageKey(f[2]), epoch, shifted, false)
	if s == nil || s.epoch.Load() != epoch {
		return
	}
	for _, x := range f[3:] {
		if pu, ok := parsePush(x, shifted); ok {
			s.addPush(pu)
		}
	}
}

// parsePush reads "suffix=seq:extra,seq:extra".
func parsePush(x string, shifted int64) (push, bool) {
	suffix, list, ok := strings.Cut(x, "=")
	if !ok {
		return push{}, false
	}
	pu := push{suffix: suffix, shifted: shifted}
	for st := range strings.SplitSeq(list, ",") {
		a, b, ok := strings.Cut(st, ":")
		seq, err1 := strconv.ParseInt(a, 10, 64)
		extra, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return push{}, false
		}
		pu.steps = append(pu.steps, pushStep{seq, extra})
	}
	return pu, len(pu.steps) > 0
}

// addPush records pu once: the script may report one pause's pushes more
// than once (a part synced by a call that did not save it).
func (s *pauseState) addPush(pu push) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.ContainsFunc(s.pushes, func(q push) bool { return q.suffix == pu.suffix && q.shifted == pu.shifted }) {
		return
	}
	s.pushes = append(s.pushes, pu)
}

// extra returns how much further than the uniform shift pauses have
// pushed a booking made at shifted, whose fixed-window parts have the
// given seqs, in microseconds: the most of any of its parts.
func (s *pauseState) extra(shifted int64, seqs []partSeq) int64 {
	if len(seqs) == 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	most := int64(0)
	for _, ps := range seqs {
		sum := int64(0)
		for _, pu := range s.pushes {
			if pu.suffix != ps.suffix || pu.shifted <= shifted {
				continue
			}
			sum += pu.extraFor(ps.seq)
		}
		most = max(most, sum)
	}
	return most
}

// extraFor returns the push of the booking with seq.
func (pu push) extraFor(seq int64) int64 {
	e := int64(0)
	for _, st := range pu.steps {
		if st.seq > seq {
			break
		}
		e = st.extra
	}
	return e
}

// partSeq names a booking on one fixed-window part: the part's key
// suffix and the booking's seq there.
type partSeq struct {
	suffix string
	seq    int64
}

func newPauseState(epoch, shifted int64) *pauseState {
	s := &pauseState{}
	s.epoch.Store(epoch)
	s.shifted.Store(shifted)
	return s
}

// add starts tracking key. p.mu is held.
func (p *pauses) add(key string, epoch, shifted int64) *pauseState {
	if len(p.keys) >= p.sweepAt {
		p.sweep()
	}
	s := newPauseState(epoch, shifted)
	p.keys[key] = s
	return s
}

// sweep drops the keys whose bookings are all due: a pause can no longer
// move them, and a new booking starts tracking again. p.mu is held.
func (p *pauses) sweep() {
	now := p.now()
	for k, s := range p.keys {
		if s.due.Load()+s.shiftedNanos()+s.mostPushed() < now {
			delete(p.keys, k)
		}
	}
	p.sweepAt = max(minSweep, 2*len(p.keys))
}

// mostPushed bounds in nanoseconds how far pushes moved any booking.
func (s *pauseState) mostPushed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := int64(0)
	for _, pu := range s.pushes {
		sum += pu.steps[len(pu.steps)-1].extra
	}
	return sum * 1000
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

// shiftedNanos returns the total shift in nanoseconds.
func (s *pauseState) shiftedNanos() int64 { return s.shifted.Load() * 1000 }
