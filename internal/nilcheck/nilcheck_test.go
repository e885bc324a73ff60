package nilcheck

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestIs(t *testing.T) {
	var p *int
	var f func()
	var m map[string]int
	var s value
	assert.True(t, Is(nil))
	assert.True(t, Is(p))
	assert.True(t, Is(f))
	assert.True(t, Is(m))
	assert.False(t, Is(new(int)))
	assert.False(t, Is(0))
	assert.False(t, Is(s))
}

type value struct{}
