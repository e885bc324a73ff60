//go:build !adaptive

package main

// adaptiveContenders is empty until throttle.NewAdaptive has landed: the
// scenarios that list "egress (adaptive)" then say it was skipped. Build
// with -tags adaptive on a tree that has it (see contender_adaptive.go).
func adaptiveContenders() map[string]builder { return nil }
