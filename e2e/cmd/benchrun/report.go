package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
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

var benchDescriptions = map[string]string{
	"BenchmarkDetectNothingListening": "Detect: 6 metadata endpoints that accept and never answer, probed at once under the 2 s budget",
	"BenchmarkDetectSequential":       "the seed's way on the same endpoints: one after another, 2 s each (AWS: token PUT, then IMDSv1 GET)",
	"BenchmarkParseRegionData":        "parse a region server's XML answer listing 6 update servers",
	"BenchmarkRace":                   "Happy Eyeballs: race [::1] and 127.0.0.1 to an open loopback port",
	"BenchmarkNonceAndDocument":       "nonce from the plan URN + `<document>` packaging of a 4 KiB attested signature",
}

// report is everything measured in one run.
type report struct {
	opts      options
	machine   machine
	date      time.Time
	gobench   []*goBench
	scenarios []scenarioResult
	sizes     sizes
	kube      *kubeResult
}

func (r *report) scenario(name string) *scenarioResult {
	for i := range r.scenarios {
		if r.scenarios[i].name == name && r.scenarios[i].err == nil && len(r.scenarios[i].samples) > 0 {
			return &r.scenarios[i]
		}
	}
	return nil
}

// target is one line of the targets table.
type target struct {
	what, measured, result string
}

func (r *report) targets() []target {
	dur := func(f float64) string { return fmtDur(time.Duration(f)) }
	size := func(f float64) string { return fmtBytes(int64(f)) }
	// judged is a target measured; missing, one that was not.
	judged := func(what, measured string, got, limit float64, format func(float64) string) target {
		return target{what, measured, judge(got, limit, format)}
	}
	missing := func(what, why string) target { return target{what, "not measured" + why, "—"} }
	var out []target

	if sc := r.scenario("off-cloud"); sc != nil {
		w := sc.wall()
		out = append(out, judged("off-cloud detection ≤ 2.1 s", fmt.Sprintf("%s (median of %d whole-process runs, max %s)", fmtDur(w.median), len(sc.samples), fmtDur(w.max)),
			float64(w.median), float64(targetOffCloud), dur))
	} else {
		out = append(out, missing("off-cloud detection ≤ 2.1 s", ": the off-cloud scenario failed"))
	}
	if sc := r.scenario("healthy"); sc != nil {
		w, in := sc.wall(), of(sc.samples, inProcessOf)
		out = append(out, judged("healthy run against local fakes ≤ 0.5 s wall", fmt.Sprintf("%s (median of %d, max %s; %s of it inside the run)", fmtDur(w.median), len(sc.samples), fmtDur(w.max), fmtDur(in.median)),
			float64(w.median), float64(targetHealthy), dur))
	} else {
		out = append(out, missing("healthy run against local fakes ≤ 0.5 s wall", ": the healthy scenario failed"))
	}
	if bh, h := r.scenario("IPv6 black hole"), r.scenario("healthy"); bh != nil && h != nil {
		b, w := bh.wall(), h.wall()
		out = append(out, judged("IPv6 black hole ≤ healthy run + 0.5 s wall", fmt.Sprintf("%s vs %s healthy (medians of %d each, side by side): +%s, %.2f× the healthy run",
			fmtDur(b.median), fmtDur(w.median), len(bh.samples), fmtDur(b.median-w.median), float64(b.median)/float64(w.median)),
			float64(b.median-w.median), float64(targetBlackHole), dur))
	} else {
		out = append(out, missing("IPv6 black hole ≤ healthy run + 0.5 s wall", ": the healthy or the IPv6 black hole scenario failed"))
	}

	// The peak RSS is the highest of every engine process benchrun ran.
	var peak int64
	peakOf := ""
	high := func(s sample, in string) {
		if s.rssKiB > peak {
			peak, peakOf = s.rssKiB, in
		}
	}
	for _, sc := range r.scenarios {
		for _, s := range sc.samples {
			high(s, sc.name)
		}
	}
	if r.kube != nil {
		for _, run := range r.kube.runs {
			high(run.sample, "Kubernetes "+run.name+" through the proxy")
		}
		for _, s := range r.kube.direct {
			high(s, "Kubernetes unchanged run over TLS")
		}
	}
	if peak > 0 {
		out = append(out, judged("peak RSS ≤ 40 MB", fmt.Sprintf("%s (highest of every run; in: %s)", fmtBytes(peak*1024), peakOf), float64(peak*1024), targetRSS, size))
	} else {
		out = append(out, missing("peak RSS ≤ 40 MB", ""))
	}

	if r.sizes.binary > 0 {
		out = append(out, judged("binary ≤ 40 MB (stripped, static)", fmtBytes(r.sizes.binary), float64(r.sizes.binary), targetBinary, size))
	} else {
		out = append(out, missing("binary ≤ 40 MB (stripped, static)", fmt.Sprintf(": %v", r.sizes.binaryErr)))
	}
	if r.sizes.image > 0 {
		out = append(out, judged("image ≤ 25 MB", fmt.Sprintf("%s (%s)", fmtBytes(r.sizes.image), r.sizes.imageNote), float64(r.sizes.image), targetImage, size))
	} else {
		out = append(out, target{"image ≤ 25 MB", r.sizes.imageNote, fmt.Sprintf("not measured; the binary, the image's one large file, is %s, which leaves %s for the base image's CA bundle and passwd",
			fmtBytes(r.sizes.binary), fmtBytes(int64(targetImage)-r.sizes.binary))})
	}
	return out
}

