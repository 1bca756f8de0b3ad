package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/kube"
)

// A fleet on the chart's own schedules peaks at most 3 times as high as
// the Python engine's, where every cluster on "0 */18 * * *" peaked about
// 18 times as high (docs/BENCHMARKS.md has the 1000-cluster figure).
func TestFleetSpreadsOverTheDay(t *testing.T) {
	f, err := Simulate(context.Background(), Options{Helm: testkit.Helm(t), Chart: "../../../manifests/chart/registration-engine", Clusters: 120, Days: 3, Seed: 7})
	require.NoError(t, err)
	t.Logf("clusters %d (%d schedules, rendered in %s): peak runs/hour before %d, after %d, Python %d (mean %.1f)", f.Clusters, f.DistinctSchedules, f.RenderTook.Round(time.Millisecond), f.Before, f.After, f.Python, f.MeanPython)
	assert.Equal(t, f.Clusters, f.Before, "before: the whole fleet in one hour")
	assert.Greater(t, f.DistinctSchedules, f.Clusters/2, "the chart chooses a schedule per cluster")
	assert.LessOrEqual(t, float64(f.After), 3*f.MeanPython*1.5, "after: within 3x the Python engine's mean rate, with room for the noise of 120 clusters")
	assert.Less(t, f.After*4, f.Before, "after: a fraction of before")
}

func TestCronFires(t *testing.T) {
	day := time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC)
	tests := map[string][]time.Duration{
		"0 */18 * * *":     {0, 18 * time.Hour},
		"7 4,22 * * *":     {4*time.Hour + 7*time.Minute, 22*time.Hour + 7*time.Minute},
		"30 2-23/18 * * *": {2*time.Hour + 30*time.Minute, 20*time.Hour + 30*time.Minute},
	}
	for sched, want := range tests {
		t.Run(sched, func(t *testing.T) {
			got, err := cronFires(sched, day, day.Add(24*time.Hour))
			require.NoError(t, err)
			var offs []time.Duration
			for _, g := range got {
				offs = append(offs, g.Sub(day))
			}
			assert.Equal(t, want, offs)
		})
	}
}

// modelFleet is n clusters on the chart's schedules without helm: offsets
// drawn uniformly over the day, the schedules mainSchedule and
// retrySchedule give them, and the retry Jobs' CRONJOB_NAME the main
// CronJob's name (TestChartSchedules checks all three against helm).
func modelFleet(n int, rng *rand.Rand) []Schedules {
	out := make([]Schedules, n)
	for i := range out {
		o := rng.IntN(1440)
		out[i] = Schedules{Main: mainSchedule(o), Retry: retrySchedule(o, retryIntervalMinutes), Offset: o, RetryCronJobEnv: kube.CronJobName}
	}
	return out
}

// No stampede after a regional outage (issue 42): in the hour after the
// outage the fleet's busiest minute is at most 3 times its busiest minute
// without one, every registered cluster is refreshed within job/retry's
// bound for a refresh, and every cluster installed during the outage is
// registered within a first contact's, max(10 min, its failing time/4). A
// small fleet: the ratio grows with the fleet, since the normal busiest
// minute grows more slowly than the retries do; TestAFleetBacksOffAsAFleet
// plays 1000 clusters.
func TestNoStampedeAfterAnOutage(t *testing.T) {
	for _, tc := range []struct {
		outage time.Duration
		seed   uint64
	}{{2 * time.Hour, 1}, {2 * time.Hour, 2}, {2 * time.Hour, 3}, {12 * time.Hour, 1}} {
		rng := rand.New(rand.NewPCG(tc.seed, tc.seed^0x5eed))
		o := Options{Days: 3, Seed: tc.seed, Outages: []time.Duration{tc.outage}, Draws: 1, InstallsPerHour: 2}
		f, err := simulate(o, "0 */18 * * *", modelFleet(200, rng), modelFleet(maxInstalls(o), rng), rng)
		require.NoError(t, err)
		g := f.Outages[0].Draws[0]
		t.Logf("outage %s, seed %d: %d registered clusters failed, attempts each mean %.1f max %d; by hour: registered %v, installed during %v; busiest minute: normal %d, the outage's last hour %d, after %d (%.1fx); all registered %s after, worst %+v; installed during: %d, all registered %s after, worst %+v",
			tc.outage, tc.seed, g.Registered.Failed, g.Registered.AttemptsMean, g.Registered.AttemptsMax, g.Registered.PerHour, g.Installed.PerHour, g.NormalPeakPerMinute, g.LastHourPeakPerMinute, g.RecoveryPeakPerMinute, g.Ratio(), g.Registered.AllRegistered, g.Registered.Worst, g.Installed.Failed, g.Installed.AllRegistered, g.Installed.Worst)
		assert.Greater(t, g.Registered.Failed, 200/24, "the outage stops the clusters that run during it")
		assert.Equal(t, installs(o, tc.outage), g.Installed.Failed, "every cluster installed during the outage failed its first run")
		assert.LessOrEqual(t, g.Ratio(), 3.0, "outage %s, seed %d: the first hour after the outage", tc.outage, tc.seed)
		for name, p := range map[string]Population{"registered": g.Registered, "installed during": g.Installed} {
			assert.Zero(t, p.Late, "outage %s, seed %d: %s clusters registered later than their bound after it; worst %+v", tc.outage, tc.seed, name, p.Worst)
			assert.LessOrEqual(t, p.Worst.Took, p.Worst.Bound, name)
			assert.Positive(t, p.Worst.Took, name)
		}
		assert.LessOrEqual(t, g.Installed.AllRegistered, max(10*time.Minute, tc.outage/4), "installed during: within max(10 min, outage/4)")
		assert.Zero(t, g.RetriesSlept, "a retry takes no startup sleep")
	}
}

