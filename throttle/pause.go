package throttle

// pauseState is one key's pause: how far pauses have moved its schedule.
// A pause moves every unit still ahead of now (slot > now), and every
// new booking, later by by = end - max(until, now), so that nothing is
// due before end; a pause that ends no later than the current one moves
// nothing, so pauses never compound. A unit due by now is spent and
// stays where it is. redislimit keeps the same fields, with the same
// names, in its pause hash (see pause-names.md in the notes).
//
// A booking records shifted as it was when it was made. It has moved by
// the difference since, unless a pause found it due, after which it
// never moves again. marks tells which: see moved.
type pauseState struct {
	until   int64 // end of the current pause: nothing of the key is due before it
	shifted int64 // how far pauses have moved the schedule in all
	marks   []pauseMark
}

// pauseMark is one pause that moved something: it began at since, when
// the schedule had moved by prior. A booking made when the schedule had
// moved by s, at slot, was ahead at that pause, if it was ahead at every
// pause before, when slot-s > since-prior: its slot in the schedule's
// own terms lay after the pause's start.
//
// marks keeps the pauses oldest first, so prior rises along it. A pause
// is kept even when a later one saw ahead every booking it saw ahead: a
// booking that the earlier one found due stays where that one found it
// (u + its prior), which the later one cannot tell (u + a larger prior
// would put it later than it was sent, and a settle in the wrong window).
// maxMarks bounds it.
type pauseMark struct {
	since int64 // when the pause began
	prior int64 // shifted as it was before it
}

// maxMarks bounds marks. Past it the oldest mark goes: a booking made
// before the oldest remaining mark and found due by the dropped one
// would then be taken for one still ahead.
const maxMarks = 16

// start pauses until end at now and returns how far it moves the units
// ahead: 0 when it moves nothing.
func (p *pauseState) start(now, end int64) (by int64) {
	if end <= p.until {
		return 0 // pauses do not compound
	}
	by = end - max(p.until, now)
	p.until = end
	if by == 0 {
		return 0
	}
	m := pauseMark{since: now, prior: p.shifted}
	if len(p.marks) == maxMarks {
		p.marks = append(p.marks[:0], p.marks[1:]...)
	}
	p.marks = append(p.marks, m)
	p.shifted += by
	return by
}

// start returns where the pause began, in the schedule's own terms.
func (m pauseMark) start() int64 { return m.since - m.prior }

// moved returns where a unit booked at slot, when the schedule had moved
// by shifted, lies now: the first pause after the booking that found it
// due left it where it was then, and a unit no pause found due moved by
// every pause since.
func (p *pauseState) moved(slot, shifted int64) int64 {
	u := slot - shifted
	for _, m := range p.marks {
		if m.prior >= shifted && u <= m.start() {
			return u + m.prior
		}
	}
	return u + p.shifted
}
