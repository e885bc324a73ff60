package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// microCount is how many times each micro-benchmark runs; the table shows
// medians, and the ratios are medians of each pass's own ratio.
const microCount = 8

// microFile keeps the raw `go test -bench` output beside RESULTS.md, for
// benchstat.
const microFile = "micro.txt"

// microResults holds the medians of the micro-benchmarks, by benchmark
// name without its lib= part, then lib.
type microResults struct {
	order  []string
	groups map[string]map[string]microStat
	libs   map[string][]string
	passes map[string]map[string][]microStat // every pass's figures, in pass order
}

// microStat is one benchmark's figures. vsPeer and vsOne are
// BenchmarkAllowPaired's ratios (egress on 1 key over x/time/rate, egress
// on 10 000 keys over 1 key), measured in turns a fraction of a
// millisecond apart.
type microStat struct{ ns, bytes, allocs, perKey, roundTrips, vsPeer, vsOne float64 }

// get returns the medians of lib in group; zero when it did not run.
func (m *microResults) get(group, lib string) microStat { return m.groups[group][lib] }

// runMicro runs the micro-benchmarks in ./micro and parses their output.
// It makes microCount passes over every benchmark rather than using
// -count, which repeats each one back to back: this machine's speed drifts
// over minutes, and interleaving lets the drift fall on egress and its
// peers alike.
func runMicro(dir string) (*microResults, error) {
	var out []byte
	for range microCount {
		cmd := exec.Command("go", "test", "-run", "^$", "-bench", ".", "-benchmem", "-count", "1", "./micro")
		cmd.Stderr = os.Stderr
		pass, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go test -bench: %w\n%s", err, pass)
		}
		out = append(out, pass...)
	}
	if err := os.WriteFile(filepath.Join(dir, microFile), out, 0o644); err != nil {
		return nil, err
	}
	return parseMicro(string(out)), nil
}

func parseMicro(out string) *microResults {
	samples := map[string]map[string][]microStat{}
	m := &microResults{groups: map[string]map[string]microStat{}, libs: map[string][]string{}, passes: samples}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i] // the GOMAXPROCS suffix
		}
		group, lib, ok := strings.Cut(name, "/lib=")
		if !ok {
			// An interleaved run (metrictest.Interleaved): its ns/op and
			// added-allocs/op are what its RoundTripper adds to the
			// other's, kept as lib "overhead=<what>".
			if group, lib, ok = strings.Cut(name, "/overhead="); !ok {
				continue
			}
			lib = "overhead=" + lib
		}
		var st microStat
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				st.ns = v
			case "B/op":
				st.bytes = v
			case "allocs/op":
				if !strings.HasPrefix(lib, "overhead=") {
					st.allocs = v
				}
			case "added-allocs/op":
				st.allocs = v
			case "B/key":
				st.perKey = v
			case "roundtrips/op":
				st.roundTrips = v
			case "x/time/rate":
				st.vsPeer = v
			case "keys/1":
				st.vsOne = v
			}
		}
		if samples[group] == nil {
			samples[group] = map[string][]microStat{}
			m.order = append(m.order, group)
		}
		if samples[group][lib] == nil {
			m.libs[group] = append(m.libs[group], lib)
		}
		samples[group][lib] = append(samples[group][lib], st)
	}
	for g, libs := range samples {
		m.groups[g] = map[string]microStat{}
		for lib, ss := range libs {
			m.groups[g][lib] = microStat{
				ns:         median(ss, func(s microStat) float64 { return s.ns }),
				bytes:      median(ss, func(s microStat) float64 { return s.bytes }),
				allocs:     median(ss, func(s microStat) float64 { return s.allocs }),
				perKey:     median(ss, func(s microStat) float64 { return s.perKey }),
				roundTrips: median(ss, func(s microStat) float64 { return s.roundTrips }),
				vsPeer:     median(ss, func(s microStat) float64 { return s.vsPeer }),
				vsOne:      median(ss, func(s microStat) float64 { return s.vsOne }),
			}
		}
	}
	return m
}

