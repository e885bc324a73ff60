package throttle

import (
	"sync"
	"sync/atomic"
)

// keymap maps keys to their state, tuned for what a limiter does: look up
// the same keys over and over, and add or drop one now and then.
//
// Known keys are found in read, a [keytable] that is never written once
// published, so a lookup takes no lock and writes nothing shared. New
// keys go to dirty under mu; dirty, when not nil, holds every key. Once
// lookups have missed read as many times as dirty holds keys, dirty is
// published as the new read: copying the keys into dirty again later
// costs no more than those misses did. It is sync.Map's classic design
// with string keys, which hash and compare without going through an
// interface.
type keymap[V any] struct {
	read   atomic.Pointer[keytable[V]]
	mu     sync.Mutex
	dirty  map[string]*V
	misses int
}

// load returns key's value. Unless fresh is set it looks in read first;
// fresh asks for the latest answer, for a caller that found read's stale.
func (m *keymap[V]) load(key string, fresh bool) (*V, bool) {
	if !fresh {
		if v, ok := m.read.Load().get(key); ok {
			return v, true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.latest(key)
	m.missed()
	return v, ok
}

// loadOrStore returns key's value, storing v first if key has none. It
// reports whether the value was already there.
func (m *keymap[V]) loadOrStore(key string, v *V) (*V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.latest(key); ok {
		return old, true
	}
	m.writable()[key] = v
	return v, false
}

// snapshot returns every key and value as of now.
func (m *keymap[V]) snapshot() *keytable[V] {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.publish()
	return m.read.Load()
}

// drop deletes key. Lookups that ask for fresh answers miss it at once;
// read forgets it at the next publish.
func (m *keymap[V]) drop(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.writable(), key)
}

// settle publishes what changed, so that read answers it again.
func (m *keymap[V]) settle() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.publish()
}

// latest looks key up in dirty, which holds every key when it exists,
// else in read. m.mu is held.
func (m *keymap[V]) latest(key string) (*V, bool) {
	if m.dirty != nil {
		v, ok := m.dirty[key]
		return v, ok
	}
	return m.read.Load().get(key)
}

// writable returns dirty, first copying read into it if there is none.
// m.mu is held.
func (m *keymap[V]) writable() map[string]*V {
	if m.dirty == nil {
		t := m.read.Load()
		m.dirty = make(map[string]*V, t.len()+1)
		for k, v := range t.all() {
			m.dirty[k] = v
		}
	}
	return m.dirty
}

// missed counts a lookup that read could not answer, and publishes dirty
// once the misses have paid for copying it. m.mu is held.
func (m *keymap[V]) missed() {
	m.misses++
	if m.dirty != nil && m.misses >= len(m.dirty) {
		m.publish()
	}
}

// publish makes dirty the new read. m.mu is held.
func (m *keymap[V]) publish() {
	if m.dirty == nil {
		return
	}
	m.read.Store(newKeytable(m.dirty))
	m.dirty, m.misses = nil, 0
}
