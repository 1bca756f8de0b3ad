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
// With -outage it also plays the after fleet through a regional outage of
// that length from 10:00 UTC on the second day (issue 42, "no stampede
// after a regional outage"): every run fails during it; a failed run's
// next attempt is retry.Policy{}.Next from the first failure of the
// cluster's streak, run by the cluster's retry CronJob (its schedule
// rendered by helm too) at its first look at or after that time; every
// attempt after the outage succeeds. It reports the busiest minute after
// the outage against the busiest minute without one, the fleet's attempts
// by hour of the outage, and how long after it each cluster is registered
// against job/backoff's bound for a registered cluster's refresh,
// max(1 h, its failing time/4).
//
//	go run ./e2e/cmd/fleetsim -helm $(HELM_BIN) -clusters 1000 -outage 2h
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/retry"
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
	// Outage, when set, is a regional outage from OutageStart on the
	// second day: every run of the after fleet fails during it.
	Outage time.Duration
}

// Figures are the peak runs per hour of each fleet, over the days after
// the first (every fleet is in its steady state by then).
type Figures struct {
	Clusters                    int
	Seed                        uint64
	Before, After, Python       int
	MeanPython                  float64
	DistinctSchedules           int
	RenderTook                  time.Duration
	ExampleBefore, ExampleAfter string
	ExampleRetry                string
	// Outage is the after fleet through Options.Outage; zero without.
	// Draws are the same fleet through it again with other draws of the
	// startup sleeps and the jitter (seeds Seed+1, …), Outage first.
	Outage OutageFigures
	Draws  []OutageFigures
}

