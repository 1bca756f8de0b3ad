package main

import (
	"errors"
	"testing"
	"time"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/internal/testkit"
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
			s = append(s, sample{wall: wall + d, rssKiB: rss + int64(i)*100, hasSummary: in > 0})
			if in > 0 {
				s[i].inProcess = in + d
			}
		}
		return s
	}
	var results []scenarioResult
	for _, sc := range scenarios() {
		results = append(results, scenarioResult{name: sc.name, what: sc.what, wantCode: sc.wantCode})
	}
	results[0].samples, results[0].heap = runs(4*time.Millisecond, 0, 14000), heapPeak{measured: true}
	results[1].samples, results[1].heap = runs(28*time.Millisecond, 15*time.Millisecond, 20200), heapPeak{measured: true, mb: 4, cycles: 2}
	results[2].samples, results[2].heap = runs(29*time.Millisecond, 16*time.Millisecond, 20100), heapPeak{measured: true, mb: 4, cycles: 1}
	results[3].samples, results[3].heap = runs(283*time.Millisecond, 268*time.Millisecond, 20000), heapPeak{measured: true, mb: 5, cycles: 3}
	results[4].samples, results[4].heap = runs(2010*time.Millisecond, 2000*time.Millisecond, 15700), heapPeak{measured: true}
	first := kubeRun{name: "first run (creates)", sample: sample{code: 0, wall: 90 * time.Millisecond, rssKiB: 22000},
		Requests: controlplane.Requests{Seq: []string{"PUT leases/registration-engine → 200", "GET secrets/scc-registration → 404", "APPLY secrets/scc-registration → 201"},
			Count: map[string]int{"PUT leases": 1, "GET secrets": 1, "APPLY secrets": 1}}}
	second := kubeRun{name: "second run (unchanged)", sample: sample{code: 0, wall: 60 * time.Millisecond, rssKiB: 21000},
		Requests: controlplane.Requests{Seq: []string{"PUT leases/registration-engine → 200", "GET secrets/scc-registration → 200"},
			Count: map[string]int{"PUT leases": 1, "GET secrets": 1}}}
	return &report{
		opts: options{command: "make bench", revision: "0123abc", runs: 3},
		machine: machine{cpus: 2, model: "AMD EPYC", kernel: "6.1.0", mem: "7.8 GiB", goVersion: "go1.26.0",
			loadStart: "1.00 0.90 0.80", loadEnd: "1.10 0.95 0.82"},
		date:      time.Date(2026, 12, 4, 12, 37, 0, 0, time.UTC),
		gobench:   parseGoBench(recordedGoBench),
		scenarios: results,
		sizes:     sizes{binary: 17_760_000, binaryGzip: 7_100_000, image: 17_980_000, imageNote: "docker build"},
		kube: &kubeResult{startup: 4 * time.Second, runs: []kubeRun{first, second},
			direct:     []sample{{wall: 50 * time.Millisecond, rssKiB: 21500}, {wall: 55 * time.Millisecond, rssKiB: 21600}},
			directHeap: heapPeak{measured: true, mb: 5, cycles: 2}, secretUnchanged: true, corefileUnchanged: true},
	}
}

// TestMarkdownGolden: the page docs/BENCHMARKS.md is rendered from a
// report; these goldens pin it whole, for a run that measured everything
// and for one where parts failed or were not measured, so that a change of
// benchrun's code that is not meant to change the page does not.
func TestMarkdownGolden(t *testing.T) {
	testkit.Golden(t, "testdata/measured.md", []byte(recordedReport().markdown()))

	r := recordedReport()
	r.scenarios[3].err, r.scenarios[3].samples = errors.New("run 2: exit 1 | failedPhase \"find\""), nil
	r.gobench = nil
	r.sizes = sizes{binaryErr: errors.New("no stripped binary given"), imageNote: "not measured"}
	r.kube = &kubeResult{err: errors.New("no control-plane binaries given (K8S_TESTBIN unset)")}
	r.opts.revision = ""
	testkit.Golden(t, "testdata/failed.md", []byte(r.markdown()))
}
