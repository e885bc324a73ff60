package throttle

import (
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeymap(t *testing.T) {
	var m keymap[int]
	_, ok := m.load("a", false)
	assert.False(t, ok, "empty")

	one, two := new(int), new(int)
	got, loaded := m.loadOrStore("a", one)
	assert.False(t, loaded)
	assert.Same(t, one, got)
	got, loaded = m.loadOrStore("a", two)
	assert.True(t, loaded, "the first value stays")
	assert.Same(t, one, got)

	// A miss on read publishes dirty, and read answers from then on.
	got, ok = m.load("a", false)
	require.True(t, ok)
	assert.Same(t, one, got)
	require.NotNil(t, m.read.Load())
	assert.Nil(t, m.dirty, "published")
	v, ok := m.read.Load().get("a")
	assert.True(t, ok)
	assert.Same(t, one, v)

	m.loadOrStore("b", two)
	assert.Equal(t, 2, m.snapshot().len())

	m.drop("a")
	_, ok = m.load("a", true)
	assert.False(t, ok, "a fresh lookup misses a dropped key at once")
	m.settle()
	_, ok = m.load("a", false)
	assert.False(t, ok, "dropped keys leave read once settled")
	got, ok = m.load("b", true)
	require.True(t, ok)
	assert.Same(t, two, got)
}

// TestKeymapConcurrent races lookups, inserts and deletes: every key
// stored and not deleted is found, with the value first stored.
func TestKeymapConcurrent(t *testing.T) {
	var m keymap[int]
	const keys = 2000
	vals := make([]*int, keys)
	for i := range vals {
		vals[i] = new(int)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range keys {
				k := (i*7 + g*131) % keys
				got, _ := m.loadOrStore(strconv.Itoa(k), vals[k])
				assert.Same(t, vals[k], got)
				got, ok := m.load(strconv.Itoa(k), false)
				assert.True(t, ok)
				assert.Same(t, vals[k], got)
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			_ = m.snapshot().len()
		}
	})
	wg.Wait()
	assert.Equal(t, keys, m.snapshot().len())

	for k := range keys / 2 {
		m.drop(strconv.Itoa(k))
	}
	m.settle()
	for k := range keys {
		_, ok := m.load(strconv.Itoa(k), false)
		assert.Equal(t, k >= keys/2, ok, "key %d", k)
	}
}

func TestKeytable(t *testing.T) {
	var none *keytable[int]
	_, ok := none.get("a")
	assert.False(t, ok, "a nil table holds nothing")
	assert.Zero(t, none.len())
	for range none.all() {
		t.Fatal("a nil table yields nothing")
	}

	for _, n := range []int{0, 1, 5, 6, 7, 100, 5000} {
		m := make(map[string]*int, n)
		for i := range n {
			m[strconv.Itoa(i)] = new(int)
		}
		tab := newKeytable(m)
		assert.Equal(t, n, tab.len())
		assert.LessOrEqual(t, 3*n, 2*len(tab.slots), "at most two thirds full")
		for k, v := range m {
			got, ok := tab.get(k)
			require.True(t, ok, "key %q of %d", k, n)
			assert.Same(t, v, got)
		}
		for i := n; i < n+200; i++ {
			_, ok := tab.get(strconv.Itoa(i))
			assert.False(t, ok, "key %d of %d", i, n)
		}
		seen := map[string]bool{}
		for k, v := range tab.all() {
			assert.False(t, seen[k], "yielded twice: %q", k)
			seen[k] = true
			assert.Same(t, m[k], v)
		}
		assert.Len(t, seen, n)
	}
}