func run(args []string, out io.Writer) error {
	var o Options
	fs := flag.NewFlagSet("fleetsim", flag.ContinueOnError)
	fs.StringVar(&o.Helm, "helm", os.Getenv("HELM_BIN"), "helm binary (make helm)")
	fs.StringVar(&o.Chart, "chart", "manifests/chart/registration-engine", "the chart")
	fs.IntVar(&o.Clusters, "clusters", 1000, "clusters in the fleet")
	fs.IntVar(&o.Days, "days", 6, "days simulated")
	fs.Uint64Var(&o.Seed, "seed", 1, "random seed of the sleeps, the Python fleet's start times and the retries' jitter")
	fs.DurationVar(&o.Outage, "outage", 0, "also simulate a regional outage this long from 10:00 UTC on day 2: every run fails during it")
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
	if g := f.Outage; g.Outage > 0 {
		fmt.Fprintf(out, "outage %s from %s (retry schedule e.g. %q): %d clusters failed, attempts each during it mean %.1f max %d; fleet attempts by hour of the outage %v\n",
			g.Outage, g.Start.Format("Mon 15:04 MST"), f.ExampleRetry, g.Failing, g.AttemptsMean, g.AttemptsMax, g.PerHour)
		fmt.Fprintf(out, "peak attempts in one minute: normal %d, the outage's last hour %d, first hour after recovery %d (%.1fx normal); every cluster registered %s after recovery; worst against max(1h, failing/4): %s after, failing %s, bound %s; %d over their bound\n",
			g.NormalPeakPerMinute, g.LastHourPeakPerMinute, g.RecoveryPeakPerMinute, g.Ratio(), g.AllRegistered, g.Worst.Took, g.Worst.Failing.Round(time.Second), g.Worst.Bound.Round(time.Second), g.Late)
		lo, hi, over, late, slowest := drawsSummary(f)
		fmt.Fprintf(out, "over %d draws of the sleeps and the jitter: ratio %.1fx to %.1fx, %d above 3x; every cluster registered within %s; %d over their bound\n",
			len(f.Draws), lo, hi, over, slowest, late)
	}
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
go run ./e2e/cmd/fleetsim -helm "$HELM_BIN" -clusters %d -days %d -seed %d%s -update docs/BENCHMARKS.md
`+"```"+`
%s%s
`, sectionStart, f.Clusters, o.Days, f.DistinctSchedules, f.RenderTook.Round(time.Second),
		f.ExampleBefore, f.Before, float64(f.Before)/float64(f.Python), float64(f.Before)/f.MeanPython,
		f.ExampleAfter, f.After, float64(f.After)/float64(f.Python), float64(f.After)/f.MeanPython,
		f.Python, f.MeanPython, float64(f.Python)/f.MeanPython, o.Clusters, o.Days, o.Seed, outageFlag(o), outageSection(f), sectionEnd)
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

func outageFlag(o Options) string {
	if o.Outage == 0 {
		return ""
	}
	return " -outage " + shortDuration(o.Outage)
}

// shortDuration is d as a flag takes it, without zero units: 2h, 1h30m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// outageSection is the fleet section's part on the outage, empty without
// one.
func outageSection(f Figures) string {
	g := f.Outage
	if g.Outage == 0 {
		return ""
	}
	hours, counts := "| hour of the outage |", "| the fleet's attempts |"
	for i, n := range g.PerHour {
		hours += fmt.Sprintf(" %d |", i+1)
		counts += fmt.Sprintf(" %d |", n)
	}
	trend := "fall"
	if g.PerHour[len(g.PerHour)-1] > g.PerHour[0] {
		trend = "rise"
	}
	retrySleep := "gives its Jobs no startup sleep"
	if g.RetriesSlept > 0 {
		retrySleep = fmt.Sprintf("gives %d of its Jobs a startup sleep", g.RetriesSlept)
	}
	than := "no busier than"
	if g.RecoveryPeakPerMinute > g.LastHourPeakPerMinute {
		than = "busier than"
	}
	return fmt.Sprintf(`
### After a regional outage

The after fleet through a %s outage of SUSE's servers from %s on day 2: every run of every cluster fails during
it, scheduled runs and retries alike. Every cluster is registered (the fleet is in its steady state), so a failed
scheduled run is a refresh: it records on its Lease its next attempt, retry.Policy{}.Next (job/retry) from the
first failure of the cluster's streak, at least an hour on (less the retry interval), jittered by the simulation's seeded random source; the
cluster's retry CronJob (helm's render for it too, e.g. %q) runs it at its first look at or after
that time; the engine's own rule (job.ScheduledRun) %s.
Every attempt after the outage succeeds and ends the streak.

| figure | value | goal |
|---|---|---|
| busiest minute without an outage (run starts, the days after the first) | %d | |
| busiest minute in the first hour after the outage (attempts: scheduled runs and retries) | %d | |
| ratio | %.1f× | at most 3× |
| busiest minute in the outage's last hour | %d | |
| clusters that failed during the outage | %d of %d | |
| attempts per failing cluster during the outage | mean %.1f, most %d | |
| every cluster registered | %s after the outage | |
| the cluster nearest its bound | refreshed %s after the outage, failing for %s (bound %s); %d clusters over their bound | within max(1 h, its failing time/4) (a registered cluster's refresh; a cluster not yet registered: max(10 min, its failing time/4), job/backoff's tests) |

%s
|%s
%s

The fleet's attempts per hour %s through this outage. The scheduled runs bring the clusters in one by one (a twelfth
of the fleet an hour); a registered cluster whose refresh fails tries again between half an hour and an hour later,
then at a quarter of its failing time, so each adds about one attempt an hour. The busiest minute after the outage is
%s the outage's last hour.
%s`, shortDuration(g.Outage), g.Start.Format("15:04 MST"), f.ExampleRetry, retrySleep,
		g.NormalPeakPerMinute, g.RecoveryPeakPerMinute, g.Ratio(), g.LastHourPeakPerMinute,
		g.Failing, f.Clusters, g.AttemptsMean, g.AttemptsMax, g.AllRegistered,
		g.Worst.Took, g.Worst.Failing.Round(time.Second), g.Worst.Bound.Round(time.Second), g.Late,
		hours, strings.Repeat("---|", len(g.PerHour)+1), counts, trend, than, drawsParagraph(f))
}

// drawsParagraph gives the outage's ratio and recovery over the other
// draws, when there are.
func drawsParagraph(f Figures) string {
	if len(f.Draws) < 2 {
		return ""
	}
	lo, hi, over, late, slowest := drawsSummary(f)
	return fmt.Sprintf(`