// judge says pass/miss and by how much.
func judge(got, limit float64, format func(float64) string) string {
	if got <= limit {
		return fmt.Sprintf("**pass** (%s to spare)", format(limit-got))
	}
	return fmt.Sprintf("**miss** by %s (%.0f%%)", format(got-limit), (got-limit)/limit*100)
}

func (r *report) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	o := r.opts

	p("# Benchmarks\n\n")
	p("Generated by `%s` (e2e/scripts/bench.sh, e2e/cmd/benchrun) on %s. Do not edit by hand: run `%s` again.\n\n", o.command, r.date.Format("2006-01-02 15:04 MST"), o.command)
	p("Every figure below comes from that one run on one machine. **The machine is shared** with other builds, so absolute times\n")
	p("drift from run to run; the ratios between figures measured side by side in this run are the meaningful ones.\n\n")

	p("## Targets\n\n| target | measured | result |\n|---|---|---|\n")
	for _, t := range r.targets() {
		p("| %s | %s | %s |\n", t.what, t.measured, t.result)
	}
	p("\nSizes and memory are judged in decimal megabytes (1 MB = 10^6 bytes), the stricter reading; MiB are shown beside.\n")

	p("\n## Whole-process runs against the fake cloud\n\n")
	p("`registration-engine --dry-run`, started %d times per scenario after one warm-up run, one run at a time. Wall time is from\n", o.runs)
	p("fork to the reaped exit; \"in the run\" is the durationMs of the engine's own run summary (job.Run, without process start-up);\n")
	p("peak RSS is the engine's own ru_maxrss, read by a small helper that starts it (e2e/cmd/benchrun/spawn: Linux hands the RSS\n")
	p("high-water mark of the process that calls exec on to the new program, so a child of the much larger benchrun would report\n")
	p("benchrun's). The Go heap peak is the largest heap the GC trace reports in one more run with GODEBUG=gctrace=1. The fake\n")
	p("cloud (e2e/fakecloud) serves in benchrun's process on loopback.\n\n")
	p("| scenario | exit | wall median | wall min – max | in the run (median) | peak RSS median | peak RSS min – max | Go heap peak |\n|---|---|---|---|---|---|---|---|\n")
	for _, sc := range r.scenarios {
		if sc.err != nil {
			p("| %s | — | FAILED: %s | | | | | |\n", sc.name, oneLine(sc.err.Error()))
			continue
		}
		w, in, m := sc.wall(), of(sc.samples, inProcessOf), of(sc.samples, rssOf)
		inRun := fmtDur(in.median)
		if in.max == 0 {
			inRun = "—"
		}
		p("| %s | %d | %s | %s – %s | %s | %s | %s – %s | %s |\n", sc.name, sc.wantCode, fmtDur(w.median), fmtDur(w.min), fmtDur(w.max),
			inRun, fmtMiB(m.median), fmtMiB(m.min), fmtMiB(m.max), sc.heap)
	}
	p("\n")
	for _, sc := range r.scenarios {
		p("- **%s**: %s.\n", sc.name, sc.what)
	}

	r.detection(p)
	r.goBenchmarks(p)
	r.sizesSection(p)
	r.kubeSection(p)

	p("\n## Machine\n\n| | |\n|---|---|\n")
	p("| CPUs (nproc) | %d |\n| CPU model | %s |\n| memory | %s |\n| kernel | %s |\n| Go | %s |\n", r.machine.cpus, r.machine.model, r.machine.mem, r.machine.kernel, r.machine.goVersion)
	if o.revision != "" {
		p("| source revision | %s |\n", o.revision)
	}
	p("| load average (1/5/15 min) at start | %s |\n| load average at end | %s |\n", r.machine.loadStart, r.machine.loadEnd)
	p("| date | %s |\n", r.date.Format(time.RFC3339))
	if !o.started.IsZero() {
		p("| bench.sh wall time | %s (after `make build` and `make testbin`, which are cached) |\n", time.Since(o.started).Round(time.Second))
	}

	p("\n## How this was produced\n\n```\n%s\n```\n\n", o.command)
	p("runs e2e/scripts/bench.sh after `make build` and `make testbin`. The script works one step at a time, one package at a\n")
	p("time (`go test -p 1`), so nothing of ours competes for the CPU:\n\n")
	p("1. `go test -run '^$' -bench BenchmarkDetect -benchtime=1x -count=3 -benchmem ./providers/` (an operation takes seconds),\n")
	p("   then `go test -run '^$' -bench . -benchtime=1s -count=5 -benchmem ./providers/azure/ ./job/smt/ ./job/happyeyeballs/`;\n")
	p("2. `CGO_ENABLED=0 go build -trimpath -ldflags '-s -w'` for the binary's size;\n")
	p("3. `docker build` and `docker image inspect` when a Docker daemon answers;\n")
	p("4. e2e/cmd/benchrun: the whole-process runs (BENCH_RUNS per scenario, default 15), the control plane and its request\n")
	p("   counts, and this file.\n")
	return b.String()
}

