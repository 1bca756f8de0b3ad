// Command benchrun measures what a registration-engine run costs and writes
// docs/BENCHMARKS.md. `make bench` runs it (through e2e/scripts/bench.sh) after the
// Go benchmarks, whose output it reads and puts beside its own figures:
//
//   - whole-process runs of the engine binary against an in-process fake
//     cloud (healthy, first region server down, the update server's IPv6
//     address a black hole: the last beside the healthy run, with the
//     difference and the ratio) and on a host with no cloud,
//     each repeated --runs times: median and spread of wall time and peak
//     RSS (the child's own rusage, read by the small spawn helper, so no
//     /usr/bin/time is needed);
//   - the size of the stripped static binary (and of the image, when the
//     script could build one);
//   - the Kubernetes requests of a first and a second run against a real
//     control plane (--testbin), counted by a proxy in front of the API
//     server, and the wall time and peak RSS of unchanged runs straight to it.
//
// Every figure comes from this one run on this one machine, so the ratios
// between them hold even when the machine is busy; absolute times drift.
//
//	benchrun --engine bin/registration-engine --spawn DIR/spawn \
//	  --stripped DIR/registration-engine --gobench gobench.txt \
//	  [--testbin DIR] [--runs 15] [--out docs/BENCHMARKS.md]
package main

import (
	"context"
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		stop()
		os.Exit(1)
	}
}

// options are benchrun's flags.
type options struct {
	engine, stripped, gobench string
	testbin, out              string
	command, revision         string
	runs                      int
	started                   time.Time
	imageBytes                int64
	imageNote                 string
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("benchrun", flag.ContinueOnError)
	fs.StringVar(&o.engine, "engine", "bin/registration-engine", "engine binary to run")
	fs.StringVar(&spawner, "spawn", "", "the spawn helper (go build ./e2e/cmd/benchrun/spawn) that runs each engine process")
	fs.StringVar(&o.stripped, "stripped", "", "stripped static engine binary whose size is reported")
	fs.StringVar(&o.gobench, "gobench", "", "output of go test -bench -benchmem to include")
	fs.StringVar(&o.testbin, "testbin", "", "directory of etcd, kube-apiserver, kube-controller-manager, kubectl (empty: Kubernetes requests not measured)")
	fs.StringVar(&o.out, "out", "docs/BENCHMARKS.md", "report to write")
	fs.StringVar(&o.command, "command", "make bench", "command named in the report as the one that produced it")
	fs.StringVar(&o.revision, "revision", "", "source revision named in the report")
	fs.IntVar(&o.runs, "runs", 15, "timed runs per scenario (after one warm-up run)")
	started := fs.Int64("started", 0, "Unix time the benchmark script started (for its total time)")
	fs.Int64Var(&o.imageBytes, "image-bytes", 0, "size of the built image in bytes (0: not measured)")
	fs.StringVar(&o.imageNote, "image-note", "not measured", "why the image was not measured, or how it was")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if spawner == "" {
		return o, errors.New("--spawn is required: go build -o DIR/spawn ./e2e/cmd/benchrun/spawn")
	}
	if o.runs < 1 {
		return o, errors.New("--runs must be at least 1")
	}
	if *started > 0 {
		o.started = time.Unix(*started, 0)
	}
	return o, nil
}

func run(ctx context.Context, args []string, log io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	r := &report{opts: o, machine: readMachine(), date: time.Now().UTC()}
	if bi, err := buildinfo.ReadFile(o.engine); err == nil {
		r.machine.goVersion = bi.GoVersion
	}

	if o.gobench != "" {
		data, err := os.ReadFile(o.gobench)
		if err != nil {
			return fmt.Errorf("go benchmarks: %w", err)
		}
		r.gobench = parseGoBench(string(data))
	}

	var failed []error
	for _, sc := range scenarios() {
		fmt.Fprintf(log, "benchrun: %s: 1 warm-up + %d runs\n", sc.name, o.runs)
		res, err := sc.measure(ctx, o.engine, o.runs)
		if err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", sc.name, err))
			res.err = err
		}
		r.scenarios = append(r.scenarios, res)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}

	r.sizes = measureSizes(o)

	if o.testbin == "" {
		r.kube = &kubeResult{err: errors.New("no control-plane binaries given (K8S_TESTBIN unset)")}
	} else {
		fmt.Fprintln(log, "benchrun: Kubernetes requests against a real control plane")
		r.kube = measureKube(ctx, o.testbin, o.engine, log)
		if r.kube.err != nil {
			fmt.Fprintf(log, "benchrun: Kubernetes requests not measured: %v\n", r.kube.err)
		}
	}

	r.machine.loadEnd = readLoad()
	if err := os.WriteFile(o.out, []byte(r.markdown()), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	fmt.Fprintf(log, "benchrun: wrote %s\n", o.out)
	for _, t := range r.targets() {
		fmt.Fprintf(log, "  %-45s %s: %s\n", t.what, t.measured, t.result)
	}
	if len(failed) > 0 {
		return fmt.Errorf("some scenarios did not behave as expected (see %s): %w", o.out, errors.Join(failed...))
	}
	return nil
}

// machine is what the report says about the host.
type machine struct {
	cpus               int
	model, kernel, mem string
	goVersion          string
	loadStart, loadEnd string
}

func readMachine() machine {
	m := machine{cpus: runtime.NumCPU(), model: "unknown", kernel: "unknown", mem: "unknown", goVersion: runtime.Version(), loadStart: readLoad()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if v, ok := procField(string(data), "model name"); ok {
			m.model = v
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(data))
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		if v, ok := procField(string(data), "MemTotal"); ok {
			if kib, err := strconv.ParseFloat(strings.TrimSuffix(v, " kB"), 64); err == nil {
				m.mem = fmt.Sprintf("%.1f GiB", kib/(1<<20))
			}
		}
	}
	return m
}

// readLoad is the 1, 5 and 15 minute load averages.
func readLoad() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return f[0] + " " + f[1] + " " + f[2]
}

// procField returns the value of the first "key : value" line of a /proc
// file.
func procField(text, key string) (string, bool) {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}