The ratio of one draw is noisy: the same %d schedules through the same outage with %d draws of the startup sleeps and
the jitter (seeds %d to %d) give %.1f× to %.1f×, %d of them above 3×; every cluster was registered within %s after the
outage in each, %d clusters over their bound in all.
`, f.Clusters, len(f.Draws), f.Seed, f.Seed+uint64(len(f.Draws))-1, lo, hi, over, slowest, late)
}

// Simulate renders every cluster's schedules with helm and counts the
// fleets' runs.
func Simulate(ctx context.Context, o Options) (Figures, error) {
	if o.Helm == "" {
		return Figures{}, errors.New("no helm: pass -helm or set HELM_BIN (make helm)")
	}
	if o.Clusters < 1 {
		return Figures{}, fmt.Errorf("-clusters %d: at least 1", o.Clusters)
	}
	if err := checkOutage(o); err != nil {
		return Figures{}, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x5eed))
	start := time.Now()
	before, err := render(ctx, o, "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks/providers/Microsoft.KubernetesConfiguration/extensions/rancher", "schedule=0 */18 * * *")
	if err != nil {
		return Figures{}, err
	}
	schedules := make([]Schedules, o.Clusters)
	for i := range schedules {
		id := fmt.Sprintf("/subscriptions/%08x-%04x-4000-8000-%012x/resourceGroups/rg-%d/providers/Microsoft.ContainerService/managedClusters/aks-%d/providers/Microsoft.KubernetesConfiguration/extensions/rancher",
			rng.Uint32(), rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff, i, i)
		if schedules[i], err = render(ctx, o, id); err != nil {
			return Figures{}, err
		}
	}
	took := time.Since(start)
	f, err := simulate(o, before.Main, schedules, rng)
	if err != nil {
		return f, err
	}
	f.RenderTook = took
	if o.Outage > 0 {
		f.Draws = []OutageFigures{f.Outage}
		for k := uint64(1); k < outageDraws; k++ {
			g, err := simulate(o, before.Main, schedules, rand.New(rand.NewPCG(o.Seed+k, (o.Seed+k)^0x5eed)))
			if err != nil {
				return f, err
			}
			f.Draws = append(f.Draws, g.Outage)
		}
	}
	return f, err
}

// outageDraws is how many draws of the sleeps and the jitter the outage
// figures are also given over (the ratio of one draw is noisy).
const outageDraws = 10

// drawsSummary is the ratio and the recovery over Draws.
func drawsSummary(f Figures) (lo, hi float64, over, late int, slowest time.Duration) {
	lo = math.Inf(1)
	for _, g := range f.Draws {
		lo, hi = min(lo, g.Ratio()), max(hi, g.Ratio())
		if g.Ratio() > 3 {
			over++
		}
		late += g.Late
		slowest = max(slowest, g.AllRegistered)
	}
	return lo, hi, over, late, slowest
}

// The simulated days, and the outage's start: 10:00 UTC on the second day,
// when every fleet is in its steady state.
var (
	epoch       = time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC)
	OutageStart = epoch.Add(34 * time.Hour)
)

func checkOutage(o Options) error {
	if o.Outage < 0 {
		return fmt.Errorf("-outage %s: negative", o.Outage)
	}
	// The outage, then the hour after it, within the simulated days.
	if need := OutageStart.Add(o.Outage + time.Hour); o.Outage > 0 && need.After(epoch.Add(time.Duration(o.Days)*24*time.Hour)) {
		return fmt.Errorf("-outage %s from %s: needs -days %d or more", o.Outage, OutageStart.Format(time.RFC3339), int(need.Sub(epoch).Hours()/24)+1)
	}
	return nil
}

// simulate counts the runs of the fleets whose schedules are before (every
// cluster the same) and schedules (the chart's, per cluster), and plays
// the after fleet through o.Outage.
func simulate(o Options, before string, schedules []Schedules, rng *rand.Rand) (Figures, error) {
	f := Figures{Clusters: len(schedules), ExampleBefore: before, Seed: o.Seed}
	if err := checkOutage(o); err != nil {
		return f, err
	}
	seen := map[string]bool{}
	for _, s := range schedules {
		seen[s.Main] = true
	}
	f.DistinctSchedules = len(seen)
	if len(schedules) > 0 {
		f.ExampleAfter, f.ExampleRetry = schedules[0].Main, schedules[0].Retry
	}

	end := epoch.Add(time.Duration(o.Days) * 24 * time.Hour)
	var beforeRuns, afterRuns, pythonRuns []time.Time
	perCluster := make([][]time.Time, len(schedules))
	for i := range schedules {
		b, err := cronRuns(before, epoch, end, rng)
		if err != nil {
			return f, err
		}
		a, err := cronRuns(schedules[i].Main, epoch, end, rng)
		if err != nil {
			return f, err
		}
		beforeRuns, afterRuns, perCluster[i] = append(beforeRuns, b...), append(afterRuns, a...), a
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
	if o.Outage > 0 {
		retries := make([]retryLooks, len(schedules))
		for i, s := range schedules {
			var err error
			if retries[i].cronSpec, err = parseCron(s.Retry); err != nil {
				return f, err
			}
			retries[i].cronJobEnv = s.RetryCronJobEnv
		}
		var err error
		if f.Outage, err = playOutage(perCluster, retries, from, end, o.Outage, rng); err != nil {
			return f, err
		}
	}
	return f, nil
}

// OutageFigures are the after fleet's attempts (scheduled runs and
// retries) through a regional outage.
type OutageFigures struct {
	Outage time.Duration
	Start  time.Time
	// NormalPeakPerMinute is the most runs that start in one minute
	// without an outage, over the days after the first;
	// RecoveryPeakPerMinute the most attempts in one minute in the hour
	// after the outage, LastHourPeakPerMinute in the outage's last hour
	// (what the retries already were before it ended).
	NormalPeakPerMinute, RecoveryPeakPerMinute, LastHourPeakPerMinute int
	// PerHour are the fleet's attempts in each hour of the outage (the
	// last may be part of an hour).
	PerHour []int
	// Failing is how many clusters failed; AttemptsMean and AttemptsMax
	// their attempts during the outage.
	Failing      int
	AttemptsMean float64
	AttemptsMax  int
	// AllRegistered is when the last failing cluster was registered,
	// after the outage; Worst the cluster registered nearest its bound
	// (or furthest over it), Late how many were later than theirs.
	AllRegistered time.Duration
	Worst         Recovery
	Late          int
	// RetriesSlept counts the retries the engine took a startup sleep in.
	RetriesSlept int
}

// Ratio is the peak minute after the outage over the normal peak minute.
func (g OutageFigures) Ratio() float64 {
	return float64(g.RecoveryPeakPerMinute) / float64(max(1, g.NormalPeakPerMinute))
}

// Recovery is how long a cluster failed (from its first failure to the
// end of the outage), how long after the outage it was registered, and
// its bound: job/backoff's promise for a registered cluster's refresh,
// max(RefreshGap, failing/4) (MaxGap + Tick once failing/4 passes MaxGap).
type Recovery struct {
	Failing, Took, Bound time.Duration
}

func recoveryBound(failing time.Duration) time.Duration {
	return retry.Policy{}.Bound(failing, true)
}

// playOutage plays each cluster's scheduled runs (runs, sorted) through an
// outage of length d from OutageStart: every attempt in it fails, and the
// failed run records on the Lease its next attempt, retry.Policy{}.Next
// from the streak's first failure with the rng's jitter, which the
// cluster's retry CronJob (retries) runs at its first look at or after
// that time and after the failed run. Every attempt after the outage
// succeeds and ends the streak.
func playOutage(runs [][]time.Time, retries []retryLooks, from, end time.Time, d time.Duration, rng *rand.Rand) (OutageFigures, error) {
	start, stop := OutageStart, OutageStart.Add(d)
	g := OutageFigures{Outage: d, Start: start, PerHour: make([]int, (d+time.Hour-1)/time.Hour)}
	rnd := func(n time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(n))) }
	var normal, attempts []time.Time
	total := 0
	for i, cluster := range runs {
		normal = append(normal, cluster...)
		var since, next, registered time.Time
		during := 0
		for j := 0; j < len(cluster) || !next.IsZero(); {
			var t time.Time
			if !next.IsZero() && (j == len(cluster) || !cluster[j].Before(next)) {
				t, next = next, time.Time{}
			} else {
				t, j = cluster[j], j+1
			}
			attempts = append(attempts, t)
			if !t.Before(start) && t.Before(stop) {
				// Failed: the Lease records the next attempt.
				during++
				g.PerHour[t.Sub(start)/time.Hour]++
				if since.IsZero() {
					since = t
				}
				var err error
				var slept bool
				if next, slept, err = retries[i].attempt(retry.Policy{}.Next(since, t, true, rnd), t, rng); err != nil {
					return g, err
				}
				if slept {
					g.RetriesSlept++
				}
				continue
			}
			if !since.IsZero() && registered.IsZero() {
				registered = t
			}
			next = time.Time{}
		}
		if since.IsZero() {
			continue
		}
		g.Failing++
		total += during
		g.AttemptsMax = max(g.AttemptsMax, during)
		r := Recovery{Failing: stop.Sub(since), Took: registered.Sub(stop)}
		r.Bound = recoveryBound(r.Failing)
		g.AllRegistered = max(g.AllRegistered, r.Took)
		if r.Took > r.Bound {
			g.Late++
		}
		if g.Worst.Bound == 0 || float64(r.Took)/float64(r.Bound) > float64(g.Worst.Took)/float64(g.Worst.Bound) {
			g.Worst = r
		}
	}
	if g.Failing > 0 {
		g.AttemptsMean = float64(total) / float64(g.Failing)
	}
	g.NormalPeakPerMinute = peakPer(normal, from, end, time.Minute)
	g.RecoveryPeakPerMinute = peakPer(attempts, stop, stop.Add(time.Hour), time.Minute)
	g.LastHourPeakPerMinute = peakPer(attempts, stop.Add(-min(d, time.Hour)), stop, time.Minute)
	return g, nil
}

// retryLooks is a cluster's retry CronJob: its looks, and the
// CRONJOB_NAME its Jobs give the engine.
type retryLooks struct {
	cronSpec
	cronJobEnv string
}

// attempt is when the attempt due at due, recorded by a run that started
// at after, sends its first request: the retry CronJob's first look at or
// after due (and after after), plus the startup sleep the engine takes in
// a Job named as the CronJob controller names that look's (slept: it took
// one).
func (r retryLooks) attempt(due, after time.Time, rng *rand.Rand) (at time.Time, slept bool, err error) {
	look := r.next(due, after)
	name := retryCronJob + "-" + strconv.FormatInt(look.Unix()/60, 10)
	d, err := engineSleep(name, r.cronJobEnv, look.Add(5*time.Second), job.DefaultStartupSleepMax, rng)
	if err != nil {
		return time.Time{}, false, err
	}
	return look.Add(d), d > 0, nil
}

// cronSpec is a schedule of the shape cronFires simulates: the minutes
// and hours it fires.
type cronSpec struct {
	minutes [60]bool
	hours   [24]bool
}

func parseCron(sched string) (cronSpec, error) {
	var c cronSpec
	f := strings.Fields(sched)
	if len(f) != 5 || f[2] != "*" || f[3] != "*" || f[4] != "*" {
		return c, fmt.Errorf("schedule %q: only minute and hour fields are simulated", sched)
	}
	mins, err := cronField(f[0], 59)
	if err != nil {
		return c, err
	}
	hours, err := cronField(f[1], 23)
	if err != nil {
		return c, err
	}
	for _, m := range mins {
		c.minutes[m] = true
	}
	for _, h := range hours {
		c.hours[h] = true
	}
	return c, nil
}

// next is the schedule's first fire at or after due and after after: when
// the retry CronJob runs an attempt that came due at due, recorded by a
// run that started at after.
func (c cronSpec) next(due, after time.Time) time.Time {
	t := due
	if !t.After(after) {
		t = after.Add(time.Nanosecond)
	}
	m := t.Truncate(time.Minute)
	if m.Before(t) {
		m = m.Add(time.Minute)
	}
	for range 48 * 60 {
		if c.hours[m.Hour()] && c.minutes[m.Minute()] {
			return m
		}
		m = m.Add(time.Minute)
	}
	panic(fmt.Sprintf("schedule %v never fires", c))
}

// Names of the release's CronJobs in the render ("helm template
// registration-engine"): the main one and the retry CronJob,
// <release name>-retry.
const (
	mainCronJob  = kube.CronJobName
	retryCronJob = kube.CronJobName + "-retry"
)

// cronJob is what fleetsim reads of a rendered CronJob.
type cronJob struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Schedule    string `json:"schedule"`
		JobTemplate struct {
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Env []struct {
								Name  string `json:"name"`
								Value string `json:"value"`
							} `json:"env"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		} `json:"jobTemplate"`
	} `json:"spec"`
}

