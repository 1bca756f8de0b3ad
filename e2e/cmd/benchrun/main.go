// Command benchrun measures what a registration-engine run costs and writes
// docs/BENCHMARKS.md: page.md.tmpl filled in from the figures of one run on
// one machine, so that the ratios between them hold even when the machine is
// busy. It runs the engine binary as whole processes against the in-process
// fake cloud (scenarios), reads each process's own wall time and peak RSS
// through the spawn helper, measures the stripped binary, counts the
// Kubernetes requests of a first and a second run against a real control
// plane (--testbin), and puts the Go benchmarks' output (--gobench) beside.
// `make bench` runs it through e2e/scripts/bench.sh, which names the flags.
package main

import (
	"bytes"
	"compress/gzip"
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
	Engine, Spawn, Stripped, GoBench  string
	Testbin, Out, Revision, ImageNote string
	Runs                              int
	Started, ImageBytes               int64 // Unix time, bytes
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("benchrun", flag.ContinueOnError)
	fs.StringVar(&o.Engine, "engine", "bin/registration-engine", "engine binary to run")
	fs.StringVar(&o.Spawn, "spawn", "", "the spawn helper (go build ./e2e/cmd/benchrun/spawn) that runs each engine")
	fs.StringVar(&o.Stripped, "stripped", "", "stripped static engine binary whose size is reported")
	fs.StringVar(&o.GoBench, "gobench", "", "output of go test -bench -benchmem to include")
	fs.StringVar(&o.Testbin, "testbin", "", "directory of etcd, kube-apiserver, kube-controller-manager, kubectl "+
		"(empty: Kubernetes requests not measured)")
	fs.StringVar(&o.Out, "out", "docs/BENCHMARKS.md", "report to write")
	fs.StringVar(&o.Revision, "revision", "", "source revision named in the report")
	fs.IntVar(&o.Runs, "runs", 15, "timed runs per scenario (after one warm-up run)")
	fs.Int64Var(&o.Started, "started", 0, "Unix time the benchmark script started (for its total time)")
	fs.Int64Var(&o.ImageBytes, "image-bytes", 0, "size of the built image in bytes (0: not measured)")
	fs.StringVar(&o.ImageNote, "image-note", "not measured", "why the image was not measured, or how it was")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.Spawn == "" {
		return o, errors.New("--spawn is required: go build -o DIR/spawn ./e2e/cmd/benchrun/spawn")
	}
	if o.Runs < 1 {
		return o, errors.New("--runs must be at least 1")
	}
	return o, nil
}

func run(ctx context.Context, args []string, log io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	r := &report{Opts: o, Machine: readMachine(), Date: time.Now().UTC()}
	if bi, err := buildinfo.ReadFile(o.Engine); err == nil {
		r.Machine.GoVersion = bi.GoVersion
	}

	if o.GoBench != "" {
		data, err := os.ReadFile(o.GoBench)
		if err != nil {
			return fmt.Errorf("go benchmarks: %w", err)
		}
		r.GoBench = parseGoBench(string(data))
	}

	e := engine{bin: o.Engine, spawn: o.Spawn}
	var failed []error
	for _, sc := range scenarios() {
		fmt.Fprintf(log, "benchrun: %s: 1 warm-up + %d runs\n", sc.Name, o.Runs)
		res := scenarioResult{scenario: sc}
		if res.series, res.Err = sc.measure(ctx, e, o.Runs); res.Err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", sc.Name, res.Err))
		}
		r.Scenarios = append(r.Scenarios, res)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}

	r.Sizes = measureSizes(o)

	if o.Testbin == "" {
		r.Kube = &kubeResult{Err: errors.New("no control-plane binaries given (K8S_TESTBIN unset)")}
	} else {
		fmt.Fprintln(log, "benchrun: Kubernetes requests against a real control plane")
		r.Kube = &kubeResult{}
		if r.Kube.Err = r.Kube.measure(ctx, o.Testbin, e, log); r.Kube.Err != nil {
			fmt.Fprintf(log, "benchrun: Kubernetes requests not measured: %v\n", r.Kube.Err)
		}
	}

	r.Machine.LoadEnd = readLoad()
	page, err := r.markdown()
	if err != nil {
		return fmt.Errorf("render report: %w", err)
	}
	if err := os.WriteFile(o.Out, []byte(page), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	fmt.Fprintf(log, "benchrun: wrote %s\n", o.Out)
	for _, t := range r.Targets() {
		fmt.Fprintf(log, "  %-45s %s: %s\n", t.What, t.Measured, t.Result)
	}
	if len(failed) > 0 {
		return fmt.Errorf("some scenarios did not behave as expected (see %s): %w", o.Out, errors.Join(failed...))
	}
	return nil
}

// sizes are the artefacts' sizes in bytes.
type sizes struct {
	Binary, BinaryGzip int64
	BinaryErr          error
	Image              int64
	ImageNote          string
}

// measureSizes reads the stripped binary's size and its gzip size: a
// registry stores and a node pulls the layer gzip-compressed, so the gzip
// size of the binary is what its layer costs over the wire. The image's
// size comes from the script (--image-bytes).
func measureSizes(o options) sizes {
	s := sizes{Image: o.ImageBytes, ImageNote: o.ImageNote}
	var data []byte
	if o.Stripped == "" {
		s.BinaryErr = errors.New("no stripped binary given")
	} else if data, s.BinaryErr = os.ReadFile(o.Stripped); s.BinaryErr == nil {
		var zipped bytes.Buffer
		zw := gzip.NewWriter(&zipped)
		_, _ = zw.Write(data) // writing to a bytes.Buffer does not fail
		_ = zw.Close()
		s.Binary, s.BinaryGzip = int64(len(data)), int64(zipped.Len())
	}
	return s
}

// machine is what the report says about the host.
type machine struct {
	CPUs               int
	Model, Kernel, Mem string
	GoVersion          string
	LoadStart, LoadEnd string
}

func readMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), Model: procField("/proc/cpuinfo", "model name"), Mem: "unknown",
		Kernel: procField("/proc/sys/kernel/osrelease", ""), GoVersion: runtime.Version(), LoadStart: readLoad()}
	kib, err := strconv.ParseFloat(strings.TrimSuffix(procField("/proc/meminfo", "MemTotal"), " kB"), 64)
	if err == nil {
		m.Mem = fmt.Sprintf("%.1f GiB", kib/(1<<20))
	}
	return m
}

// readLoad is the 1, 5 and 15 minute load averages.
func readLoad() string {
	if f := strings.Fields(procField("/proc/loadavg", "")); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// procField is the value of the first "key : value" line of a /proc file,
// or with no key the whole file; "unknown" when there is none.
func procField(path, key string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	if key == "" {
		return strings.TrimSpace(string(data))
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
