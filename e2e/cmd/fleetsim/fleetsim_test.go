package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
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
// without one, and no busier than the outage's own last hour (the clusters
// do not come back together), and every cluster is registered within
// max(1 h, its own failing time/4) after the outage ends (a registered
// cluster's refresh). A small fleet:
// the ratio grows with the fleet, since the normal busiest minute grows
// more slowly than the retries do; docs/BENCHMARKS.md has the 1000-cluster
// figures.
func TestNoStampedeAfterAnOutage(t *testing.T) {
	for _, tc := range []struct {
		outage time.Duration
		seed   uint64
	}{{2 * time.Hour, 1}, {2 * time.Hour, 2}, {2 * time.Hour, 3}, {12 * time.Hour, 1}} {
		rng := rand.New(rand.NewPCG(tc.seed, tc.seed^0x5eed))
		f, err := simulate(Options{Days: 3, Outage: tc.outage}, "0 */18 * * *", modelFleet(200, rng), rng)
		require.NoError(t, err)
		g := f.Outage
		t.Logf("outage %s, seed %d: %d clusters failed, attempts each mean %.1f max %d, by hour %v; busiest minute: normal %d, the outage's last hour %d, after %d (%.1fx); all registered %s after, worst %+v",
			tc.outage, tc.seed, g.Failing, g.AttemptsMean, g.AttemptsMax, g.PerHour, g.NormalPeakPerMinute, g.LastHourPeakPerMinute, g.RecoveryPeakPerMinute, g.Ratio(), g.AllRegistered, g.Worst)
		assert.Greater(t, g.Failing, 200/24, "the outage stops the clusters that run during it")
		assert.LessOrEqual(t, g.Ratio(), 3.0, "outage %s, seed %d: the first hour after the outage", tc.outage, tc.seed)
		assert.Zero(t, g.Late, "outage %s, seed %d: clusters refreshed later than max(1h, failing/4) after it; worst %+v", tc.outage, tc.seed, g.Worst)
		assert.LessOrEqual(t, g.Worst.Took, g.Worst.Bound)
		assert.Positive(t, g.Worst.Took)
		assert.Zero(t, g.RetriesSlept, "a retry takes no startup sleep")
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