// env is the value of the variable name in the CronJob's Jobs.
func (cj cronJob) env(name string) string {
	for _, c := range cj.Spec.JobTemplate.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}

// Schedules are a cluster's CronJob schedules as the chart renders them.
type Schedules struct {
	Main, Retry string
	// Offset is the install's schedule offset, as the main CronJob
	// records it.
	Offset int
	// RetryCronJobEnv is the CRONJOB_NAME the retry CronJob's Jobs give
	// the engine: whether they take the startup sleep is the engine's
	// rule (job.ScheduledRun) on it and their names.
	RetryCronJobEnv string
}

// render returns the schedules helm renders for a cluster whose extension
// resource ID is id, with the Marketplace bundle's values: each CronJob's,
// selected by its name among the render's documents.
func render(ctx context.Context, o Options, id string, set ...string) (Schedules, error) {
	args := []string{"template", "registration-engine", o.Chart, "--namespace", operator.Namespace,
		"--values", filepath.Join(o.Chart, "..", "..", "marketplace", "values.yaml"),
		"--set", "global.azure.extension.resourceId=" + id,
		"--set", "global.azure.identity.clientId=00000000-0000-0000-0000-000000000001",
		"--set", "global.azure.marketplace.planId=plan",
		"--set", "global.azure.images.engine.registry=example.azurecr.io",
		"--set", "global.azure.images.engine.image=registration-engine",
		"--set", "global.azure.images.engine.tag=latest",
		"--set", "global.azure.images.engine.digest=sha256:" + strings.Repeat("0", 64),
		// What manifests/marketplace/stage.sh fills in.
		"--set", "marketplace.publisherId=publisher", "--set", "marketplace.offerId=offer"}
	for _, s := range set {
		args = append(args, "--set-string", s)
	}
	cmd := exec.CommandContext(ctx, o.Helm, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return Schedules{}, fmt.Errorf("helm template: %w: %s", err, stderr.String())
	}
	cjs, err := cronJobs(b)
	if err != nil {
		return Schedules{}, err
	}
	scheduled, ok := cjs[mainCronJob]
	if !ok || scheduled.Spec.Schedule == "" {
		return Schedules{}, fmt.Errorf("helm template: no CronJob %s with a schedule", mainCronJob)
	}
	off, err := strconv.Atoi(scheduled.Metadata.Annotations[offsetAnnotation])
	if err != nil {
		return Schedules{}, fmt.Errorf("helm template: CronJob %s: %s: %v", mainCronJob, offsetAnnotation, err)
	}
	retry, ok := cjs[retryCronJob]
	if !ok || retry.Spec.Schedule == "" {
		return Schedules{}, fmt.Errorf("helm template: no CronJob %s with a schedule", retryCronJob)
	}
	return Schedules{Main: scheduled.Spec.Schedule, Retry: retry.Spec.Schedule, Offset: off, RetryCronJobEnv: retry.env("CRONJOB_NAME")}, nil
}

