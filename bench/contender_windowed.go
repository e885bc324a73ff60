package main

// windowContenders lists egress's windowed algorithms for scenario 4.
// The window algorithms have not landed in package throttle yet; scenario
// 4 prints a note for each contender it cannot find.
func windowContenders() map[string]builder {
	return map[string]builder{}
}