func (r *report) detection(p func(string, ...any)) {
	p("\n## Detection on a host with no cloud: concurrent vs the seed's sequential probing\n\n")
	p("| what | time | source |\n|---|---|---|\n")
	if sc := r.scenario("off-cloud"); sc != nil {
		w := sc.wall()
		p("| engine, whole process, until exit 2 | %s (median; %s – %s) | measured, %d runs |\n", fmtDur(w.median), fmtDur(w.min), fmtDur(w.max), len(sc.samples))
	}
	conc := find(r.gobench, "BenchmarkDetectNothingListening")
	seq := find(r.gobench, "BenchmarkDetectSequential")
	if conc != nil {
		if v, ok := conc.median("ns/op"); ok {
			p("| `Detect`, all probes at once (BenchmarkDetectNothingListening) | %s | measured, median of %d |\n", fmtDur(time.Duration(v)), len(conc.values["ns/op"]))
		}
	}
	if seq != nil {
		if v, ok := seq.median("ns/op"); ok {
			p("| the seed's sequential probing of the same 6 endpoints (BenchmarkDetectSequential: 8 waits of 2 s) | %s | measured, median of %d |\n", fmtDur(time.Duration(v)), len(seq.values["ns/op"]))
		}
	}
	computed := seedEndpoints * seedTimeout
	p("| the seed's sequential probing, computed: %d endpoints × 2 s | %s | computed (%s counting the IMDSv2 token PUT before the IMDSv1 GET on each AWS endpoint as a second 2 s wait) |\n",
		seedEndpoints, fmtDur(computed), fmtDur(computed+seedAWSExtra*seedTimeout))
	p("\n")
	if conc != nil && seq != nil {
		c, ok1 := conc.median("ns/op")
		s, ok2 := seq.median("ns/op")
		if ok1 && ok2 && c > 0 {
			p("Side by side in this run, probing everything at once is **%.1f× faster** than probing one endpoint after another (Go benchmarks).\n", s/c)
		}
	}
	if sc := r.scenario("off-cloud"); sc != nil && sc.wall().median > 0 {
		p("The whole engine gives up in %s, against the seed's computed %s: %.1f× sooner.\n", fmtDur(sc.wall().median), fmtDur(computed), float64(computed)/float64(sc.wall().median))
	}
}

func (r *report) goBenchmarks(p func(string, ...any)) {
	p("\n## Go benchmarks (`-benchmem`)\n\n")
	if len(r.gobench) == 0 {
		p("Not measured: no Go benchmark output.\n")
		return
	}
	p("Medians over the `-count` repetitions.\n\n| benchmark | package | what | reps × iterations | time/op | B/op | allocs/op | other |\n|---|---|---|---|---|---|---|---|\n")
	for _, gb := range r.gobench {
		ns, _ := gb.median("ns/op")
		bop, okB := gb.median("B/op")
		allocs, okA := gb.median("allocs/op")
		var other []string
		units := make([]string, 0, len(gb.values))
		for u := range gb.values {
			units = append(units, u)
		}
		slices.Sort(units)
		for _, u := range units {
			if u == "ns/op" || u == "B/op" || u == "allocs/op" || u == "seconds/op" {
				continue
			}
			v, _ := gb.median(u)
			other = append(other, fmt.Sprintf("%.1f %s", v, u))
		}
		iters := slices.Clone(gb.iters)
		slices.Sort(iters)
		p("| %s | %s | %s | %d × %d | %s | %s | %s | %s |\n", strings.TrimPrefix(gb.name, "Benchmark"), strings.TrimPrefix(gb.pkg, "github.com/rancher/registration-engine/"),
			benchDescriptions[gb.name], len(gb.iters), iters[len(iters)/2], fmtDur(time.Duration(ns)), optNum(bop, okB), optNum(allocs, okA), strings.Join(other, ", "))
	}
}

