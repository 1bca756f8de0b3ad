package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// goBench is one Go benchmark over every -count repetition: per unit (ns/op,
// B/op, allocs/op, MB/s, custom metrics, and "iters" for the iteration
// count) the values of each line.
type goBench struct {
	name, pkg string
	values    map[string][]float64
}

// benchDescriptions say what each Go benchmark measures.
var benchDescriptions = map[string]string{
	"BenchmarkDetectNothingListening": "Detect: 6 metadata endpoints that accept and never answer, probed at once " +
		"under the 2 s budget",
	"BenchmarkDetectSequential": "the seed's way on the same endpoints: one after another, 2 s each " +
		"(AWS: token PUT, then IMDSv1 GET)",
	"BenchmarkParseRegionData":  "parse a region server's XML answer listing 6 update servers",
	"BenchmarkRace":             "Happy Eyeballs: race [::1] and 127.0.0.1 to an open loopback port",
	"BenchmarkNonceAndDocument": "nonce from the plan URN + `<document>` packaging of a 4 KiB attested signature",
}

// median of the unit's values, and whether there were any.
func (b goBench) median(unit string) (float64, bool) {
	return summarize(b.values[unit]).Median, len(b.values[unit]) > 0
}

// The page's cells of the benchmark: its name without "Benchmark", its
// package within the module, what it measures, the -count repetitions, the
// median time/op, and the other units' medians.
func (b goBench) Short() string { return strings.TrimPrefix(b.name, "Benchmark") }
func (b goBench) Package() string {
	return strings.TrimPrefix(b.pkg, "github.com/rancher/registration-engine/")
}
func (b goBench) What() string { return benchDescriptions[b.name] }
func (b goBench) Reps() int    { return len(b.values["iters"]) }

func (b goBench) TimePerOp() time.Duration { return time.Duration(summarize(b.values["ns/op"]).Median) }

func (b goBench) Other() string {
	var other []string
	for _, unit := range slices.Sorted(maps.Keys(b.values)) {
		if !slices.Contains([]string{"iters", "ns/op", "B/op", "allocs/op", "seconds/op"}, unit) {
			v, _ := b.median(unit)
			other = append(other, fmt.Sprintf("%.1f %s", v, unit))
		}
	}
	return strings.Join(other, ", ")
}

// Count is the unit's median, "—" when the benchmark does not report the
// unit.
func (b goBench) Count(unit string) string {
	if v, ok := b.median(unit); ok {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return "—"
}

// parseGoBench reads `go test -bench` output: "pkg:" lines name the package
// of the benchmark lines that follow; a benchmark line is the name (with a
// -GOMAXPROCS suffix), the iteration count and value/unit pairs. Benchmarks
// keep their order of first appearance.
func parseGoBench(out string) []*goBench {
	var list []*goBench
	pkg := ""
	for _, line := range strings.Split(out, "\n") {
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		iters, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		name := f[0]
		if i := strings.LastIndex(name, "-"); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		b := find(list, pkg, name)
		if b == nil {
			b = &goBench{name: name, pkg: pkg, values: map[string][]float64{}}
			list = append(list, b)
		}
		b.values["iters"] = append(b.values["iters"], iters)
		for j := 2; j+1 < len(f); j += 2 {
			if v, err := strconv.ParseFloat(f[j], 64); err == nil {
				b.values[f[j+1]] = append(b.values[f[j+1]], v)
			}
		}
	}
	return list
}

// find returns the benchmark called name in package pkg ("": any), or nil.
func find(list []*goBench, pkg, name string) *goBench {
	for _, b := range list {
		if b.name == name && (pkg == "" || b.pkg == pkg) {
			return b
		}
	}
	return nil
}