// A fleet that backs off as a fleet (issue 53): 1000 clusters on the
// chart's schedules, 10 draws (seeds 1 to 10) of each outage, with 5
// clusters installed in each of its hours. Through a 12-hour or a 2-day
// outage the registered clusters' attempts per hour peak within the first
// hours (while their scheduled runs still meet the outage for the first
// time) and then fall; the busiest minute in the hour after the outage is
// at most 3 times normal in every draw; every cluster is registered
// within its bound. docs/BENCHMARKS.md has the same with helm's schedules.
func TestAFleetBacksOffAsAFleet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1^0x5eed))
	o := Options{Days: 4, Seed: 1, Draws: 10, InstallsPerHour: DefaultInstallsPerHour, Outages: []time.Duration{2 * time.Hour, 12 * time.Hour, 48 * time.Hour}}
	f, err := simulate(o, "0 */18 * * *", modelFleet(1000, rng), modelFleet(maxInstalls(o), rng), rng)
	require.NoError(t, err)
	for _, oc := range f.Outages {
		s := oc.summary()
		reg, inst, lo, hi := oc.perHour()
		t.Logf("proved: fleetsim, 1000 clusters (+%g installed an hour), %d draws of a %s outage: busiest minute after recovery %.2fx / %.2fx / %.2fx normal (min/median/max), %d draws above 3x; registered within their bound %d of %d, installed during %d of %d; attempts per hour (medians) registered %v, installed during %v, fleet range %v–%v; %s",
			o.InstallsPerHour, len(oc.Draws), shortDuration(oc.Outage), s.lo, s.median, s.hi, s.over, s.regWithin, s.regFailed, s.instWithin, s.instFailed, reg, inst, lo, hi, oc.trend())
		assert.Zero(t, s.over, "outage %s: draws above 3x normal", oc.Outage)
		assert.Equal(t, s.regFailed, s.regWithin, "outage %s: registered clusters within their bound", oc.Outage)
		assert.Equal(t, s.instFailed, s.instWithin, "outage %s: installed clusters within their bound", oc.Outage)
		assert.Equal(t, len(oc.Draws)*installs(o, oc.Outage), s.instFailed)
		if oc.Outage < 12*time.Hour {
			continue
		}
		peak := slices.Index(reg, slices.Max(reg))
		assert.Less(t, peak, 8, "outage %s: the registered clusters' attempts peak in the first hours: %v", oc.Outage, reg)
		assert.Less(t, float64(reg[len(reg)-1]), 0.8*float64(reg[peak]), "outage %s: and fall: %v", oc.Outage, reg)
		if oc.Outage >= 48*time.Hour {
			assert.Less(t, float64(slices.Max(reg[24:])), 0.5*float64(reg[peak]), "outage %s: the second day below half the peak: %v", oc.Outage, reg)
		}
	}
}

// The retry CronJob runs an attempt at its first look at or after the time
// the failed run recorded, and never the failed run's own look again.
func TestRetryLooks(t *testing.T) {
	c, err := parseCron(retrySchedule(367, 10)) // "7-59/10 * * * *"
	require.NoError(t, err)
	at := func(h, m, s int) time.Time { return time.Date(2027, 1, 5, h, m, s, 0, time.UTC) }
	assert.Equal(t, at(10, 7, 0), c.next(at(10, 3, 0), at(10, 2, 0)))
	assert.Equal(t, at(10, 7, 0), c.next(at(10, 7, 0), at(10, 2, 0)), "due on a look: that look")
	assert.Equal(t, at(10, 17, 0), c.next(at(10, 7, 0), at(10, 7, 0)), "the failed run's own look is past")
	assert.Equal(t, at(11, 7, 0), c.next(at(10, 57, 1), at(10, 50, 0)), "into the next hour")
	assert.Equal(t, "7 4,22 * * *", mainSchedule(4*60+7))
	assert.Equal(t, "59 17,23 * * *", mainSchedule(23*60+59))
}

