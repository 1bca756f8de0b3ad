// Package backoff decides when a run that failed transiently is tried
// again: the next attempt's time, which the run records on the engine's
// Lease and the retry CronJob reads.
//
// The rule, and why (docs/RELIABILITY.md, "Retries"): a cluster that cannot
// register must not wait for the next scheduled run (6 or 18 hours away),
// yet a fleet must not hammer SUSE's servers through a long outage. So the
// gap after a failure grows with how long the cluster has been failing:
//
//	gap = elapsed/Fraction − Tick, capped at MaxGap, at least 0
//
// where elapsed runs from the first failure of the streak. The retry
// CronJob looks every Tick, so an attempt comes at most gap + Tick after
// the failure before it: for an outage of length D (counted from the first
// failure) the cluster is registered within max(Tick, D/Fraction) after the
// cause clears (with the defaults: 10 minutes for anything under 40
// minutes, an hour for a 4-hour outage), while its attempts thin out as
// the outage lasts: 6 in its first hour, about 1 an hour after 4 hours,
// about 26 in a whole day, then one every 3 to 6 hours (MaxGap). Fewer
// would break the bound: every attempt can only be a quarter of the
// elapsed time after the one before, so a day needs about 20.
//
// A cluster that is registered and failed only a scheduled refresh (its
// streak began with a scheduled run, after a success) loses nothing while
// it waits: the operator keeps its registration. Its gap starts at
// RefreshGap instead of nothing, so it is refreshed within max(RefreshGap,
// D/Fraction) after the cause clears. This is most of a fleet in a
// regional outage, which is what keeps the fleet's retries below a few
// times its normal load when the outage ends (docs/BENCHMARKS.md).
//
// The gap is jittered downwards, uniformly in [gap/2, gap], so that the
// clusters a regional outage stopped together do not come back together
// when it ends; downwards, so that the bound above still holds.
package retry

import (
	"time"
)

// Defaults of the rule. The chart's retry CronJob runs every Tick.
const (
	DefaultTick     = 10 * time.Minute
	DefaultFraction = 4
	DefaultMaxGap   = 6 * time.Hour
	// DefaultRefreshGap is the least gap of a registered cluster's refresh.
	DefaultRefreshGap = time.Hour
)

// Policy is the rule's settings; the zero value means the defaults.
type Policy struct {
	// Tick is how often the retry CronJob looks for a due retry
	// (RETRY_INTERVAL).
	Tick time.Duration
	// Fraction: the cluster is registered within elapsed/Fraction after
	// the cause clears.
	Fraction int
	// MaxGap caps the gap: the scheduled runs come every 6 or 18 hours
	// anyway.
	MaxGap time.Duration
	// RefreshGap is the least gap of a registered cluster's refresh.
	RefreshGap time.Duration
}

// Next is when the attempt after a run that failed at failed comes due,
// for a streak of failures that began at since; refresh: the streak is a
// registered cluster's scheduled refresh. rnd returns a uniform duration in
// [0, n); nil means no jitter (the longest gap).
func (p Policy) Next(since, failed time.Time, refresh bool, rnd func(n time.Duration) time.Duration) time.Time {
	gap := p.Gap(failed.Sub(since), refresh)
	if gap <= 0 {
		return failed
	}
	if rnd == nil {
		return failed.Add(gap)
	}
	half := gap / 2
	return failed.Add(gap - half + rnd(half+1))
}

// Gap is the longest gap after a failure elapsed into its streak.
func (p Policy) Gap(elapsed time.Duration, refresh bool) time.Duration {
	p = p.withDefaults()
	base := elapsed / time.Duration(p.Fraction)
	if refresh {
		base = max(base, p.RefreshGap)
	}
	return max(0, min(base-p.Tick, p.MaxGap))
}

// Bound is the promise of the rule: a streak of length elapsed is ended
// within Bound after its cause clears (the retry CronJob looks every Tick).
func (p Policy) Bound(elapsed time.Duration, refresh bool) time.Duration {
	return p.Gap(elapsed, refresh) + p.withDefaults().Tick
}

// Due reports whether an attempt recorded as due at next is due at now.
// A zero next is never due: nothing was scheduled (the last run succeeded,
// failed for good, or recorded nothing).
func Due(next, now time.Time) bool {
	return !next.IsZero() && !now.Before(next)
}

func (p Policy) withDefaults() Policy {
	if p.Tick <= 0 {
		p.Tick = DefaultTick
	}
	if p.Fraction <= 0 {
		p.Fraction = DefaultFraction
	}
	if p.MaxGap <= 0 {
		p.MaxGap = DefaultMaxGap
	}
	if p.RefreshGap <= 0 {
		p.RefreshGap = DefaultRefreshGap
	}
	return p
}