func median(ss []microStat, get func(microStat) float64) float64 {
	vs := make([]float64, len(ss))
	for i, s := range ss {
		vs[i] = get(s)
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}

// ratio returns the median, over the passes, of lib's time in group over
// ref's in refGroup. Each pass measures both within seconds of each
// other, so a drift of the machine's speed over minutes, or a busy
// stretch, falls on both sides of that pass's ratio; a ratio of medians
// would divide figures taken at different times. When a benchmark is
// missing from some pass the passes cannot be paired, and it falls back
// to the ratio of the medians.
func (m *microResults) ratio(group, lib, refGroup, ref string) (float64, bool) {
	a, b := m.passes[group][lib], m.passes[refGroup][ref]
	if len(a) == 0 || len(b) == 0 {
		return 0, false
	}
	if len(a) != len(b) {
		num, den := m.get(group, lib).ns, m.get(refGroup, ref).ns
		return num / den, den > 0
	}
	rs := make([]float64, 0, len(a))
	for i := range a {
		if b[i].ns > 0 {
			rs = append(rs, a[i].ns/b[i].ns)
		}
	}
	if len(rs) == 0 {
		return 0, false
	}
	slices.Sort(rs)
	return rs[len(rs)/2], true
}

// reference is the peer each group's ratios are taken against.
func (m *microResults) reference(group string) string {
	for _, want := range []string{"x-time-rate", "bare-base", "bare-http.Client", "redis_rate"} {
		if _, ok := m.groups[group][want]; ok {
			return want
		}
	}
	return ""
}

func (m *microResults) write(p func(string, ...any)) {
	p("## Micro-benchmarks\n\n")
	p("%d passes of `go test -run '^$' -bench . -benchmem -count 1 ./micro`, interleaved so that the machine's drift falls on every library alike; medians of the %d runs. The raw output is in [%s](%s) for benchstat (see README.md). ", microCount, microCount, microFile, microFile)
	p("The ratio is against the peer named in the group's first line (x/time/rate where it takes part): the median of each pass's own ratio, which pairs figures taken seconds apart. Peers without keys are measured on their single limiter.\n\n")
	for _, g := range m.order {
		ref := m.reference(g)
		p("**%s** (ratio against %s)\n\n| lib | time/op (ns unless marked) | ratio | B/op | allocs/op |", g, refName(ref))
		perKey := m.groups[g][m.libs[g][0]].perKey > 0
		if perKey {
			p(" B/key |")
		}
		p("\n|---|---:|---:|---:|---:|")
		if perKey {
			p("---:|")
		}
		p("\n")
		for _, lib := range m.libs[g] {
			st := m.groups[g][lib]
			ratio := "—"
			if strings.HasPrefix(lib, "overhead=") {
				// time and allocations added to the other's, interleaved
				p("| %s | +%s | — | — | +%.0f |\n", lib, fmtNs(st.ns), st.allocs)
				continue
			}
			if st.vsPeer > 0 {
				ratio = fmt.Sprintf("%.2f× x/time/rate, %.2f× keys/1", st.vsPeer, st.vsOne)
			}
			if x, ok := m.ratio(g, lib, g, ref); ok {
				ratio = fmt.Sprintf("%.2f×", x)
				if r := m.groups[g][ref]; perKey && r.perKey > 0 {
					ratio = fmt.Sprintf("%.2f× (memory)", st.perKey/r.perKey)
				}
			}
			p("| %s | %s | %s | %.0f | %.0f |", lib, fmtNs(st.ns), ratio, st.bytes, st.allocs)
			if perKey {
				p(" %.1f |", st.perKey)
			}
			p("\n")
		}
		p("\n")
	}
}

// fmtNs formats nanoseconds per operation for reading.
func fmtNs(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.0f ms", ns/1e6)
	case ns >= 1e4:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	}
	return fmt.Sprintf("%.1f", ns)
}

func refName(ref string) string {
	if ref == "" {
		return "nothing"
	}
	return ref
}
