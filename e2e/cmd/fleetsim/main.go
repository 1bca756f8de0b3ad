// Command fleetsim computes the load a fleet of clusters puts on SUSE's
// region and update servers over the day: the peak number of runs that
// start their first request within any one hour, for N clusters.
//
// It does not type the schedule in: each cluster's CronJob schedule is what
// the real helm renders from manifests/chart/registration-engine for that
// cluster (its own Marketplace extension resource ID, as Azure injects it),
// and each scheduled run's startup sleep is drawn by the engine's own
// job.Job.Run (job.ScheduledRun decides from the Job's name whether it
// sleeps, startupSleep draws up to startupSleepMax). It compares three
// fleets:
//
//	before  the chart at 15403b8: every cluster "0 */18 * * *"
//	after   the chart's per-install schedule (schedule left empty)
//	python  SUSE's Python engine: a loop started at install time, 18 h
//	        ± 1 h between runs (seed 000)
//
//	go run ./e2e/cmd/fleetsim -helm $(HELM_BIN) -clusters 1000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fleetsim:", err)
		os.Exit(1)
	}
}

// Options are fleetsim's flags.
type Options struct {
	Helm, Chart string
	Clusters    int
	Days        int
	Seed        uint64
}

// Figures are the peak runs per hour of each fleet, over the days after
// the first (every fleet is in its steady state by then).
type Figures struct {
	Clusters                    int
	Before, After, Python       int
	MeanPython                  float64
	DistinctSchedules           int
	RenderTook                  time.Duration
	ExampleBefore, ExampleAfter string
}

