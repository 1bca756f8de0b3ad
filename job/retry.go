package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/backoff"
	"github.com/rancher/registration-engine/job/kube"
)

// A run that fails is tried again (docs/RELIABILITY.md, "Retries"): the
// failed run records on the Lease when its next attempt is due
// (job/backoff), and the chart's retry CronJob, which looks every
// RETRY_INTERVAL, runs the engine with ONLY_WHEN_DUE: that run reads the
// record and exits at once unless an attempt is due. So an install that
// meets an outage keeps trying until it is registered, without a pod that
// idles and without waiting 6 or 18 hours for the schedule.
//
// Right after an install, Azure may still be propagating the extension's
// identity or a role assignment (failure.Settling): until the cluster's
// first success, and for FirstContact after its first run (the creation of
// its Lease, which the API server stamps and no writer of the Lease can
// move), such a failure is retried like a transient one; after that it
// needs a person and is permanent, with the same message.

// DefaultFirstContact is PROPAGATION_WINDOW's default: Azure documents up
// to 30 minutes for a role assignment to take effect; twice that covers a
// slow tenant without letting a real misconfiguration retry for long.
const DefaultFirstContact = time.Hour

// MaxFirstContact caps PROPAGATION_WINDOW: twelve times the 30 minutes
// Azure documents, and as long as the schedule's shorter gap (6 h), after
// which the scheduled runs would have retried anyway. A longer window
// would only keep a real misconfiguration (a role never assigned) reading
// as "waiting for Azure".
const MaxFirstContact = 6 * time.Hour

// RunReader reads the record of the last run (the Lease's), for a run of
// the retry CronJob to decide whether an attempt is due.
type RunReader interface {
	LastRun(ctx context.Context) (kube.RunRecord, bool, error)
}

// OutcomeNotDue is the outcome of a run of the retry CronJob that found no
// attempt due: it read the record and did nothing else (no Event, no
// record, exit 0).
const OutcomeNotDue = "not-due"

// OutcomeUnread is the outcome of a run of the retry CronJob that could not
// read the record (the API server failed or refused): it says so in its log
// and does nothing else (no Event, no record, no plan, exit 0); the next
// look reads it again. A look that cannot see the record knows nothing of
// the cluster's runs, so it must not record one.
const OutcomeUnread = "unread"

// errRecordUnread: the retry CronJob's look could not read the record.
var errRecordUnread = errors.New("could not read the run record")

// due reports whether the attempt the last run recorded is due now, whether
// one is scheduled (pending) and why or why not, in words for the log. An
// error is the record's read.
func (j *Job) due(ctx context.Context) (due, pending bool, why string, err error) {
	if j.LastRun == nil {
		return false, false, "", failure.Permanent(fmt.Errorf("ONLY_WHEN_DUE needs the engine's Lease to read the last run from: it only works in a cluster"))
	}
	rec, ok, err := j.LastRun.LastRun(ctx)
	now := j.now()
	switch {
	case err != nil:
		return false, false, "", fmt.Errorf("retry check: %w: %w", errRecordUnread, err)
	case !ok:
		return false, false, "no run recorded yet: the release's own run and the schedule start the first", nil
	case !rec.Failing():
		return false, false, fmt.Sprintf("the last run (%s) succeeded at %s: the schedule runs the next", rec.Outcome, utc(rec.Time)), nil
	case rec.NextAttempt == nil:
		return false, false, fmt.Sprintf("the last run failed at %s and another attempt cannot succeed (cause %s): it needs a person, and the schedule runs the next", utc(rec.Time), rec.Cause), nil
	case !backoff.Due(*rec.NextAttempt, now):
		return false, true, fmt.Sprintf("attempt %d is due at %s", rec.ConsecutiveFailures+1, utc(*rec.NextAttempt)), nil
	case rec.Doubt != "":
		return true, true, fmt.Sprintf("the run record cannot be true: %s", rec.Doubt), nil
	}
	return true, true, fmt.Sprintf("attempt %d was due at %s (cause %s)", rec.ConsecutiveFailures+1, utc(*rec.NextAttempt), rec.Cause), nil
}

