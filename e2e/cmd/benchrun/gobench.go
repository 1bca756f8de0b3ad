package main

import (
	"slices"
	"strconv"
	"strings"
)

// goBench is one Go benchmark over every -count repetition: per unit
// (ns/op, B/op, allocs/op, MB/s, custom metrics) the values of each line.
type goBench struct {
	name, pkg string
	iters     []int64
	values    map[string][]float64
}

// median of the unit's values, and whether there were any.
func (b goBench) median(unit string) (float64, bool) {
	v := slices.Clone(b.values[unit])
	if len(v) == 0 {
		return 0, false
	}
	slices.Sort(v)
	if len(v)%2 == 0 {
		return (v[len(v)/2-1] + v[len(v)/2]) / 2, true
	}
	return v[len(v)/2], true
}

// parseGoBench reads `go test -bench` output: "pkg:" lines name the
// package of the benchmark lines that follow; a benchmark line is the name
// (with a -GOMAXPROCS suffix), the iteration count and value/unit pairs.
// Benchmarks keep their order of first appearance.
func parseGoBench(out string) []*goBench {
	var list []*goBench
	byKey := map[string]*goBench{}
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
		iters, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		name := f[0]
		if i := strings.LastIndex(name, "-"); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		key := pkg + "." + name
		b := byKey[key]
		if b == nil {
			b = &goBench{name: name, pkg: pkg, values: map[string][]float64{}}
			byKey[key] = b
			list = append(list, b)
		}
		b.iters = append(b.iters, iters)
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			b.values[f[i+1]] = append(b.values[f[i+1]], v)
		}
	}
	return list
}

// find returns the benchmark called name, or nil.
func find(list []*goBench, name string) *goBench {
	for _, b := range list {
		if b.name == name {
			return b
		}
	}
	return nil
}
