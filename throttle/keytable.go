package throttle

import (
	"hash/maphash"
	"iter"
)

// keytable is the form in which keymap publishes its keys: a hash table
// with open addressing, built once and never written again, so that
// lookups need no lock.
//
// It exists to touch fewer cache lines than a Go map on a limiter with
// many keys. A map lookup reads a group's control word and then the slot
// it points to, two lines; here a slot holds its key's hash next to the
// key, and at most two thirds of the slots are taken, so a lookup
// usually reads one line. The price is memory: 32 bytes a slot, 48 to 96
// bytes a key.
type keytable[V any] struct {
	seed  maphash.Seed
	mask  uint64 // len(slots)-1; len(slots) is a power of two
	slots []keyslot[V]
	n     int // keys held
}

type keyslot[V any] struct {
	hash uint64 // the key's hash with its top bit set; 0 marks a free slot
	key  string
	v    *V
}

// newKeytable returns a table holding m's keys, hashed with a seed of its
// own.
func newKeytable[V any](m map[string]*V) *keytable[V] {
	size := 8
	for size < len(m)+len(m)/2 {
		size *= 2
	}
	t := &keytable[V]{seed: maphash.MakeSeed(), mask: uint64(size - 1), slots: make([]keyslot[V], size), n: len(m)}
	for k, v := range m {
		h := t.hash(k)
		i := h & t.mask
		for t.slots[i].hash != 0 {
			i = (i + 1) & t.mask
		}
		t.slots[i] = keyslot[V]{hash: h, key: k, v: v}
	}
	return t
}

func (t *keytable[V]) hash(key string) uint64 { return maphash.String(t.seed, key) | 1<<63 }

// get returns key's value. A nil table holds nothing.
func (t *keytable[V]) get(key string) (*V, bool) {
	if t == nil {
		return nil, false
	}
	h := t.hash(key)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.hash == h && s.key == key {
			return s.v, true
		}
		if s.hash == 0 {
			return nil, false
		}
	}
}

// all yields every key and value. A nil table holds nothing.
func (t *keytable[V]) all() iter.Seq2[string, *V] {
	return func(yield func(string, *V) bool) {
		if t == nil {
			return
		}
		for _, s := range t.slots {
			if s.hash != 0 && !yield(s.key, s.v) {
				return
			}
		}
	}
}

// len returns how many keys t holds.
func (t *keytable[V]) len() int {
	if t == nil {
		return 0
	}
	return t.n
}
