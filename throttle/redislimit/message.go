package redislimit

import "strings"

// messageFields splits a message a script published on the Client's
// channel (pause.lua, adaptive.lua) into its fields: single spaces
// separate them, and a key's '%' and ' ' are written %25 and %20
// (message.lua), which [messageKey] reads back. A caller's key may hold
// any byte: one drawn from an Authorization header holds a space.
func messageFields(msg string) []string { return strings.Split(msg, " ") }

// messageKey reads back a key message.lua wrote as a field.
func messageKey(field string) string { return keyUnescaper.Replace(field) }

var keyUnescaper = strings.NewReplacer("%20", " ", "%25", "%")
