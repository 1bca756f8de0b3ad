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
// each length given, from 10:00 UTC on the second day (issue 42, "no
// stampede after a regional outage"; issue 53, "a fleet that backs off as
// a fleet"): every run fails during it. Two populations meet it:
//
//   - the fleet's clusters, registered before it: a failed scheduled run
//     is a refresh, whose next attempt is retry.Policy{}.Next from the
//     first failure of the cluster's streak, run by the cluster's retry
//     CronJob (its schedule rendered by helm too) at its first look at or
//     after that time; a scheduled run while that attempt is pending, not
//     yet due, defers to it (retry.Defers), as the engine's does;
//   - clusters installed during it (-installs-per-hour, at uniformly drawn
//     times, each with its own rendered schedules): the release's own run
//     at install fails, and their retries are a first contact's.
//
// Every attempt after the outage succeeds. For each outage and each of
// -draws draws of the startup sleeps, the jitter and the install times
// (seeds -seed, -seed+1, …) it reports the busiest minute in the hour after
// the outage against the busiest minute without one, the fleet's attempts
// by hour of the outage, and how long after it each cluster is registered
// against job/retry's bound for it (Policy.Bound).
//
//	go run ./e2e/cmd/fleetsim -helm $(HELM_BIN) -clusters 1000 -outage 2h,12h -draws 10
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
	// Outages, when set, are regional outages from OutageStart on the
	// second day, each played on its own: every run fails during it.
	Outages []time.Duration
	// Draws is how many draws of the startup sleeps, the jitter and the
	// install times each outage is played with (seeds Seed, Seed+1, …).
	Draws int
	// InstallsPerHour is how many clusters are installed in each hour of
	// an outage.
	InstallsPerHour float64
}

// Figures are the peak runs per hour of each fleet, over the days after
// the first (every fleet is in its steady state by then), and the after
// fleet through each outage.
type Figures struct {
	Clusters                    int
	Seed                        uint64
	Before, After, Python       int
	MeanPython                  float64
	DistinctSchedules           int
	RenderTook                  time.Duration
	ExampleBefore, ExampleAfter string
	ExampleRetry                string
	// Outages are the after fleet through each of Options.Outages, in
	// their order; SimulateTook how long all their draws took.
	Outages      []Outage
	SimulateTook time.Duration
}

// Outage is one outage's draws.
type Outage struct {
	Outage time.Duration
	Draws  []OutageFigures
}

// outagesFlag is -outage: durations separated by commas.
type outagesFlag []time.Duration

func (f *outagesFlag) String() string {
	var s []string
	for _, d := range *f {
		s = append(s, shortDuration(d))
	}
	return strings.Join(s, ",")
}

func (f *outagesFlag) Set(v string) error {
	*f = nil
	for _, p := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil {
			return err
		}
		*f = append(*f, d)
	}
	return nil
}

