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
// own peak resident set (ru_maxrss), its exit code, and from its run
// summary the duration (the time inside job.Run, without process start-up)
// and the phase that failed.
type sample struct {
	wall        time.Duration
	rssKiB      int64
	code        int
	inProcess   time.Duration
	failedPhase string
	hasSummary  bool
}

// spawner is the path of the spawn helper (e2e/cmd/benchrun/spawn), which
// runs each engine process so that its peak RSS is its own (see there).
var spawner string

// runEngine runs the engine once through the spawn helper with exactly env
// (nothing of benchrun's own environment leaks in, so no real endpoint can
// be reached) and returns the sample and the process's stderr.
func runEngine(ctx context.Context, bin string, env []string, args ...string) (sample, string, error) {
	if spawner == "" {
		return sample{}, "", errors.New("no spawn helper (--spawn)")
	}
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	pr, pw, err := os.Pipe()
	if err != nil {
		return sample{}, "", err
	}
	defer func() { _ = pr.Close() }()
	cmd := exec.CommandContext(ctx, spawner, append([]string{bin}, args...)...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.ExtraFiles = []*os.File{pw}
	// The helper and the engine share a process group, so a timeout ends
	// both.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Start()
	_ = pw.Close()
	if err != nil {
		return sample{}, "", fmt.Errorf("run %s: %w", bin, err)
	}
	report, readErr := io.ReadAll(io.LimitReader(pr, 4096))
	err = cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return sample{}, stderr.String(), fmt.Errorf("run %s: %w", bin, err)
	}
	if ctx.Err() != nil {
		return sample{}, stderr.String(), fmt.Errorf("run %s: no exit within %s", bin, runTimeout)
	}
	sum := runSummary(stderr.String())
	s := sample{code: cmd.ProcessState.ExitCode(), inProcess: sum.duration, failedPhase: sum.failedPhase, hasSummary: sum.found}
	var wallNs int64
	if _, err := fmt.Sscanf(string(report), "wallNs=%d maxrssKiB=%d", &wallNs, &s.rssKiB); err != nil || readErr != nil {
		return s, stderr.String(), fmt.Errorf("run %s: spawn helper report %q: %w", bin, report, errors.Join(err, readErr))
	}
	s.wall = time.Duration(wallNs)
	return s, stderr.String(), nil
}

// summary is what a sample keeps of the engine's run summary.
type summary struct {
	// found: the last log line is the run summary. A run stopped before
	// job.Run (a setting refused at load) has none.
	found       bool
	duration    time.Duration
	failedPhase string
}

// runSummary reads the engine's last JSON log line, the run summary.
func runSummary(stderr string) summary {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	var last struct {
		Msg         string  `json:"msg"`
		DurationMs  float64 `json:"durationMs"`
		FailedPhase string  `json:"failedPhase"`
	}
	if json.Unmarshal([]byte(lines[len(lines)-1]), &last) != nil || last.Msg != "run finished" {
		return summary{}
	}
	return summary{found: true, duration: time.Duration(last.DurationMs * float64(time.Millisecond)), failedPhase: last.FailedPhase}
}

// scenario is one way of running the engine, repeated.
type scenario struct {
	name, what string
	wantCode   int
	// wantPhase is the run summary's failedPhase a failing run must report,
	// so that an exit 2 for another reason (a setting refused at load) is
	// not timed as this scenario. noSummary: the arguments run no job.
	wantPhase string
	noSummary bool
	// args are the engine's arguments (default --dry-run).
	args []string
	// setup prepares the environment and returns a function that undoes it.
	setup func(dir string) (env []string, stop func(), err error)
}

// scenarioResult is what one scenario measured.
type scenarioResult struct {
	name, what string
	wantCode   int
	samples    []sample
	heap       heapPeak
	err        error
}

// heapPeak is the largest Go heap the runtime's GC trace reported in one
// run: at the start of a cycle, at its end, or live after it.
type heapPeak struct {
	mb, cycles int
	measured   bool
}

func (h heapPeak) String() string {
	switch {
	case !h.measured:
		return "—"
	case h.cycles == 0:
		return "< 4 MB (no GC cycle ran)"
	case h.cycles == 1:
		return fmt.Sprintf("%d MB (1 GC cycle)", h.mb)
	default:
		return fmt.Sprintf("%d MB (%d GC cycles)", h.mb, h.cycles)
	}
}

var gcTraceRE = regexp.MustCompile(`^gc \d+ .* (\d+)->(\d+)->(\d+) MB`)

// measureHeap runs the engine once more with GODEBUG=gctrace=1 and reads the
// largest heap from the trace.
func measureHeap(ctx context.Context, bin string, env []string, args ...string) (heapPeak, error) {
	_, stderr, err := runEngine(ctx, bin, append(slices.Clone(env), "GODEBUG=gctrace=1"), args...)
	if err != nil {
		return heapPeak{}, err
	}
	h := heapPeak{measured: true}
	for _, line := range strings.Split(stderr, "\n") {
		m := gcTraceRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		h.cycles++
		for _, v := range m[1:] {
			if n, err := strconv.Atoi(v); err == nil && n > h.mb {
				h.mb = n
			}
		}
	}
	return h, nil
}

