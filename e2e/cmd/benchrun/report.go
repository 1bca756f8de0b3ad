package main

import (
	"cmp"
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// The targets of the benchmark issue. Sizes are judged in decimal megabytes
// (10^6 bytes), the stricter reading; the MiB figure is shown beside.
const (
	targetOffCloud = 2100 * time.Millisecond
	targetHealthy  = 500 * time.Millisecond
	// targetBlackHole is how much longer than a healthy run a run may take
	// when the update server's IPv6 address is a black hole: the one race
	// of phase 4's health check, whose IPv4 attempt starts 250 ms after
	// IPv6 (later requests go to the address that answered), and margin.
	targetBlackHole = 500 * time.Millisecond
	targetRSS       = 40e6
	targetBinary    = 40e6
	targetImage     = 25e6
	// seedEndpoints and seedTimeout are the seed's sequential detection:
	// Azure twice (169.254.169.254 and its IPv4-mapped spelling), GCP three
	// times, AWS twice, each with a 2 s timeout.
	seedEndpoints = 7
	seedTimeout   = 2 * time.Second
	// seedAWSExtra is the seed's IMDSv2 token PUT before the IMDSv1 GET on
	// each of the two AWS endpoints: a second 2 s wait each.
	seedAWSExtra = 2
)

// seedProbing is what the page computes of the seed's sequential detection.
type seedProbing struct {
	Endpoints              int
	Sequential, WithTokens time.Duration
}

// Sooner is how many times sooner than the seed's probing a run of d gives up.
func (s seedProbing) Sooner(d time.Duration) float64 { return float64(s.Sequential) / float64(d) }

var seed = seedProbing{seedEndpoints, seedEndpoints * seedTimeout, (seedEndpoints + seedAWSExtra) * seedTimeout}

// report is everything measured in one run: the data of page.md.tmpl.
type report struct {
	Opts      options
	Machine   machine
	Date      time.Time
	GoBench   []*goBench
	Scenarios []scenarioResult
	Sizes     sizes
	Kube      *kubeResult
}

// pageTemplate is the page's text; the report fills in the figures, which
// the functions below format.
//
//go:embed page.md.tmpl
var pageTemplate string

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"dur":     fmtDur,
	"durs":    spread[time.Duration](fmtDur),
	"mib":     fmtMiB,
	"mibs":    spread[int64](fmtMiB),
	"bytes":   fmtBytes,
	"oneLine": oneLine,
	"row":     func(cells []string) string { return "| " + strings.Join(cells, " | ") + " |" },
	"inc":     func(i int) int { return i + 1 },
	"seed":    func() seedProbing { return seed },
}).Parse(pageTemplate))

// markdown renders the page, docs/BENCHMARKS.md.
func (r *report) markdown() (string, error) {
	var b strings.Builder
	err := page.Execute(&b, r)
	return b.String(), err
}

// Scenario is the result of the scenario called name, or nil when it failed.
func (r *report) Scenario(name string) *scenarioResult {
	for i := range r.Scenarios {
		if r.Scenarios[i].Name == name && r.Scenarios[i].Err == nil && len(r.Scenarios[i].Samples) > 0 {
			return &r.Scenarios[i]
		}
	}
	return nil
}

// Bench is the Go benchmark called name, or nil when it did not run.
func (r *report) Bench(name string) *goBench {
	if b := find(r.GoBench, name); b != nil && b.Reps() > 0 {
		return b
	}
	return nil
}

// Speedup is how many times faster the concurrent detection was than the
// seed's sequential probing, side by side in the Go benchmarks (0: not
// measured).
func (r *report) Speedup() float64 {
	conc, seq := r.Bench("BenchmarkDetectNothingListening"), r.Bench("BenchmarkDetectSequential")
	if conc == nil || seq == nil {
		return 0
	}
	c, _ := conc.median("ns/op")
	s, _ := seq.median("ns/op")
	if c <= 0 {
		return 0
	}
	return s / c
}

// BenchWall is how long the benchmark script has run (0: not known).
func (r *report) BenchWall() time.Duration {
	if r.Opts.Started.IsZero() {
		return 0
	}
	return time.Since(r.Opts.Started).Round(time.Second)
}

// target is one line of the targets table.
type target struct {
	What, Measured, Result string
}

// judged is a target measured: pass or miss, and by how much.
func judged(what, measured string, got, limit float64, format func(float64) string) target {
	return target{what, measured, judge(got, limit, format)}
}

// missing is a target not measured, and why.
func missing(what, why string) target { return target{what, "not measured" + why, "—"} }

