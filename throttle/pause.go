package throttle

// pauseState is one key's pause: how far pauses have moved its schedule.
// A pause moves every unit still ahead of now (slot > now), and every
// new booking, later by by = end - max(until, now), so that nothing is
// due before end; a pause that ends no later than the current one moves
// nothing, so pauses never compound. A unit due by now is spent and
// stays where it is. redislimit keeps the same fields, with the same
// names, in its pause hash (see pause-names.md in the notes).
//
// A booking records shifted as it was when it was made; it has moved by
// the difference since, unless it was already due when a pause began.
// Only the latest pause's start is kept (since, with prior), which is
// enough: a booking that was due before an earlier pause is due now too,
// and its exact slot no longer matters.
type pauseState struct {
	until   int64 // end of the current pause: nothing of the key is due before it
	shifted int64 // how far pauses have moved the schedule in all
	since   int64 // when the latest pause that moved anything began
	prior   int64 // shifted as it was before that pause
}

// start pauses until end at now and returns how far it moves the units
// ahead: 0 when the key is already paused until end or later.
func (p *pauseState) start(now, end int64) (by int64) {
	if end <= p.until {
		return 0 // pauses do not compound
	}
	by = end - max(p.until, now)
	p.until = end
	p.prior, p.since = p.shifted, now
	p.shifted += by
	return by
}

// moved returns where a unit booked at slot, when the key's shift was
// shifted, lies now, by the uniform shift alone. A unit that was already
// due when the latest pause began keeps the slot it had then.
func (p *pauseState) moved(slot, shifted int64) int64 {
	if shifted <= p.prior {
		if before := slot + p.prior - shifted; before <= p.since {
			return before
		}
	}
	return slot + p.shifted - shifted
}