func run(args []string, out io.Writer) error {
	var o Options
	fs := flag.NewFlagSet("fleetsim", flag.ContinueOnError)
	fs.StringVar(&o.Helm, "helm", os.Getenv("HELM_BIN"), "helm binary (make helm)")
	fs.StringVar(&o.Chart, "chart", "manifests/chart/registration-engine", "the chart")
	fs.IntVar(&o.Clusters, "clusters", 1000, "clusters in the fleet")
	fs.IntVar(&o.Days, "days", 6, "days simulated")
	fs.Uint64Var(&o.Seed, "seed", 1, "random seed of the IDs, the startup sleeps and the Python fleet's start times; draw k of an outage (its sleeps, the retries' jitter and the install times) uses seed+k")
	fs.Var((*outagesFlag)(&o.Outages), "outage", "also simulate regional outages this long (e.g. 2h,12h), each from 10:00 UTC on day 2: every run fails during it")
	fs.IntVar(&o.Draws, "draws", 1, "draws of each outage (seeds -seed, -seed+1, …)")
	fs.Float64Var(&o.InstallsPerHour, "installs-per-hour", DefaultInstallsPerHour, "clusters installed in each hour of an outage")
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
	for _, oc := range f.Outages {
		for _, g := range oc.Draws {
			fmt.Fprintf(out, "outage %s, seed %d: busiest minute normal %d, after recovery %d (%.2fx); attempts by hour: registered %v, installed during %v; deferred scheduled runs %d\n",
				shortDuration(g.Outage), g.Seed, g.NormalPeakPerMinute, g.RecoveryPeakPerMinute, g.Ratio(), g.Registered.PerHour, g.Installed.PerHour, g.Deferred)
			for _, p := range []struct {
				name string
				p    Population
			}{{"registered", g.Registered}, {"installed during", g.Installed}} {
				fmt.Fprintf(out, "  %s: %d failed, attempts each mean %.1f max %d; all registered %s after; nearest its bound: %s after, failing %s, bound %s; %d over their bound\n",
					p.name, p.p.Failed, p.p.AttemptsMean, p.p.AttemptsMax, p.p.AllRegistered, p.p.Worst.Took, p.p.Worst.Failing.Round(time.Second), p.p.Worst.Bound.Round(time.Second), p.p.Late)
			}
		}
		s := oc.summary()
		fmt.Fprintf(out, "outage %s over %d draws: ratio min %.2fx median %.2fx max %.2fx, %d draws above 3x; registered %d/%d within their bound, installed during %d/%d\n",
			shortDuration(oc.Outage), len(oc.Draws), s.lo, s.median, s.hi, s.over, s.regWithin, s.regFailed, s.instWithin, s.instFailed)
	}
	if len(f.Outages) > 0 {
		fmt.Fprintf(out, "outages simulated in %s\n", f.SimulateTook.Round(time.Millisecond))
	}
	return nil
}

// DefaultInstallsPerHour is -installs-per-hour's default: 5 an hour, 120
// a day, a fleet of 1000 growing by 12 % a day; far more than any real
// day, so that the first contacts weigh on the figures.
const DefaultInstallsPerHour = 5

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
		f.Python, f.MeanPython, float64(f.Python)/f.MeanPython, o.Clusters, o.Days, o.Seed, outageFlags(o), outageSection(o, f), sectionEnd)
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

// outageFlags are the command's flags of the outage, for the doc.
func outageFlags(o Options) string {
	if len(o.Outages) == 0 {
		return ""
	}
	s := " -outage " + (*outagesFlag)(&o.Outages).String() + fmt.Sprintf(" -draws %d", o.Draws)
	if o.InstallsPerHour != DefaultInstallsPerHour {
		s += fmt.Sprintf(" -installs-per-hour %g", o.InstallsPerHour)
	}
	return s
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

// Simulate renders every cluster's schedules with helm and counts the
// fleets' runs, then plays each outage Draws times.
func Simulate(ctx context.Context, o Options) (Figures, error) {
	if o.Helm == "" {
		return Figures{}, errors.New("no helm: pass -helm or set HELM_BIN (make helm)")
	}
	if o.Clusters < 1 {
		return Figures{}, fmt.Errorf("-clusters %d: at least 1", o.Clusters)
	}
	if err := checkOutages(o); err != nil {
		return Figures{}, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x5eed))
	start := time.Now()
	before, err := render(ctx, o, "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks/providers/Microsoft.KubernetesConfiguration/extensions/rancher", "schedule=0 */18 * * *")
	if err != nil {
		return Figures{}, err
	}
	// The fleet, then the clusters installed during the longest outage,
	// whose IDs come from a source of their own: the fleet's figures do
	// not change with how many are installed.
	schedules := make([]Schedules, o.Clusters+maxInstalls(o))
	ids := rand.New(rand.NewPCG(o.Seed, o.Seed^0x1257a11))
	for i := range schedules {
		rng := rng
		if i >= o.Clusters {
			rng = ids
		}
		id := fmt.Sprintf("/subscriptions/%08x-%04x-4000-8000-%012x/resourceGroups/rg-%d/providers/Microsoft.ContainerService/managedClusters/aks-%d/providers/Microsoft.KubernetesConfiguration/extensions/rancher",
			rng.Uint32(), rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff, i, i)
		if schedules[i], err = render(ctx, o, id); err != nil {
			return Figures{}, err
		}
	}
	took := time.Since(start)
	f, err := simulate(o, before.Main, schedules[:o.Clusters], schedules[o.Clusters:], rng)
	f.RenderTook = took
	return f, err
}