func scenarios() []scenario {
	return []scenario{
		{name: "start-up only", what: "`registration-engine --version`: load and initialise the binary, run nothing; the floor under every other row", wantCode: 0, args: []string{"--version"}, noSummary: true,
			setup: func(string) ([]string, func(), error) { return nil, func() {}, nil }},
		{name: "healthy", what: "every peer answers; the engine registers (dry run)", wantCode: 0, setup: cloudSetup()},
		{name: "first region server down", what: "fault region-down: the first region server refuses connections, the second answers", wantCode: 0, setup: cloudSetup("region-down")},
		{name: "IPv6 black hole", what: "fault ipv6-blackhole: the update server's IPv6 address ([::1]) drops every connection attempt without an answer, its IPv4 address answers; phase 4's health check races the two (IPv6 first, IPv4 250 ms later) and every later request goes to the address that answered. Without IPv6 loopback on the machine the fault is a no-op and this row equals the healthy one", wantCode: 0, setup: cloudSetup("ipv6-blackhole")},
		{name: "off-cloud", what: "every metadata endpoint (1 Azure, 3 GCP, 2 AWS) accepts and never answers; DMI says bare metal; the engine gives up in phase 1, exit 2", wantCode: 2, wantPhase: "detect", setup: offCloudSetup},
	}
}

// measure runs the scenario once to warm the page cache, then runs times,
// then once more with the GC trace on for the heap.
func (sc scenario) measure(ctx context.Context, bin string, runs int) (scenarioResult, error) {
	res := scenarioResult{name: sc.name, what: sc.what, wantCode: sc.wantCode}
	dir, err := os.MkdirTemp("", "benchrun-")
	if err != nil {
		return res, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	env, stop, err := sc.setup(dir)
	if err != nil {
		return res, err
	}
	defer stop()
	args := sc.args
	if args == nil {
		args = []string{"--dry-run"}
	}
	for i := 0; i <= runs; i++ {
		s, stderr, err := runEngine(ctx, bin, env, args...)
		if err != nil {
			return res, err
		}
		if err := sc.check(s); err != nil {
			return res, fmt.Errorf("run %d: %w; last log lines:\n%s", i, err, lastLines(stderr, 3))
		}
		if i > 0 {
			res.samples = append(res.samples, s)
		}
	}
	if res.heap, err = measureHeap(ctx, bin, env, args...); err != nil {
		return res, err
	}
	return res, nil
}

// check says why s is not a run of this scenario: another exit code, a
// failing run that failed in another phase, or a run summary where the
// arguments run no job (or none where they do).
func (sc scenario) check(s sample) error {
	if s.code != sc.wantCode || s.failedPhase != sc.wantPhase || s.hasSummary == sc.noSummary {
		return fmt.Errorf("exit %d, failedPhase %q, run summary %t; want exit %d, failedPhase %q, run summary %t",
			s.code, s.failedPhase, s.hasSummary, sc.wantCode, sc.wantPhase, !sc.noSummary)
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
	dmi := filepath.Join(dir, "dmi")
	if err := os.MkdirAll(dmi, 0o755); err != nil {
		return nil, nil, err
	}
	for name, value := range map[string]string{"sys_vendor": "Dell Inc.\n", "product_name": "PowerEdge R650\n", "chassis_asset_tag": "\n"} {
		if err := os.WriteFile(filepath.Join(dmi, name), []byte(value), 0o644); err != nil {
			return nil, nil, err
		}
	}
	// A valid regionserverclnt.cfg: the engine loads it at start, and its
	// region server is never asked because detection fails first.
	cfg := filepath.Join(dir, "regionserverclnt.cfg")
	if err := os.WriteFile(cfg, []byte("[server]\napi = regionInfo\ncertLocation = "+dir+"\nregionsrv = 127.0.0.1\n"), 0o644); err != nil {
		return nil, nil, err
	}
	return []string{
		"REGIONSRV_CONFIG=" + cfg,
		"AZURE_IMDS_ENDPOINT=" + urls[0],
		"GCP_METADATA_ENDPOINTS=" + strings.Join(urls[1:4], ","),
		"AWS_IMDS_ENDPOINTS=" + strings.Join(urls[4:6], ","),
		"DMI_DIR_PATH=" + dmi,
		"STARTUP_SLEEP_MAX=0",
		"REGISTRATION_CODE=BENCH-CODE",
	}, stop, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// stats are the median, minimum and maximum of a series.
type stats[T int64 | time.Duration] struct{ median, min, max T }

func summarize[T int64 | time.Duration](xs []T) stats[T] {
	if len(xs) == 0 {
		return stats[T]{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stats[T]{median: m, min: s[0], max: s[len(s)-1]}
}

// of is the stats of one figure of samples.
func of[T int64 | time.Duration](samples []sample, figure func(sample) T) stats[T] {
	xs := make([]T, 0, len(samples))
	for _, s := range samples {
		xs = append(xs, figure(s))
	}
	return summarize(xs)
}

func wallOf(s sample) time.Duration      { return s.wall }
func inProcessOf(s sample) time.Duration { return s.inProcess }
func rssOf(s sample) int64               { return s.rssKiB }

func (r scenarioResult) wall() stats[time.Duration] { return of(r.samples, wallOf) }
