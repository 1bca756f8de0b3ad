package main

import (
	"errors"
	"testing"
	"time"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/stretchr/testify/require"
)

// recordedGoBench is `go test -bench` output of the benchmarks the page
// names, as bench.sh records it.
const recordedGoBench = `goos: linux
pkg: github.com/rancher/registration-engine/providers
BenchmarkDetectNothingListening-2   	       1	2001234567 ns/op	         2.001 seconds/op	  137920 B/op	    1009 allocs/op
BenchmarkDetectNothingListening-2   	       1	2003000000 ns/op	         2.003 seconds/op	  137000 B/op	    1000 allocs/op
BenchmarkDetectSequential-2   	       1	16010000000 ns/op	        16.01 seconds/op	  237000 B/op	    2000 allocs/op
PASS
pkg: github.com/rancher/registration-engine/job/smt
BenchmarkParseRegionData-2   	   48866	     26200 ns/op	  56.40 MB/s	   14200 B/op	     246 allocs/op
BenchmarkParseRegionData-2   	   48000	     26400 ns/op	  56.00 MB/s	   14200 B/op	     246 allocs/op
`

// recordedReport is a report as a bench run fills it: every scenario,
// the Go benchmarks, the sizes and the Kubernetes runs measured.
func recordedReport() *report {
	runs := func(wall, in time.Duration, rss int64) []sample {
		var s []sample
		for i := range 3 {
			d := time.Duration(i) * time.Millisecond
			s = append(s, sample{Wall: wall + d, RSSKiB: rss + int64(i)*100, HasSummary: in > 0})
			if in > 0 {
				s[i].InProcess = in + d
			}
		}
		return s
	}
	var results []scenarioResult
	for _, sc := range scenarios() {
		results = append(results, scenarioResult{scenario: sc})
	}
	results[0].series = series{runs(4*time.Millisecond, 0, 14000)}
	results[1].series = series{runs(28*time.Millisecond, 15*time.Millisecond, 20200)}
	results[2].series = series{runs(29*time.Millisecond, 16*time.Millisecond, 20100)}
	results[3].series = series{runs(283*time.Millisecond, 268*time.Millisecond, 20000)}
	results[4].series = series{runs(2010*time.Millisecond, 2000*time.Millisecond, 15700)}
	first := kubeRun{Name: "first run (creates)", Sample: sample{Code: 0, Wall: 90 * time.Millisecond, RSSKiB: 22000},
		Requests: controlplane.Requests{Seq: []string{"PUT leases/registration-engine → 200", "GET secrets/scc-registration → 404", "APPLY secrets/scc-registration → 201"},
			Count: map[string]int{"PUT leases": 1, "GET secrets": 1, "APPLY secrets": 1}}}
	second := kubeRun{Name: "second run (unchanged)", Sample: sample{Code: 0, Wall: 60 * time.Millisecond, RSSKiB: 21000},
		Requests: controlplane.Requests{Seq: []string{"PUT leases/registration-engine → 200", "GET secrets/scc-registration → 200"},
			Count: map[string]int{"PUT leases": 1, "GET secrets": 1}}}
	return &report{
		Opts: options{Revision: "0123abc", Runs: 3},
		Machine: machine{CPUs: 2, Model: "AMD EPYC", Kernel: "6.1.0", Mem: "7.8 GiB", GoVersion: "go1.26.0",
			LoadStart: "1.00 0.90 0.80", LoadEnd: "1.10 0.95 0.82"},
		Date:      time.Date(2026, 12, 4, 12, 37, 0, 0, time.UTC),
		GoBench:   parseGoBench(recordedGoBench),
		Scenarios: results,
		Sizes:     sizes{Binary: 17_760_000, BinaryGzip: 7_100_000, Image: 17_980_000, ImageNote: "docker build"},
		Kube: &kubeResult{Startup: 4 * time.Second, Runs: []kubeRun{first, second},
			Direct:          series{[]sample{{Wall: 50 * time.Millisecond, RSSKiB: 21500}, {Wall: 55 * time.Millisecond, RSSKiB: 21600}}},
			SecretUnchanged: true, CorefileUnchanged: true},
	}
}

// TestMarkdownGolden: the page docs/BENCHMARKS.md is rendered from a
// report; these goldens pin it whole, for a run that measured everything
// and for one where parts failed or were not measured, so that a change of
// benchrun's code that is not meant to change the page does not.
func TestMarkdownGolden(t *testing.T) {
	page, err := recordedReport().markdown()
	require.NoError(t, err)
	testkit.Golden(t, "testdata/measured.md", []byte(page))

	r := recordedReport()
	r.Scenarios[3].Err, r.Scenarios[3].Samples = errors.New("run 2: exit 1 | failedPhase \"find\""), nil
	r.GoBench = nil
	r.Sizes = sizes{BinaryErr: errors.New("no stripped binary given"), ImageNote: "not measured"}
	r.Kube = &kubeResult{Err: errors.New("no control-plane binaries given (K8S_TESTBIN unset)")}
	r.Opts.Revision = ""
	page, err = r.markdown()
	require.NoError(t, err)
	testkit.Golden(t, "testdata/failed.md", []byte(page))
}