func (r *report) sizesSection(p func(string, ...any)) {
	p("\n## Sizes\n\n| artefact | size |\n|---|---|\n")
	if r.sizes.binary > 0 {
		p("| registration-engine, `CGO_ENABLED=0 go build -trimpath -ldflags '-s -w'` | %s |\n", fmtBytes(r.sizes.binary))
		p("| the same, gzip-compressed (about its image layer as pulled) | %s |\n", fmtBytes(r.sizes.binaryGzip))
	} else {
		p("| registration-engine | not measured: %v |\n", r.sizes.binaryErr)
	}
	if r.sizes.image > 0 {
		p("| image (`docker image inspect` Size) | %s (%s) |\n", fmtBytes(r.sizes.image), r.sizes.imageNote)
	} else {
		p("| image | %s |\n", r.sizes.imageNote)
	}
}

func (r *report) kubeSection(p func(string, ...any)) {
	p("\n## Kubernetes requests per run\n\n")
	k := r.kube
	if k == nil || k.err != nil {
		reason := "not run"
		if k != nil {
			reason = oneLine(k.err.Error())
		}
		p("Not measured: %s\n", reason)
		return
	}
	p("A real control plane (etcd, kube-apiserver, kube-controller-manager from `make testbin`; e2e/controlplane) started in %s.\n", fmtDur(k.startup))
	p("It holds the namespace cattle-scc-system and a kubeadm/kind CoreDNS ConfigMap in kube-system (Corefile with `reload`).\n")
	p("The engine runs twice, not as a dry run, with `--kubeconfig` against a healthy fake cloud. The kubeconfig points at a\n")
	p("plain-HTTP proxy on loopback that forwards to the API server with the admin's certificate and records each request, so the\n")
	p("engine's requests are counted exactly, whatever else talks to the API server. The runs use the admin's rights, not the\n")
	p("engine's RBAC Role: authorization changes no count.\n\n")

	keys := map[string]bool{}
	for _, run := range k.runs {
		for key := range run.Count {
			keys[key] = true
		}
	}
	sorted := slices.SortedFunc(maps.Keys(keys), func(a, b string) int {
		fa, fb := strings.Fields(a), strings.Fields(b)
		if c := strings.Compare(fa[1], fb[1]); c != 0 {
			return c
		}
		return strings.Compare(fa[0], fb[0])
	})
	p("| verb | resource |")
	for _, run := range k.runs {
		p(" %s |", run.name)
	}
	p("\n|---|---|")
	for range k.runs {
		p("---|")
	}
	p("\n")
	for _, key := range sorted {
		f := strings.Fields(key)
		p("| %s | %s |", f[0], f[1])
		for _, run := range k.runs {
			p(" %d |", run.Count[key])
		}
		p("\n")
	}
	p("| **all** | |")
	for _, run := range k.runs {
		total := 0
		for _, v := range run.Count {
			total += v
		}
		p(" **%d** (%d writes) |", total, run.Writes())
	}
	p("\n\n")
	for _, run := range k.runs {
		p("**%s** (exit %d, %s wall, peak RSS %s), in order:\n\n", run.name, run.sample.code, fmtDur(run.sample.wall), fmtMiB(run.sample.rssKiB))
		for i, req := range run.Seq {
			p("%d. `%s`\n", i+1, req)
		}
		p("\n")
	}
	if len(k.direct) > 0 {
		w, m := of(k.direct, wallOf), of(k.direct, rssOf)
		p("**%d unchanged runs straight to the API server** (kubeconfig with the admin's client certificate, TLS and HTTP/2 as in a\n", len(k.direct))
		p("cluster): wall %s median (%s – %s), peak RSS %s median (%s – %s), Go heap peak %s.", fmtDur(w.median), fmtDur(w.min), fmtDur(w.max), fmtMiB(m.median), fmtMiB(m.min), fmtMiB(m.max), k.directHeap)
		p("\n\n")
	}
	p("After the second run the Secret's resourceVersion is %s and the CoreDNS ConfigMap's is %s: ",
		yesNo(k.secretUnchanged, "unchanged", "CHANGED"), yesNo(k.corefileUnchanged, "unchanged", "CHANGED"))
	if k.secretUnchanged && k.corefileUnchanged {
		p("an unchanged registration writes nothing but the Lease.\n")
	} else {
		p("the second run wrote although nothing changed.\n")
	}
}

func yesNo(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
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

func fmtCount(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}

func optNum(v float64, ok bool) string {
	if !ok {
		return "—"
	}
	return fmtCount(v)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "|", "/")), " ")
}
