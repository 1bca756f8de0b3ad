package main

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/rancher/registration-engine/job/retry"
)

// OutageFigures are one draw of the fleet through a regional outage: the
// registered fleet's attempts (scheduled runs and retries) and those of
// the clusters installed during it.
type OutageFigures struct {
	Outage time.Duration
	Start  time.Time
	Seed   uint64
	// NormalPeakPerMinute is the most runs that start in one minute
	// without an outage, over the days after the first;
	// RecoveryPeakPerMinute the most attempts in one minute in the hour
	// after the outage, LastHourPeakPerMinute in the outage's last hour
	// (what the retries already were before it ended).
	NormalPeakPerMinute, RecoveryPeakPerMinute, LastHourPeakPerMinute int
	// Registered are the clusters registered before the outage, whose
	// scheduled runs failed during it (a refresh); Installed those
	// installed during it (a first contact).
	Registered, Installed Population
	// Deferred counts the scheduled runs of a registered cluster that
	// deferred to the attempt its streak had pending
	// (retry.Defers): a look, no request.
	Deferred int
	// RetriesSlept counts the retries the engine took a startup sleep in.
	RetriesSlept int
}

// Population is what one population of clusters did through the outage.
type Population struct {
	// Failed is how many of its clusters failed during the outage.
	Failed int
	// PerHour are their attempts in each hour of the outage (the last
	// may be part of an hour).
	PerHour []int
	// AttemptsMean and AttemptsMax are their attempts during the outage,
	// per cluster.
	AttemptsMean float64
	AttemptsMax  int
	// AllRegistered is when the last of them was registered after the
	// outage; Worst the cluster registered nearest its bound (or furthest
	// over it), Late how many were later than theirs.
	AllRegistered time.Duration
	Worst         Recovery
	Late          int
	total         int
}

// Ratio is the peak minute after the outage over the normal peak minute.
func (g OutageFigures) Ratio() float64 {
	return float64(g.RecoveryPeakPerMinute) / float64(max(1, g.NormalPeakPerMinute))
}

// PerHour is the whole fleet's attempts in each hour of the outage.
func (g OutageFigures) PerHour() []int {
	out := slices.Clone(g.Registered.PerHour)
	for i, n := range g.Installed.PerHour {
		out[i] += n
	}
	return out
}

// Recovery is how long a cluster failed (from its first failure to the
// end of the outage), how long after the outage it was registered, and
// its bound: job/retry's promise, Policy.Bound (a registered cluster's
// refresh, or a first contact).
type Recovery struct {
	Failing, Took, Bound time.Duration
}

// member is one cluster of the simulated fleet: when its scheduled runs
// send their first request (sorted), its retry CronJob, and when it was
// installed (zero: before the simulated days, registered).
type member struct {
	runs      []time.Time
	retry     retryLooks
	installed time.Time
}

// playOutage plays each cluster through an outage of length d from
// OutageStart: every attempt in it fails, and the failed run records on
// the Lease its next attempt, retry.Policy{}.Next from the streak's
// first failure with the rng's jitter, which the cluster's retry CronJob
// runs at its first look at or after that time and after the failed run.
// A scheduled run of a registered cluster whose refresh has an attempt
// pending, not yet due, defers to it (retry.Defers). A cluster installed
// during the outage makes its first attempt at install (the release's own
// run, no startup sleep) and is a first contact. Every attempt after the
// outage succeeds and ends the streak. from and end bound the days whose
// busiest minute is the normal one.
func playOutage(fleet []member, from, end time.Time, d time.Duration, rng *rand.Rand) (OutageFigures, error) {
	start, stop := OutageStart, OutageStart.Add(d)
	hours := int((d + time.Hour - 1) / time.Hour)
	g := OutageFigures{Outage: d, Start: start}
	g.Registered.PerHour, g.Installed.PerHour = make([]int, hours), make([]int, hours)
	rnd := func(n time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(n))) }
	var normal, attempts []time.Time
	for _, c := range fleet {
		pop, refresh := &g.Registered, true
		if !c.installed.IsZero() {
			pop, refresh = &g.Installed, false
		} else {
			normal = append(normal, c.runs...)
		}
		var since, due, look, registered time.Time
		install := !c.installed.IsZero()
		during := 0
		for j := 0; ; {
			var t time.Time
			scheduled := false
			switch {
			case install:
				t, install = c.installed, false
			case !look.IsZero() && (j == len(c.runs) || !c.runs[j].Before(look)):
				t, look = look, time.Time{}
			case j < len(c.runs):
				t, scheduled = c.runs[j], true
				j++
			}
			if t.IsZero() {
				break
			}
			if !c.installed.IsZero() && t.Before(c.installed) {
				continue // not installed yet
			}
			// As the engine's scheduled run asks, with its record's
			// refresh (set while a refresh streak fails) and nextAttempt.
			if scheduled && retry.Defers(refresh && !since.IsZero(), due, t) {
				g.Deferred++
				continue
			}
			attempts = append(attempts, t)
			if t.Before(start) || !t.Before(stop) {
				if !since.IsZero() && registered.IsZero() {
					registered = t
				}
				due, look = time.Time{}, time.Time{}
				continue
			}
			// Failed: the Lease records the next attempt.
			during++
			pop.PerHour[t.Sub(start)/time.Hour]++
			if since.IsZero() {
				since = t
			}
			due = retry.Policy{}.Next(since, t, refresh, rnd)
			var slept bool
			var err error
			if look, slept, err = c.retry.attempt(due, t, rng); err != nil {
				return g, err
			}
			if slept {
				g.RetriesSlept++
			}
		}
		if since.IsZero() {
			continue
		}
		pop.Failed++
		pop.total += during
		pop.AttemptsMax = max(pop.AttemptsMax, during)
		r := Recovery{Failing: stop.Sub(since), Took: registered.Sub(stop)}
		r.Bound = retry.Policy{}.Bound(r.Failing, refresh)
		pop.AllRegistered = max(pop.AllRegistered, r.Took)
		if r.Took > r.Bound {
			pop.Late++
		}
		if pop.Worst.Bound == 0 || float64(r.Took)/float64(r.Bound) > float64(pop.Worst.Took)/float64(pop.Worst.Bound) {
			pop.Worst = r
		}
	}
	for _, pop := range []*Population{&g.Registered, &g.Installed} {
		if pop.Failed > 0 {
			pop.AttemptsMean = float64(pop.total) / float64(pop.Failed)
		}
	}
	g.NormalPeakPerMinute = peakPer(normal, from, end, time.Minute)
	g.RecoveryPeakPerMinute = peakPer(attempts, stop, stop.Add(time.Hour), time.Minute)
	g.LastHourPeakPerMinute = peakPer(attempts, stop.Add(-min(d, time.Hour)), stop, time.Minute)
	return g, nil
}

// installTimes are n install times drawn uniformly over [start, start+d),
// sorted.
func installTimes(n int, start time.Time, d time.Duration, rng *rand.Rand) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = start.Add(time.Duration(rng.Int64N(int64(d))))
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}