// Targets are the benchmark issue's targets, each judged or why not.
func (r *report) Targets() []target {
	dur := func(f float64) string { return fmtDur(time.Duration(f)) }
	size := func(f float64) string { return fmtBytes(int64(f)) }
	var out []target

	if sc := r.Scenario("off-cloud"); sc != nil {
		w := sc.Wall()
		out = append(out, judged("off-cloud detection ≤ 2.1 s", fmt.Sprintf("%s (median of %d whole-process runs, max %s)",
			fmtDur(w.Median), len(sc.Samples), fmtDur(w.Max)), float64(w.Median), float64(targetOffCloud), dur))
	} else {
		out = append(out, missing("off-cloud detection ≤ 2.1 s", ": the off-cloud scenario failed"))
	}
	if sc := r.Scenario("healthy"); sc != nil {
		w := sc.Wall()
		out = append(out, judged("healthy run against local fakes ≤ 0.5 s wall",
			fmt.Sprintf("%s (median of %d, max %s; %s of it inside the run)", fmtDur(w.Median), len(sc.Samples),
				fmtDur(w.Max), fmtDur(sc.InRun().Median)), float64(w.Median), float64(targetHealthy), dur))
	} else {
		out = append(out, missing("healthy run against local fakes ≤ 0.5 s wall", ": the healthy scenario failed"))
	}
	if bh, h := r.Scenario("IPv6 black hole"), r.Scenario("healthy"); bh != nil && h != nil {
		b, w := bh.Wall().Median, h.Wall().Median
		out = append(out, judged("IPv6 black hole ≤ healthy run + 0.5 s wall",
			fmt.Sprintf("%s vs %s healthy (medians of %d each, side by side): +%s, %.2f× the healthy run",
				fmtDur(b), fmtDur(w), len(bh.Samples), fmtDur(b-w), float64(b)/float64(w)),
			float64(b-w), float64(targetBlackHole), dur))
	} else {
		out = append(out, missing("IPv6 black hole ≤ healthy run + 0.5 s wall",
			": the healthy or the IPv6 black hole scenario failed"))
	}

	if peak, in := r.peakRSS(); peak > 0 {
		out = append(out, judged("peak RSS ≤ 40 MB", fmt.Sprintf("%s (highest of every run; in: %s)", fmtBytes(peak), in),
			float64(peak), targetRSS, size))
	} else {
		out = append(out, missing("peak RSS ≤ 40 MB", ""))
	}
	if s := r.Sizes; s.Binary > 0 {
		out = append(out, judged("binary ≤ 40 MB (stripped, static)", fmtBytes(s.Binary), float64(s.Binary),
			targetBinary, size))
	} else {
		out = append(out, missing("binary ≤ 40 MB (stripped, static)", fmt.Sprintf(": %v", s.BinaryErr)))
	}
	if s := r.Sizes; s.Image > 0 {
		out = append(out, judged("image ≤ 25 MB", s.ImageSize(), float64(s.Image), targetImage, size))
	} else {
		out = append(out, target{"image ≤ 25 MB", s.ImageNote, fmt.Sprintf("not measured; the binary, the image's "+
			"one large file, is %s, which leaves %s for the base image's CA bundle and passwd",
			fmtBytes(s.Binary), fmtBytes(int64(targetImage)-s.Binary))})
	}
	return out
}

// peakRSS is the highest peak RSS in bytes of every engine process benchrun
// ran, and in which of its runs.
func (r *report) peakRSS() (peak int64, in string) {
	high := func(what string, samples ...sample) {
		for _, s := range samples {
			if s.RSSKiB*1024 > peak {
				peak, in = s.RSSKiB*1024, what
			}
		}
	}
	for _, sc := range r.Scenarios {
		high(sc.Name, sc.Samples...)
	}
	if r.Kube != nil {
		for _, run := range r.Kube.Runs {
			high("Kubernetes "+run.Name+" through the proxy", run.Sample)
		}
		high("Kubernetes unchanged run over TLS", r.Kube.Direct.Samples...)
	}
	return peak, in
}

// judge says pass/miss and by how much.
func judge(got, limit float64, format func(float64) string) string {
	if got <= limit {
		return fmt.Sprintf("**pass** (%s to spare)", format(limit-got))
	}
	return fmt.Sprintf("**miss** by %s (%.0f%%)", format(got-limit), (got-limit)/limit*100)
}

// Counts are the rows of the request count table: "VERB resource" of any
// run, by resource, then verb, and each run's count of it.
func (k *kubeResult) Counts() [][]string {
	keys := map[string]bool{}
	for _, run := range k.Runs {
		for key := range run.Count {
			keys[key] = true
		}
	}
	byResource := func(a, b string) int {
		verbA, resourceA, _ := strings.Cut(a, " ")
		verbB, resourceB, _ := strings.Cut(b, " ")
		return cmp.Or(strings.Compare(resourceA, resourceB), strings.Compare(verbA, verbB))
	}
	var rows [][]string
	for _, key := range slices.SortedFunc(maps.Keys(keys), byResource) {
		verb, resource, _ := strings.Cut(key, " ")
		row := []string{verb, resource}
		for _, run := range k.Runs {
			row = append(row, strconv.Itoa(run.Count[key]))
		}
		rows = append(rows, row)
	}
	return rows
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d >= time.Microsecond:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	default:
		return fmt.Sprintf("%d ns", d.Nanoseconds())
	}
}

// fmtBytes shows decimal MB with MiB beside.
func fmtBytes(n int64) string {
	return fmt.Sprintf("%.2f MB (%.2f MiB)", float64(n)/1e6, float64(n)/(1<<20))
}

func fmtMiB(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

// spread shows the range of a figure, "min – max".
func spread[T int64 | time.Duration](format func(T) string) func(stats[T]) string {
	return func(s stats[T]) string { return format(s.Min) + " – " + format(s.Max) }
}

// oneLine is an error's message as one table cell.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "|", "/")), " ")
}