func run(args []string, out io.Writer) error {
	var o Options
	fs := flag.NewFlagSet("fleetsim", flag.ContinueOnError)
	fs.StringVar(&o.Helm, "helm", os.Getenv("HELM_BIN"), "helm binary (make helm)")
	fs.StringVar(&o.Chart, "chart", "manifests/chart/registration-engine", "the chart")
	fs.IntVar(&o.Clusters, "clusters", 1000, "clusters in the fleet")
	fs.IntVar(&o.Days, "days", 6, "days simulated")
	fs.Uint64Var(&o.Seed, "seed", 1, "random seed of the sleeps and the Python fleet's start times")
	update := fs.String("update", "", "also write the figures into this file's fleet section (docs/BENCHMARKS.md)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := Simulate(context.Background(), o)
	if err != nil {
		return err
	}
	if *update != "" {
		if err := writeSection(*update, o, f); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "clusters %d, %d distinct schedules rendered by helm in %s (e.g. before %q, after %q)\n",
		f.Clusters, f.DistinctSchedules, f.RenderTook.Round(time.Second), f.ExampleBefore, f.ExampleAfter)
	fmt.Fprintf(out, "peak runs in one hour: before %d (%.1fx the Python engine), after %d (%.1fx), Python engine %d (mean %.1f/h)\n",
		f.Before, float64(f.Before)/float64(f.Python), f.After, float64(f.After)/float64(f.Python), f.Python, f.MeanPython)
	return nil
}

// Markers of the section fleetsim owns in docs/BENCHMARKS.md, which
// e2e/cmd/benchrun writes as a whole before (make bench runs fleetsim
// after it).
const (
	sectionStart = "<!-- fleetsim: written by go run ./e2e/cmd/fleetsim -update docs/BENCHMARKS.md -->"
	sectionEnd   = "<!-- /fleetsim -->"
)

// writeSection puts the figures into path, replacing its fleet section,
// or adding one before "## Machine".
func writeSection(path string, o Options, f Figures) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(b)
	sec := fmt.Sprintf(`%s
## Fleet load at the region servers

The most runs that send their first request within any one hour, for a fleet of %d clusters over %d days (the first
day left out: every fleet is in its steady state after it). Each cluster's schedule is what helm renders from the
chart for it (its own Marketplace extension resource ID; %d distinct schedules, rendered in %s); each scheduled
run's startup sleep is drawn by the engine's own job.Job.Run (STARTUP_SLEEP_MAX 1 h).

| fleet | schedule | peak runs in one hour | × the Python engine's peak | × its mean rate |
|---|---|---|---|---|
| before (15403b8) | every cluster %q | %d | %.1f× | %.1f× |
| after | per install, e.g. %q | %d | %.1f× | %.1f× |
| SUSE's Python engine | a loop from install time, 18 h ± 1 h | %d (mean %.1f/h) | 1× | %.1f× |

Goal: at most 3× the Python engine's peak. Command:

`+"```"+`
go run ./e2e/cmd/fleetsim -helm "$HELM_BIN" -clusters %d -days %d -seed %d -update docs/BENCHMARKS.md
`+"```"+`
%s
`, sectionStart, f.Clusters, o.Days, f.DistinctSchedules, f.RenderTook.Round(time.Second),
		f.ExampleBefore, f.Before, float64(f.Before)/float64(f.Python), float64(f.Before)/f.MeanPython,
		f.ExampleAfter, f.After, float64(f.After)/float64(f.Python), float64(f.After)/f.MeanPython,
		f.Python, f.MeanPython, float64(f.Python)/f.MeanPython, o.Clusters, o.Days, o.Seed, sectionEnd)
	if i := strings.Index(doc, sectionStart); i >= 0 {
		j := strings.Index(doc, sectionEnd)
		if j < i {
			return fmt.Errorf("%s: %q without its end marker", path, sectionStart)
		}
		doc = doc[:i] + strings.TrimSuffix(sec, "\n") + doc[j+len(sectionEnd):]
	} else if i := strings.Index(doc, "## Machine"); i >= 0 {
		doc = doc[:i] + sec + "\n" + doc[i:]
	} else {
		doc += "\n" + sec
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

// Simulate renders every cluster's schedule with helm and counts the
// fleets' runs.
func Simulate(ctx context.Context, o Options) (Figures, error) {
	if o.Helm == "" {
		return Figures{}, errors.New("no helm: pass -helm or set HELM_BIN (make helm)")
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x5eed))
	f := Figures{Clusters: o.Clusters}
	start := time.Now()
	before, err := render(ctx, o, "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks/providers/Microsoft.KubernetesConfiguration/extensions/rancher", "schedule=0 */18 * * *")
	if err != nil {
		return f, err
	}
	f.ExampleBefore = before
	schedules := make([]string, o.Clusters)
	seen := map[string]bool{}
	for i := range schedules {
		id := fmt.Sprintf("/subscriptions/%08x-%04x-4000-8000-%012x/resourceGroups/rg-%d/providers/Microsoft.ContainerService/managedClusters/aks-%d/providers/Microsoft.KubernetesConfiguration/extensions/rancher",
			rng.Uint32(), rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff, i, i)
		if schedules[i], err = render(ctx, o, id); err != nil {
			return f, err
		}
		seen[schedules[i]] = true
	}
	f.RenderTook, f.DistinctSchedules, f.ExampleAfter = time.Since(start), len(seen), schedules[0]

	epoch := time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC)
	end := epoch.Add(time.Duration(o.Days) * 24 * time.Hour)
	var beforeRuns, afterRuns, pythonRuns []time.Time
	for i := 0; i < o.Clusters; i++ {
		b, err := cronRuns(before, epoch, end, rng)
		if err != nil {
			return f, err
		}
		a, err := cronRuns(schedules[i], epoch, end, rng)
		if err != nil {
			return f, err
		}
		beforeRuns, afterRuns = append(beforeRuns, b...), append(afterRuns, a...)
		// The Python engine: installed at any time, then 18 h ± 1 h.
		for t := epoch.Add(-time.Duration(rng.Int64N(int64(18 * time.Hour)))); t.Before(end); t = t.Add(18*time.Hour + time.Duration(rng.Int64N(int64(2*time.Hour))) - time.Hour) {
			pythonRuns = append(pythonRuns, t)
		}
	}
	from := epoch.Add(24 * time.Hour)
	f.Before, f.After, f.Python = peakPerHour(beforeRuns, from, end), peakPerHour(afterRuns, from, end), peakPerHour(pythonRuns, from, end)
	n := 0
	for _, t := range pythonRuns {
		if !t.Before(from) && t.Before(end) {
			n++
		}
	}
	f.MeanPython = float64(n) / end.Sub(from).Hours()
	return f, nil
}

var scheduleLine = regexp.MustCompile(`(?m)^  schedule: "([^"]*)"$`)

// render returns the CronJob schedule helm renders for a cluster whose
// extension resource ID is id, with the Marketplace bundle's values.
func render(ctx context.Context, o Options, id string, set ...string) (string, error) {
	args := []string{"template", "registration-engine", o.Chart, "--namespace", operator.Namespace,
		"--values", filepath.Join(o.Chart, "..", "..", "marketplace", "values.yaml"),
		"--set", "global.azure.extension.resourceId=" + id,
		"--set", "global.azure.identity.clientId=00000000-0000-0000-0000-000000000001",
		"--set", "global.azure.marketplace.planId=plan",
		"--set", "global.azure.images.engine.registry=example.azurecr.io",
		"--set", "global.azure.images.engine.image=registration-engine",
		"--set", "global.azure.images.engine.tag=latest",
		"--set", "global.azure.images.engine.digest=sha256:" + strings.Repeat("0", 64),
		"--show-only", "templates/cronjob.yaml"}
	for _, s := range set {
		args = append(args, "--set-string", s)
	}
	cmd := exec.CommandContext(ctx, o.Helm, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("helm template: %w: %s", err, stderr.String())
	}
	m := scheduleLine.FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("helm template: no schedule in the CronJob:\n%s", b)
	}
	return string(m[1]), nil
}

