// Package nilcheck tells a nil interface value from a usable one.
package nilcheck

import "reflect"

// Is reports whether v is nil, or an interface holding a nil pointer,
// map, slice, func or chan: a nil *TokenBucket given as a Limiter is not
// == nil, and panicked on its first use.
func Is(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return rv.IsNil()
	}
	return false
}