// maxInstalls is how many clusters are installed during the longest of
// the outages.
func maxInstalls(o Options) int {
	n := 0
	for _, d := range o.Outages {
		n = max(n, installs(o, d))
	}
	return n
}

// installs is how many clusters are installed during an outage of d.
func installs(o Options, d time.Duration) int {
	return int(o.InstallsPerHour*d.Hours() + 0.5)
}

// summary is an outage's figures over its draws.
type summary struct {
	lo, median, hi                               float64
	over                                         int
	regFailed, regWithin, instFailed, instWithin int
	slowestReg, slowestInst                      time.Duration
}

func (oc Outage) summary() summary {
	var s summary
	var ratios []float64
	for _, g := range oc.Draws {
		ratios = append(ratios, g.Ratio())
		if g.Ratio() > 3 {
			s.over++
		}
		s.regFailed += g.Registered.Failed
		s.regWithin += g.Registered.Failed - g.Registered.Late
		s.instFailed += g.Installed.Failed
		s.instWithin += g.Installed.Failed - g.Installed.Late
		s.slowestReg = max(s.slowestReg, g.Registered.AllRegistered)
		s.slowestInst = max(s.slowestInst, g.Installed.AllRegistered)
	}
	slices.Sort(ratios)
	if n := len(ratios); n > 0 {
		s.lo, s.hi = ratios[0], ratios[n-1]
		s.median = (ratios[(n-1)/2] + ratios[n/2]) / 2
	}
	return s
}

// The simulated days, and the outage's start: 10:00 UTC on the second day,
// when every fleet is in its steady state.
var (
	epoch       = time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC)
	OutageStart = epoch.Add(34 * time.Hour)
)

func checkOutages(o Options) error {
	for _, d := range o.Outages {
		if d <= 0 {
			return fmt.Errorf("-outage %s: not positive", d)
		}
		// The outage, then the hour after it, within the simulated days.
		if need := OutageStart.Add(d + time.Hour); need.After(epoch.Add(time.Duration(o.Days) * 24 * time.Hour)) {
			return fmt.Errorf("-outage %s from %s: needs -days %d or more", d, OutageStart.Format(time.RFC3339), int(need.Sub(epoch).Hours()/24)+1)
		}
	}
	if len(o.Outages) > 0 && o.Draws < 1 {
		return fmt.Errorf("-draws %d: at least 1", o.Draws)
	}
	if o.InstallsPerHour < 0 {
		return fmt.Errorf("-installs-per-hour %g: negative", o.InstallsPerHour)
	}
	return nil
}