// offsetAnnotation is where the main CronJob records the install's
// schedule offset (_lifecycle.tpl's registration-engine.scheduleOffset).
const offsetAnnotation = "registration-engine.cattle.io/schedule-offset"

// retryIntervalMinutes is the chart's retry.intervalMinutes default, the
// Tick of retry.Policy{}.
const retryIntervalMinutes = int(retry.DefaultTick / time.Minute)

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// cronJobs are the CronJobs among a render's documents, by name.
func cronJobs(render []byte) (map[string]cronJob, error) {
	out := map[string]cronJob{}
	for _, doc := range docSeparator.Split(string(render), -1) {
		var cj cronJob
		if err := yaml.Unmarshal([]byte(doc), &cj); err != nil {
			return nil, fmt.Errorf("helm template: %w:\n%s", err, doc)
		}
		if cj.Kind == "CronJob" {
			out[cj.Metadata.Name] = cj
		}
	}
	return out, nil
}

// mainSchedule and retrySchedule are the schedules the chart renders for
// an install whose schedule offset (minute of the day) is offset: the main
// CronJob at minute M, hours H and H+18, and the retry CronJob every n
// minutes from offset mod n. The tests model fleets with them where
// rendering every cluster with helm would be slow; TestChartSchedules
// checks them against helm.
func mainSchedule(offset int) string {
	m, h1 := offset%60, offset/60
	h2 := (h1 + 18) % 24
	return fmt.Sprintf("%d %d,%d * * *", m, min(h1, h2), max(h1, h2))
}