// The schedules the tests model fleets with (mainSchedule, retrySchedule)
// are the ones helm renders from the chart, and the engine takes no startup
// sleep in the retry CronJob's Jobs.
func TestChartSchedules(t *testing.T) {
	o := Options{Helm: testkit.Helm(t), Chart: "../../../manifests/chart/registration-engine"}
	for i := range 3 {
		id := fmt.Sprintf("/subscriptions/00000000-0000-4000-8000-00000000000%d/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks/providers/Microsoft.KubernetesConfiguration/extensions/rancher", i)
		s, err := render(context.Background(), o, id)
		require.NoError(t, err)
		assert.Equal(t, mainSchedule(s.Offset), s.Main, id)
		assert.Equal(t, retrySchedule(s.Offset, retryIntervalMinutes), s.Retry, id)
		assert.Equal(t, kube.CronJobName, s.RetryCronJobEnv, id)
		look := time.Date(2027, 1, 5, 10, 9, 0, 0, time.UTC)
		d, err := engineSleep(retryCronJob+"-"+strconv.FormatInt(look.Unix()/60, 10), s.RetryCronJobEnv, look.Add(5*time.Second), time.Hour, rand.New(rand.NewPCG(1, 1)))
		require.NoError(t, err)
		assert.Zero(t, d, "a retry takes no startup sleep")
	}
}

// docs/BENCHMARKS.md's fleet section is what make bench writes (its
// command is e2e/scripts/bench.sh's), and says what
// TestAFleetBacksOffAsAFleet holds on the model fleet: for 2-hour and
// 12-hour outages, no draw above 3x normal and every cluster within its
// bound; through the 12-hour outage, the registered clusters' attempts per
// hour peak in the first hours and then fall.
func TestBenchmarksDocSaysWhatFleetsimFinds(t *testing.T) {
	b, err := os.ReadFile("../../../docs/BENCHMARKS.md")
	require.NoError(t, err)
	doc := string(b)
	i, j := strings.Index(doc, sectionStart), strings.Index(doc, sectionEnd)
	require.True(t, i >= 0 && j > i, "docs/BENCHMARKS.md has fleetsim's section")
	sec := doc[i:j]
	bench, err := os.ReadFile("../../scripts/bench.sh")
	require.NoError(t, err)
	cmd := regexp.MustCompile("(?m)^go run ./e2e/cmd/fleetsim .*$").FindString(sec)
	require.NotEmpty(t, cmd)
	assert.Contains(t, string(bench), cmd, "make bench writes the section with the command it shows")
	row := regexp.MustCompile(`(?m)^\| (\w+) \| [\d.]+× / [\d.]+× / ([\d.]+)× \| (\d+) \| (\d+) of (\d+) \| (\d+) of (\d+) \|`)
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		seen[m[1]] = true
		most, err := strconv.ParseFloat(m[2], 64)
		require.NoError(t, err)
		assert.LessOrEqual(t, most, 3.0, "%s outage: the busiest draw", m[1])
		assert.Equal(t, "0", m[3], "%s outage: draws above 3x", m[1])
		assert.Equal(t, m[5], m[4], "%s outage: registered clusters within their bound", m[1])
		assert.Equal(t, m[7], m[6], "%s outage: clusters installed during it within their bound", m[1])
	}
	assert.Equal(t, map[string]bool{"2h": true, "12h": true}, seen, "the doc has both outages")
	peak := regexp.MustCompile(`peak in hour (\d+) \((\d+)\), while their scheduled runs still meet the outage for the first time, then fall: at most (\d+) an hour after it, (\d+) in the last hour`).FindStringSubmatch(sec)
	require.NotNil(t, peak, "the doc says where the 12-hour outage's attempts peak")
	n := func(s string) int { v, err := strconv.Atoi(s); require.NoError(t, err); return v }
	assert.Less(t, n(peak[1]), 8, "the peak in the first hours")
	assert.Less(t, n(peak[3]), n(peak[2]), "then fewer")
	assert.Less(t, n(peak[4]), n(peak[2]), "then fewer")
}