// simulate counts the runs of the fleets whose schedules are before (every
// cluster the same) and schedules (the chart's, per cluster), drawing the
// startup sleeps and the Python fleet's start times from rng, and plays
// the after fleet through each of o.Outages, o.Draws times (seeds o.Seed,
// o.Seed+1, …), with the clusters whose schedules are installed installed
// during it.
func simulate(o Options, before string, schedules, installed []Schedules, rng *rand.Rand) (Figures, error) {
	f := Figures{Clusters: len(schedules), ExampleBefore: before, Seed: o.Seed}
	if err := checkOutages(o); err != nil {
		return f, err
	}
	if n := maxInstalls(o); len(installed) < n {
		return f, fmt.Errorf("%d clusters to install, %d schedules", n, len(installed))
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
	from := epoch.Add(24 * time.Hour)
	var beforeRuns, afterRuns, pythonRuns []time.Time
	for _, s := range schedules {
		b, err := cronRuns(before, epoch, end, rng)
		if err != nil {
			return f, err
		}
		a, err := cronRuns(s.Main, epoch, end, rng)
		if err != nil {
			return f, err
		}
		beforeRuns, afterRuns = append(beforeRuns, b...), append(afterRuns, a...)
		// The Python engine: installed at any time, then 18 h ± 1 h.
		for t := epoch.Add(-time.Duration(rng.Int64N(int64(18 * time.Hour)))); t.Before(end); t = t.Add(18*time.Hour + time.Duration(rng.Int64N(int64(2*time.Hour))) - time.Hour) {
			pythonRuns = append(pythonRuns, t)
		}
	}
	f.Before, f.After, f.Python = peakPerHour(beforeRuns, from, end), peakPerHour(afterRuns, from, end), peakPerHour(pythonRuns, from, end)
	n := 0
	for _, t := range pythonRuns {
		if !t.Before(from) && t.Before(end) {
			n++
		}
	}
	f.MeanPython = float64(n) / end.Sub(from).Hours()
	if len(o.Outages) == 0 {
		return f, nil
	}
	started := time.Now()
	for i, d := range o.Outages {
		f.Outages = append(f.Outages, Outage{Outage: d})
		for k := range o.Draws {
			seed := o.Seed + uint64(k)
			g, err := playDraw(o, d, schedules, installed[:installs(o, d)], from, end, rand.New(rand.NewPCG(seed, seed^0x5eed)))
			if err != nil {
				return f, err
			}
			g.Seed = seed
			f.Outages[i].Draws = append(f.Outages[i].Draws, g)
		}
	}
	f.SimulateTook = time.Since(started)
	return f, nil
}

// playDraw plays one draw of an outage of d: the fleet's scheduled runs
// with their startup sleeps drawn from rng, the clusters installed during
// it at install times drawn from rng, and the jitter of every retry.
func playDraw(o Options, d time.Duration, schedules, installed []Schedules, from, end time.Time, rng *rand.Rand) (OutageFigures, error) {
	fleet := make([]member, 0, len(schedules)+len(installed))
	at := installTimes(len(installed), OutageStart, d, rng)
	for i, s := range append(slices.Clone(schedules), installed...) {
		runs, err := cronRuns(s.Main, epoch, end, rng)
		if err != nil {
			return OutageFigures{}, err
		}
		m := member{runs: runs}
		if m.retry.cronSpec, err = parseCron(s.Retry); err != nil {
			return OutageFigures{}, err
		}
		m.retry.cronJobEnv = s.RetryCronJobEnv
		if i >= len(schedules) {
			m.installed = at[i-len(schedules)]
		}
		fleet = append(fleet, m)
	}
	return playOutage(fleet, from, end, d, rng)
}

// outageSection is the fleet section's part on the outages, empty
// without one.
func outageSection(o Options, f Figures) string {
	if len(f.Outages) == 0 {
		return ""
	}
	var names []string
	for _, oc := range f.Outages {
		names = append(names, shortDuration(oc.Outage))
	}
	draws := len(f.Outages[0].Draws)
	var b strings.Builder
	fmt.Fprintf(&b, `
### After a regional outage

The after fleet through outages of %s of SUSE's servers from %s on day 2, each played with %d draws of the startup
sleeps, the retries' jitter and the install times (seeds %d to %d; all draws took %s). Every run fails during the
outage, scheduled runs and retries alike; every attempt after it succeeds. Each failed run records on its Lease its
next attempt, retry.Policy{}.Next (job/retry, whose package doc states the rule) from the first failure of the
cluster's streak, jittered by the simulation's seeded random source, and the cluster's retry CronJob (helm's render
for it too, e.g. %q) runs it at its first look at or after that time. Two populations meet the outage:

- **registered**: the fleet's %d clusters, registered before it. A failed scheduled run is a refresh, and a
  scheduled run while its next attempt is pending, not yet due, defers to it (retry.Defers) and sends nothing.
  Bound: refreshed within job/retry's bound for a refresh, Policy.Bound(failing time, true).
- **installed during**: %g clusters installed in each hour of the outage at uniformly drawn times (each with its own
  rendered schedules; far more than a real fleet gains in a day, so that they weigh on the figures). The release's
  own run at install fails; then they retry as a first contact, which job/retry leaves as it was. Bound:
  registered within Policy.Bound(failing time, false), i.e. max(10 min, failing time/4).

The busiest minute is counted in attempts (scheduled runs that send a request, and retries) in the first hour after
the outage, against the busiest minute of run starts without an outage (the days after the first); goal at most 3× in
every draw. A cluster's failing time runs from its first failure to the end of the outage.

| outage | busiest minute after recovery vs normal, min / median / max over draws | draws above 3× | registered: failed, within their bound (all draws) | installed during: within their bound | the latest after recovery: registered / installed during |
|---|---|---|---|---|---|
`, strings.Join(names, " and "), OutageStart.Format("15:04 MST"), draws, f.Seed, f.Seed+uint64(draws)-1, f.SimulateTook.Round(time.Millisecond),
		f.ExampleRetry, f.Clusters, o.InstallsPerHour)
	for _, oc := range f.Outages {
		s := oc.summary()
		fmt.Fprintf(&b, "| %s | %.2f× / %.2f× / %.2f× | %d | %d of %d | %d of %d | %s / %s |\n",
			shortDuration(oc.Outage), s.lo, s.median, s.hi, s.over, s.regWithin, s.regFailed, s.instWithin, s.instFailed, s.slowestReg, s.slowestInst)
	}
	for _, oc := range f.Outages {
		reg, inst, lo, hi := oc.perHour()
		fmt.Fprintf(&b, "\nThe fleet's attempts in each hour of the %s outage (medians over the draws, and the range of the sum):\n\n", shortDuration(oc.Outage))
		row := func(name string, cell func(h int) string) {
			b.WriteString("| " + name + " |")
			for h := range reg {
				b.WriteString(" " + cell(h) + " |")
			}
			b.WriteString("\n")
		}
		row("hour of the outage", func(h int) string { return strconv.Itoa(h + 1) })
		b.WriteString("|---|" + strings.Repeat("---|", len(reg)) + "\n")
		row("registered", func(h int) string { return strconv.Itoa(reg[h]) })
		row("installed during", func(h int) string { return strconv.Itoa(inst[h]) })
		row("the fleet, min–max", func(h int) string { return fmt.Sprintf("%d–%d", lo[h], hi[h]) })
		b.WriteString("\n" + oc.trend() + "\n")
		fmt.Fprintf(&b, "\nEach draw of the %s outage:\n\n", shortDuration(oc.Outage))
		b.WriteString("| seed | busiest minute: normal, after recovery | ratio | the fleet's attempts in each hour of the outage (registered + installed during) | registered within their bound | installed during within their bound |\n|---|---|---|---|---|---|\n")
		for _, g := range oc.Draws {
			var series []string
			for h, n := range g.Registered.PerHour {
				series = append(series, fmt.Sprintf("%d+%d", n, g.Installed.PerHour[h]))
			}
			fmt.Fprintf(&b, "| %d | %d, %d | %.2f× | %s | %d of %d | %d of %d |\n", g.Seed, g.NormalPeakPerMinute, g.RecoveryPeakPerMinute, g.Ratio(),
				strings.Join(series, ", "), g.Registered.Failed-g.Registered.Late, g.Registered.Failed, g.Installed.Failed-g.Installed.Late, g.Installed.Failed)
		}
	}
	return b.String()
}

// perHour are an outage's attempts per hour over its draws: the medians
// of each population's, and the least and most of their sum.
func (oc Outage) perHour() (reg, inst, lo, hi []int) {
	median := func(v []int) int {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	for h := range oc.Draws[0].Registered.PerHour {
		var r, i, sum []int
		for _, g := range oc.Draws {
			r, i = append(r, g.Registered.PerHour[h]), append(i, g.Installed.PerHour[h])
			sum = append(sum, g.Registered.PerHour[h]+g.Installed.PerHour[h])
		}
		reg, inst = append(reg, median(r)), append(inst, median(i))
		lo, hi = append(lo, slices.Min(sum)), append(hi, slices.Max(sum))
	}
	return reg, inst, lo, hi
}

// trend says, of the registered fleet's attempts per hour (the medians
// over the draws), in which hour they peak and where they end.
func (oc Outage) trend() string {
	reg, _, _, _ := oc.perHour()
	peak := 0
	for h, n := range reg {
		if n > reg[peak] {
			peak = h
		}
	}
	last := len(reg) - 1
	if peak == last {
		return fmt.Sprintf("The registered clusters' attempts per hour rise through the whole %s outage, to %d in its last hour.", shortDuration(oc.Outage), reg[last])
	}
	return fmt.Sprintf("The registered clusters' attempts per hour peak in hour %d (%d), while their scheduled runs still meet the outage for the first time, then fall: at most %d an hour after it, %d in the last hour.",
		peak+1, reg[peak], slices.Max(reg[peak+1:]), reg[last])
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