func retrySchedule(offset, n int) string {
	return fmt.Sprintf("%d-59/%d * * * *", offset%n, n)
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
		d, err := engineSleep(name, kube.CronJobName, t.Add(5*time.Second), job.DefaultStartupSleepMax, rng)
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
// jobName whose pod starts at now with CRONJOB_NAME cronJobEnv:
// job.Job.Run's own rule, stopped before the Lease.
func engineSleep(jobName, cronJobEnv string, now time.Time, sleepMax time.Duration, rng *rand.Rand) (time.Duration, error) {
	var slept time.Duration
	j := &job.Job{
		Scheduled:    job.ScheduledRun(jobName, cronJobEnv, now),
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
	return peakPer(runs, from, to, time.Hour)
}

// peakPer is the most runs in any window of width starting on a minute
// in [from, to-width].
func peakPer(runs []time.Time, from, to time.Time, width time.Duration) int {
	slices.SortFunc(runs, func(a, b time.Time) int { return a.Compare(b) })
	peak := 0
	for w := from; !w.Add(width).After(to); w = w.Add(time.Minute) {
		i, _ := slices.BinarySearchFunc(runs, w, func(a, b time.Time) int { return a.Compare(b) })
		j, _ := slices.BinarySearchFunc(runs, w.Add(width), func(a, b time.Time) int { return a.Compare(b) })
		peak = max(peak, j-i)
	}
	return peak
}
