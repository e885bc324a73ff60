// Package micro holds the micro-benchmarks of egress's hot paths, each
// beside its peer from another library, so that one `go test -bench` run
// compares them on the same machine. Sub-benchmark names carry the peer
// as lib=..., so benchstat can put them side by side (see bench/README.md).
package micro