// switchRetries suspends the retry CronJob when no attempt is scheduled
// and resumes it when one is, and says which it did: a registered cluster
// (or one that failed for good, or has not run yet) then starts no retry
// pod until a run fails and may succeed another time, which wakes the
// retries within one interval. Every run that knows the record decides: a
// run by its plan, a look that found nothing due by the record it read, so
// that a CronJob left running (an install, a race of two runs) is put to
// sleep by its next look. A skipped run and a look that could not read the
// record know nothing of the runs and leave it. A failed switch is logged;
// the scheduled runs still come (and the next run switches again).
func (j *Job) switchRetries(ctx context.Context, log *slog.Logger, res Result, plan retryPlan) string {
	if j.Retries == nil {
		return ""
	}
	var suspend bool
	switch res.Outcome {
	case OutcomeSkipped, OutcomeUnread:
		return ""
	case OutcomeNotDue:
		suspend = !res.pending
	default:
		suspend = plan.next.IsZero()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := j.Retries.SetSuspended(sctx, suspend); err != nil {
		log.Warn("could not switch the retry CronJob; the scheduled runs still come", slog.Bool("suspend", suspend), slog.String("error", err.Error()))
		return ""
	}
	if suspend {
		return RetriesSuspended
	}
	return RetriesResumed
}

// What a run did to the retry CronJob (Result.RetryCronJob, the summary's
// retryCronJob).
const (
	RetriesSuspended = "suspended"
	RetriesResumed   = "resumed"
)

// settle decides a settling failure (failure.Settling): retried like a
// transient one while the cluster is in its first contact, permanent after.
// last is the record the Lease held when this run took it (nil: none);
// A run with no Lease to remember anything by (a dry run, --output)
// decides as before: permanent.
func (j *Job) settle(err error, last *kube.RunRecord) error {
	if !failure.IsSettling(err) || failure.IsPermanent(err) {
		return err
	}
	now := j.now()
	switch {
	case j.Lock == nil:
		return failure.Permanent(err)
	case last != nil && last.LastSuccess != nil:
		return failure.Permanent(fmt.Errorf("%w (this cluster registered at %s: no new identity is propagating, it needs a person)", err, utc(*last.LastSuccess)))
	}
	if start, what := firstContactStart(last); !start.IsZero() && now.Sub(start) >= j.firstContact() {
		return failure.Permanent(fmt.Errorf("%w (Azure has had %s since %s at %s to propagate it, more than PROPAGATION_WINDOW %s: it needs a person)",
			err, now.Sub(start).Round(time.Minute), what, utc(start), j.firstContact()))
	}
	return err
}

// firstContactStart is when the cluster's first-contact window opened, and
// what happened then, in words: the first failure of the streak or, when
// earlier, the engine's first run (its Lease's creation, which nothing that
// writes the Lease can move, so that a rewritten record cannot reopen the
// window). Zero: no run before this one.
func firstContactStart(last *kube.RunRecord) (time.Time, string) {
	if last == nil {
		return time.Time{}, ""
	}
	var start time.Time
	what := ""
	if last.Failing() && last.FailingSince != nil {
		start, what = *last.FailingSince, "the first failure"
	}
	if c := last.LeaseCreated; !c.IsZero() && (start.IsZero() || c.Before(start)) {
		start, what = c, "the engine's first run (its Lease's creation)"
	}
	return start, what
}

// retryPlan is what a failed run says of the next attempt: its cause
// class, its number and when it is due (zero when none is: the run
// succeeded, or failed for good).
type retryPlan struct {
	cause   string
	attempt int
	next    time.Time
	// closes is when a settling failure's first-contact window closes.
	closes time.Time
	// refresh: the streak is a registered cluster's scheduled refresh,
	// whose attempts are spaced wider (job/backoff).
	refresh bool
}

// plan is the retry plan of a run that ended with err, following last.
func (j *Job) plan(err error, last *kube.RunRecord) retryPlan {
	if err == nil {
		return retryPlan{}
	}
	p := retryPlan{cause: kube.CauseTransient, attempt: 1}
	now := j.now()
	since := now
	// A streak that a scheduled run of a registered cluster began is a
	// refresh; a first contact, an upgrade's run or a manual one is not.
	p.refresh = j.Scheduled && last != nil && last.LastSuccess != nil
	if last != nil && last.Failing() && last.FailingSince != nil {
		since, p.attempt, p.refresh = *last.FailingSince, last.ConsecutiveFailures+1, last.Refresh
	}
	switch {
	case failure.IsPermanent(err):
		p.cause = kube.CausePermanent
		return p
	case failure.IsSettling(err):
		p.cause, p.closes = kube.CauseSettling, since.Add(j.firstContact())
		if start, _ := firstContactStart(last); !start.IsZero() && start.Before(since) {
			p.closes = start.Add(j.firstContact())
		}
	}
	p.next = j.Retry.Next(since, now, p.refresh, j.randDuration())
	return p
}

// note is the plan in words, for the Event and the log: "" when nothing
// is scheduled. The words are the run record's (kube.RunRecord.Retrying),
// which status shows too, so the Event, the log and status say the same.
func (p retryPlan) note() string {
	if p.next.IsZero() {
		return ""
	}
	return p.record(kube.RunRecord{Outcome: OutcomeFailed, ConsecutiveFailures: p.attempt}).Retrying()
}

// record is rec with the plan's fields: its cause and, when one is
// scheduled, the next attempt, the first-contact window's end and whether
// the streak is a refresh.
func (p retryPlan) record(rec kube.RunRecord) kube.RunRecord {
	rec.Cause = p.cause
	if !p.next.IsZero() {
		next := p.next
		rec.NextAttempt, rec.Refresh = &next, p.refresh
	}
	if !p.closes.IsZero() {
		closes := p.closes
		rec.SettlesBy = &closes
	}
	return rec
}

// attrs are the plan's log attributes.
func (p retryPlan) attrs() []any {
	if p.cause == "" {
		return nil
	}
	attrs := []any{slog.String("failureClass", p.cause), slog.Int("attempt", p.attempt)}
	if !p.next.IsZero() {
		attrs = append(attrs, slog.Time("nextAttempt", p.next))
	}
	return attrs
}

func (j *Job) firstContact() time.Duration {
	if j.FirstContact <= 0 {
		return DefaultFirstContact
	}
	return j.FirstContact
}

func (j *Job) now() time.Time {
	if j.Now == nil {
		return time.Now().UTC()
	}
	return j.Now().UTC()
}

// utc formats t for people: the minute, in UTC.
func utc(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }
