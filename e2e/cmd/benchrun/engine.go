package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rancher/registration-engine/e2e/fakecloud"
)

// runTimeout bounds one engine run; the slowest scenario takes about 2 s.
const runTimeout = time.Minute

// sample is one engine process: its wall time from fork to reaped exit, its
// own peak resident set (ru_maxrss) and its exit code; and from its run
// summary, the engine's last log line, the duration (the time inside
// job.Run, without process start-up) and the phase that failed.
type sample struct {
	Wall        time.Duration
	RSSKiB      int64
	Code        int
	InProcess   time.Duration
	FailedPhase string
	// HasSummary: the last log line is the run summary. A run stopped
	// before job.Run (a setting refused at load) has none.
	HasSummary bool
}

// engine is the engine binary, run through the spawn helper
// (e2e/cmd/benchrun/spawn) so that each process's peak RSS is its own (see
// there).
type engine struct{ bin, spawn string }

// run runs the engine once with exactly env (nothing of benchrun's own
// environment leaks in, so no real endpoint can be reached) and returns the
// sample and the process's stderr.
func (e engine) run(ctx context.Context, env []string, args ...string) (sample, string, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	pr, pw, err := os.Pipe()
	if err != nil {
		return sample{}, "", err
	}
	defer func() { _ = pr.Close() }()
	cmd := exec.CommandContext(ctx, e.spawn, append([]string{e.bin}, args...)...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	cmd.ExtraFiles = []*os.File{pw}
	// The helper and the engine share a process group, so a timeout ends
	// both.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Start()
	_ = pw.Close()
	if err != nil {
		return sample{}, "", fmt.Errorf("run %s: %w", e.bin, err)
	}
	report, readErr := io.ReadAll(io.LimitReader(pr, 4096))
	err = cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return sample{}, stderr.String(), fmt.Errorf("run %s: %w", e.bin, err)
	}
	if ctx.Err() != nil {
		return sample{}, stderr.String(), fmt.Errorf("run %s: no exit within %s", e.bin, runTimeout)
	}
	s := runSummary(stderr.String())
	s.Code = cmd.ProcessState.ExitCode()
	var wallNs int64
	if _, err := fmt.Sscanf(string(report), "wallNs=%d maxrssKiB=%d", &wallNs, &s.RSSKiB); err != nil || readErr != nil {
		return s, stderr.String(), fmt.Errorf("run %s: spawn helper report %q: %w", e.bin, report, errors.Join(err, readErr))
	}
	s.Wall = time.Duration(wallNs)
	return s, stderr.String(), nil
}

// runSummary is the sample's part of the engine's last JSON log line when
// that is the run summary, and nothing otherwise.
func runSummary(stderr string) sample {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	var last struct {
		Msg         string  `json:"msg"`
		DurationMs  float64 `json:"durationMs"`
		FailedPhase string  `json:"failedPhase"`
	}
	if json.Unmarshal([]byte(lines[len(lines)-1]), &last) != nil || last.Msg != "run finished" {
		return sample{}
	}
	return sample{HasSummary: true, InProcess: time.Duration(last.DurationMs * float64(time.Millisecond)),
		FailedPhase: last.FailedPhase}
}

// series is one way of running the engine, repeated: the timed runs and the
// Go heap of one more run.
type series struct {
	Samples []sample
	Heap    heapPeak
}

// measure runs the engine warmups + runs times, each run checked, keeps the
// samples after the warm-ups, then runs it once more with GODEBUG=gctrace=1
// for the heap.
func (e engine) measure(ctx context.Context, env, args []string, warmups, runs int,
	check func(sample) error) (series, error) {
	var res series
	for i := range warmups + runs {
		s, err := e.checkedRun(ctx, env, check, args...)
		if err != nil {
			return res, fmt.Errorf("run %d: %w", i, err)
		}
		if i >= warmups {
			res.Samples = append(res.Samples, s)
		}
	}
	_, stderr, err := e.run(ctx, append(slices.Clone(env), "GODEBUG=gctrace=1"), args...)
	res.Heap = gcTraceHeap(stderr)
	return res, err
}

