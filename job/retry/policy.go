// Package retry is the retry rule in one room: the policy (this file)
// decides when a run that failed transiently is tried again, the next
// attempt's time, which the run records on the engine's Lease and the
// retry CronJob reads, and whether a scheduled run defers to that attempt;
// the record (record.go) is what the runs keep on the Lease, checked so
// that it cannot lie about time, with its words for people; the decisions
// (decide.go) are what a look, a failure of Azure's identity and a failed
// run make of them. job/kube only stores the record.
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
// it waits: rancher/scc-operator keeps its registration. It backs off far
// harder, as a fleet in a regional outage must:
//
//	gap = max(RefreshGap, elapsed×RefreshFactor) − Tick, capped at RefreshMaxGap
//
// (by default an hour, twice the elapsed time, 12 hours), so each attempt
// comes two to three times as far into the streak as the one before (with the defaults: the failing scheduled run and about 3
// more in the first 6 hours, then one every 6 to 12 hours, about 2.7 a
// day, half a first contact's rate), and the cluster is refreshed within
// max(RefreshGap, D×RefreshFactor) after the cause clears, at most
// RefreshMaxGap + Tick. And a scheduled run of such a cluster while its
// next attempt is pending, not yet due, defers to it (Defers): it counts
// as a look, not as an attempt. So through an outage of any length a
// registered cluster makes one attempt at its first failing scheduled run,
// a few in the hours after, then about as many as its scheduled runs
// would: the fleet's attempts per hour peak while its scheduled runs are
// still meeting the outage for the first time (about a twelfth of the
// fleet an hour), then fall, and its busiest minute after the outage stays
// within a few times its normal one (docs/BENCHMARKS.md, "After a
// regional outage", has fleetsim's figures). A refresh's next attempt may
// be further ahead than MaxGap: whoever checks a recorded next attempt
// against the longest gap the rule plans asks LongestGap.
//
// The gap is jittered downwards, uniformly in [gap/2, gap], so that the
// clusters a regional outage stopped together do not come back together
// when it ends; downwards, so that the bounds above still hold.
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
	// DefaultRefreshFactor: a refresh's gap is twice its elapsed time.
	DefaultRefreshFactor = 2
	// DefaultRefreshMaxGap caps a refresh's gap: about the scheduled runs'
	// own rate of two a day.
	DefaultRefreshMaxGap = 12 * time.Hour
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
	// RefreshFactor: a refresh's gap is its elapsed time times this.
	RefreshFactor int
	// RefreshMaxGap caps a refresh's gap.
	RefreshMaxGap time.Duration
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
	if refresh {
		return max(0, min(max(p.RefreshGap, elapsed*time.Duration(p.RefreshFactor))-p.Tick, p.RefreshMaxGap))
	}
	return max(0, min(elapsed/time.Duration(p.Fraction)-p.Tick, p.MaxGap))
}

// LongestGap is the longest gap the rule plans after a failure of a
// streak (refresh: a registered cluster's refresh): a recorded next
// attempt further than this after its failure was not planned by it.
func (p Policy) LongestGap(refresh bool) time.Duration {
	p = p.withDefaults()
	if refresh {
		return p.RefreshMaxGap
	}
	return p.MaxGap
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
	if p.RefreshFactor <= 0 {
		p.RefreshFactor = DefaultRefreshFactor
	}
	if p.RefreshMaxGap <= 0 {
		p.RefreshMaxGap = DefaultRefreshMaxGap
	}
	return p
}

// Defers reports whether a scheduled run defers to the attempt its
// cluster's failing streak has pending: refresh is the record's (the
// streak is a registered cluster's scheduled refresh), next its next
// attempt, now the scheduled run's time. Such a run counts as a look of
// the retry CronJob that found nothing due: it sends no request and
// changes no record, and the attempt comes when it is due. A streak that
// is not a refresh (a cluster never registered, whose every attempt may
// be the one that registers it) never defers, nor does a run when nothing
// is pending or the attempt is due.
func Defers(refresh bool, next, now time.Time) bool {
	return refresh && !next.IsZero() && now.Before(next)
}
