package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/testkit"
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