// checkedRun runs the engine once and says, with its last log lines, why
// the run is not what check wants.
func (e engine) checkedRun(ctx context.Context, env []string, check func(sample) error, args ...string) (sample, error) {
	s, stderr, err := e.run(ctx, env, args...)
	if err == nil {
		if err = check(s); err != nil {
			err = fmt.Errorf("%w; last log lines:\n%s", err, lastLines(stderr, 3))
		}
	}
	return s, err
}

// heapPeak is the largest Go heap the runtime's GC trace reported in one
// run: at the start of a cycle, at its end, or live after it.
type heapPeak struct{ mb, cycles int }

func (h heapPeak) String() string {
	switch {
	case h.cycles == 0:
		return "< 4 MB (no GC cycle ran)"
	case h.cycles == 1:
		return fmt.Sprintf("%d MB (1 GC cycle)", h.mb)
	default:
		return fmt.Sprintf("%d MB (%d GC cycles)", h.mb, h.cycles)
	}
}

var gcTraceRE = regexp.MustCompile(`(?m)^gc \d+ .* (\d+)->(\d+)->(\d+) MB`)

// gcTraceHeap reads the largest heap from a run's GC trace.
func gcTraceHeap(stderr string) heapPeak {
	var h heapPeak
	for _, m := range gcTraceRE.FindAllStringSubmatch(stderr, -1) {
		h.cycles++
		for _, v := range m[1:] {
			n, _ := strconv.Atoi(v) // \d+ of at most a few digits
			h.mb = max(h.mb, n)
		}
	}
	return h
}

// scenario is one way of running the engine against the fake cloud.
type scenario struct {
	Name, What string
	WantCode   int
	// WantPhase is the run summary's failedPhase a failing run must report,
	// so that an exit 2 for another reason (a setting refused at load) is
	// not timed as this scenario. NoSummary: the arguments run no job.
	WantPhase string
	NoSummary bool
	Args      []string
	// Setup, when set, prepares the environment and returns a function
	// that undoes it.
	Setup func(dir string) (env []string, stop func(), err error)
}

// scenarioResult is what one scenario measured, or why it did not.
type scenarioResult struct {
	scenario
	series
	Err error
}

func scenarios() []scenario {
	dryRun := []string{"--dry-run"}
	return []scenario{
		{Name: "start-up only", Args: []string{"--version"}, NoSummary: true,
			What: "`registration-engine --version`: load and initialise the binary, run nothing; the floor under every other row"},
		{Name: "healthy", Args: dryRun, Setup: cloudSetup(),
			What: "every peer answers; the engine registers (dry run)"},
		{Name: "first region server down", Args: dryRun, Setup: cloudSetup("region-down"),
			What: "fault region-down: the first region server refuses connections, the second answers"},
		{Name: "IPv6 black hole", Args: dryRun, Setup: cloudSetup("ipv6-blackhole"),
			What: "fault ipv6-blackhole: the update server's IPv6 address ([::1]) drops every connection attempt without " +
				"an answer, its IPv4 address answers; phase 4's health check races the two (IPv6 first, IPv4 250 ms later) " +
				"and every later request goes to the address that answered. Without IPv6 loopback on the machine the fault " +
				"is a no-op and this row equals the healthy one"},
		{Name: "off-cloud", Args: dryRun, Setup: offCloudSetup, WantCode: 2, WantPhase: "detect",
			What: "every metadata endpoint (1 Azure, 3 GCP, 2 AWS) accepts and never answers; DMI says bare metal; " +
				"the engine gives up in phase 1, exit 2"},
	}
}