// cronRuns returns when each run of a CronJob with schedule sched, fired
// in [from, to), sends its first request: the fire time plus the startup
// sleep the engine takes for the Job the CronJob controller names
// <cronjob>-<minutes since the epoch>.
func cronRuns(sched string, from, to time.Time, rng *rand.Rand) ([]time.Time, error) {
	fires, err := cronFires(sched, from, to)
	if err != nil {
		return nil, err
	}
	out := make([]time.Time, 0, len(fires))
	for _, t := range fires {
		name := kube.CronJobName + "-" + strconv.FormatInt(t.Unix()/60, 10)
		d, err := engineSleep(name, t.Add(5*time.Second), job.DefaultStartupSleepMax, rng)
		if err != nil {
			return nil, err
		}
		out = append(out, t.Add(d))
	}
	return out, nil
}

// errSlept stops the run right after its startup sleep was drawn.
var errSlept = errors.New("slept")

// engineSleep is the startup sleep the engine takes in a Job named
// jobName whose pod starts at now: job.Job.Run's own rule, stopped before
// the Lease.
func engineSleep(jobName string, now time.Time, sleepMax time.Duration, rng *rand.Rand) (time.Duration, error) {
	var slept time.Duration
	j := &job.Job{
		Scheduled:    job.ScheduledRun(jobName, kube.CronJobName, now),
		SleepMax:     sleepMax,
		RandDuration: func(n time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(n))) },
		Sleep:        func(_ context.Context, d time.Duration) error { slept = d; return errSlept },
	}
	if !j.Scheduled {
		// Not a scheduled run: the engine starts at once.
		return 0, nil
	}
	_, err := j.Run(context.Background())
	if !errors.Is(err, errSlept) {
		return 0, fmt.Errorf("the engine did not sleep as expected: %v", err)
	}
	return slept, nil
}

// cronFires lists the times in [from, to) a standard five-field schedule
// fires, for the schedules the chart renders: minute and hour fields of
// numbers, lists, ranges and steps, every other field "*".
func cronFires(sched string, from, to time.Time) ([]time.Time, error) {
	f := strings.Fields(sched)
	if len(f) != 5 || f[2] != "*" || f[3] != "*" || f[4] != "*" {
		return nil, fmt.Errorf("schedule %q: only minute and hour fields are simulated", sched)
	}
	mins, err := cronField(f[0], 59)
	if err != nil {
		return nil, err
	}
	hours, err := cronField(f[1], 23)
	if err != nil {
		return nil, err
	}
	var out []time.Time
	for d := from.Truncate(24 * time.Hour); d.Before(to); d = d.Add(24 * time.Hour) {
		for _, h := range hours {
			for _, m := range mins {
				t := d.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
				if !t.Before(from) && t.Before(to) {
					out = append(out, t)
				}
			}
		}
	}
	return out, nil
}

func cronField(s string, maxV int) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		rng, step := part, 1
		if i := strings.IndexByte(part, '/'); i >= 0 {
			n, err := strconv.Atoi(part[i+1:])
			if err != nil || n < 1 {
				return nil, fmt.Errorf("cron field %q", s)
			}
			rng, step = part[:i], n
		}
		lo, hi := 0, maxV
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			var e1, e2 error
			lo, e1 = strconv.Atoi(a)
			hi, e2 = strconv.Atoi(b)
			if e1 != nil || e2 != nil {
				return nil, fmt.Errorf("cron field %q", s)
			}
		default:
			n, err := strconv.Atoi(rng)
			if err != nil {
				return nil, fmt.Errorf("cron field %q", s)
			}
			lo, hi = n, n
			if strings.Contains(part, "/") {
				hi = maxV
			}
		}
		for v := lo; v <= hi && v <= maxV; v += step {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// peakPerHour is the most runs in any one-hour window starting on a
// minute in [from, to-1h].
func peakPerHour(runs []time.Time, from, to time.Time) int {
	slices.SortFunc(runs, func(a, b time.Time) int { return a.Compare(b) })
	peak := 0
	for w := from; !w.Add(time.Hour).After(to); w = w.Add(time.Minute) {
		i, _ := slices.BinarySearchFunc(runs, w, func(a, b time.Time) int { return a.Compare(b) })
		j, _ := slices.BinarySearchFunc(runs, w.Add(time.Hour), func(a, b time.Time) int { return a.Compare(b) })
		peak = max(peak, j-i)
	}
	return peak
}
