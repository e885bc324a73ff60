package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWrapLabel(t *testing.T) {
	tests := []struct {
		give  string
		width int
		want  string
	}{
		{give: "egress (README)", width: 24, want: "egress (README)"},
		{give: "egress (adaptive, redislimit, 4 processes)", width: 24, want: "egress (adaptive,\nredislimit, 4 processes)"},
		{give: "averyveryverylongwordthatdoesnotfit x", width: 10, want: "averyveryverylongwordthatdoesnotfit\nx"},
		{give: "", width: 10, want: ""},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, wrapLabel(tt.give, tt.width), tt.give)
	}
}