// measure runs the scenario once to warm the page cache, then runs times,
// then once more with the GC trace on for the heap.
func (sc scenario) measure(ctx context.Context, e engine, runs int) (series, error) {
	dir, err := os.MkdirTemp("", "benchrun-")
	if err != nil {
		return series{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	var env []string
	if sc.Setup != nil {
		var stop func()
		if env, stop, err = sc.Setup(dir); err != nil {
			return series{}, err
		}
		defer stop()
	}
	return e.measure(ctx, env, sc.Args, 1, runs, sc.check)
}

// check says why s is not a run of this scenario: another exit code, a
// failing run that failed in another phase, or a run summary where the
// arguments run no job (or none where they do).
func (sc scenario) check(s sample) error {
	if s.Code != sc.WantCode || s.FailedPhase != sc.WantPhase || s.HasSummary == sc.NoSummary {
		return fmt.Errorf("exit %d, failedPhase %q, run summary %t; want exit %d, failedPhase %q, run summary %t",
			s.Code, s.FailedPhase, s.HasSummary, sc.WantCode, sc.WantPhase, !sc.NoSummary)
	}
	return nil
}

// cloudSetup starts a fake cloud with faults for the scenario.
func cloudSetup(faults ...string) func(dir string) ([]string, func(), error) {
	return func(dir string) ([]string, func(), error) {
		c, err := fakecloud.Start(fakecloud.Options{Dir: dir, Faults: faults})
		if err != nil {
			return nil, nil, fmt.Errorf("fake cloud: %w", err)
		}
		return append(c.Environ(), "REGISTRATION_CODE=BENCH-CODE"), c.Stop, nil
	}
}

// offCloudSetup points every metadata endpoint of the engine's default set
// at its own loopback listener that never answers, the worst case of a
// host without a metadata server (a firewall that drops nothing and a
// proxy that hangs), and gives it the DMI strings of a bare-metal server.
// The listeners never accept: the kernel completes each connection from
// their backlog, and the request waits for an answer that never comes.
func offCloudSetup(dir string) (env []string, stop func(), err error) {
	var listeners []net.Listener
	stop = func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	var urls []string
	for range 6 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		listeners, urls = append(listeners, l), append(urls, "http://"+l.Addr().String())
	}
	if err := os.Mkdir(filepath.Join(dir, "dmi"), 0o755); err != nil {
		return nil, nil, err
	}
	files := map[string]string{
		"dmi/sys_vendor": "Dell Inc.\n", "dmi/product_name": "PowerEdge R650\n", "dmi/chassis_asset_tag": "\n",
		// A valid regionserverclnt.cfg: the engine loads it at start, and
		// its region server is never asked because detection fails first.
		"regionserverclnt.cfg": "[server]\napi = regionInfo\ncertLocation = " + dir + "\nregionsrv = 127.0.0.1\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return nil, nil, err
		}
	}
	return []string{
		"REGIONSRV_CONFIG=" + filepath.Join(dir, "regionserverclnt.cfg"),
		"AZURE_IMDS_ENDPOINT=" + urls[0],
		"GCP_METADATA_ENDPOINTS=" + strings.Join(urls[1:4], ","),
		"AWS_IMDS_ENDPOINTS=" + strings.Join(urls[4:6], ","),
		"DMI_DIR_PATH=" + filepath.Join(dir, "dmi"),
		"STARTUP_SLEEP_MAX=0",
		"REGISTRATION_CODE=BENCH-CODE",
	}, stop, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// stats are the median, minimum and maximum of a series.
type stats[T int64 | time.Duration | float64] struct{ Median, Min, Max T }

func summarize[T int64 | time.Duration | float64](xs []T) stats[T] {
	if len(xs) == 0 {
		return stats[T]{}
	}
	s := slices.Sorted(slices.Values(xs))
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stats[T]{Median: m, Min: s[0], Max: s[len(s)-1]}
}

// of is the stats of one figure of samples.
func of[T int64 | time.Duration](samples []sample, figure func(sample) T) stats[T] {
	xs := make([]T, 0, len(samples))
	for _, s := range samples {
		xs = append(xs, figure(s))
	}
	return summarize(xs)
}

// Wall, InRun and RSS are the stats of the series' wall times, durations
// inside job.Run and peak RSS in KiB.
func (s series) Wall() stats[time.Duration] {
	return of(s.Samples, func(s sample) time.Duration { return s.Wall })
}
func (s series) InRun() stats[time.Duration] {
	return of(s.Samples, func(s sample) time.Duration { return s.InProcess })
}
func (s series) RSS() stats[int64] { return of(s.Samples, func(s sample) int64 { return s.RSSKiB }) }
