package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
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
	Wall, InProcess time.Duration
	RSSKiB          int64
	Code            int
	FailedPhase     string
	// HasSummary: the last log line is the run summary. A run stopped
	// before job.Run (a setting refused at load) has none.
	HasSummary bool
}

// engine is the engine binary, run through the spawn helper (see there) so
// that each process's peak RSS is its own.
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

// series is one way of running the engine, repeated: the timed runs.
type series struct{ Samples []sample }

// measure runs the engine warmups + runs times and keeps the samples after
// the warm-ups; it stops at the first run that fails or is not what check
// wants, and says why with the run's last log lines.
func (e engine) measure(ctx context.Context, env, args []string, warmups, runs int,
	check func(sample) error) (series, error) {
	var res series
	for i := range warmups + runs {
		s, stderr, err := e.run(ctx, env, args...)
		if err == nil {
			err = check(s)
		}
		if err != nil {
			return res, fmt.Errorf("run %d: %w; last log lines:\n%s", i, err, lastLines(stderr, 3))
		}
		if i >= warmups {
			res.Samples = append(res.Samples, s)
		}
	}
	return res, nil
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
	// Faults are the fake cloud's (fakecloud.Faults).
	Faults []string
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
		{Name: "healthy", Args: dryRun, What: "every peer answers; the engine registers (dry run)"},
		{Name: "first region server down", Args: dryRun, Faults: []string{"region-down"},
			What: "fault region-down: the first region server refuses connections, the second answers"},
		{Name: "IPv6 black hole", Args: dryRun, Faults: []string{"ipv6-blackhole"},
			What: "fault ipv6-blackhole: the update server's IPv6 address ([::1]) drops every connection attempt without " +
				"an answer, its IPv4 address answers; phase 4's health check races the two (IPv6 first, IPv4 250 ms later) " +
				"and every later request goes to the address that answered. Without IPv6 loopback on the machine the fault " +
				"is a no-op and this row equals the healthy one"},
		{Name: "off-cloud", Args: dryRun, Faults: []string{"off-cloud"}, WantCode: 2, WantPhase: "detect",
			What: "fault off-cloud: every metadata endpoint (Azure, GCP, AWS) drops each connection attempt without an " +
				"answer, as a firewalled link-local address does; DMI says bare metal; the engine gives up in phase 1, exit 2"},
	}
}

// measure runs the scenario once against its fake cloud to warm the page
// cache, then runs times.
func (sc scenario) measure(ctx context.Context, e engine, runs int) (series, error) {
	env, stop, err := startCloud(sc.Faults...)
	if err != nil {
		return series{}, err
	}
	defer stop()
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

// startCloud starts a fake cloud with faults in a directory of its own, and
// returns the engine's environment for it and how to stop it.
func startCloud(faults ...string) (env []string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "benchrun-")
	if err != nil {
		return nil, nil, err
	}
	c, err := fakecloud.Start(fakecloud.Options{Dir: dir, Faults: faults})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("fake cloud: %w", err)
	}
	return append(c.Environ(), "REGISTRATION_CODE=BENCH-CODE"), func() { c.Stop(); _ = os.RemoveAll(dir) }, nil
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
