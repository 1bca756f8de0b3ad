package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/retry"
)

// A run that fails is tried again (docs/RELIABILITY.md, "Retries"; the
// rule, its record and its words are job/retry's): the failed run records
// on the Lease when its next attempt is due, and the chart's retry CronJob,
// which looks every RETRY_INTERVAL, runs the engine with ONLY_WHEN_DUE:
// that run reads the record and exits at once unless an attempt is due.
// This file acts on the rule's decisions: it reads the record, suspends
// and resumes the retry CronJob, and settles a failure of Azure's identity
// by the Lease the run holds.

// RunReader reads the record of the last run (the Lease's), for a run of
// the retry CronJob to decide whether an attempt is due.
type RunReader interface {
	LastRun(ctx context.Context) (kube.Stored, bool, error)
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
// one is scheduled (pending) and why or why not, in words for the log
// (retry.Look). An error is the record's read.
func (j *Job) due(ctx context.Context, log *slog.Logger) (due, pending bool, why string, err error) {
	if j.LastRun == nil {
		return false, false, "", failure.Permanent(fmt.Errorf("ONLY_WHEN_DUE needs the engine's Lease to read the last run from: it only works in a cluster"))
	}
	stored, ok, err := j.LastRun.LastRun(ctx)
	if err != nil {
		return false, false, "", fmt.Errorf("retry check: %w: %w", errRecordUnread, err)
	}
	var rec retry.Record
	if ok {
		rec, ok = j.readRecord(log, stored)
	}
	due, pending, why = retry.Look(rec, ok, j.now())
	return due, pending, why, nil
}

// readRecord is the record the Lease holds, as retry.Read checks it now,
// with the Lease's creation time; ok is false when there is none. A record
// that cannot be true is logged with what was found in it.
func (j *Job) readRecord(log *slog.Logger, s kube.Stored) (rec retry.Record, ok bool) {
	rec, ok = retry.Read(s.Record, j.now())
	if rec.Doubt != "" {
		log.Warn("the run record on the lease cannot be true", slog.String("doubt", rec.Doubt))
	}
	rec.LeaseCreated = s.Created
	return rec, ok
}

// lastRecord is the record a run that took the Lease judges its failure
// by: nil when it created the Lease, zero but for the Lease's creation when
// the Lease holds none.
func (j *Job) lastRecord(log *slog.Logger, s *kube.Stored) *retry.Record {
	if s == nil {
		return nil
	}
	rec, _ := j.readRecord(log, *s)
	return &rec
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
func (j *Job) switchRetries(ctx context.Context, log *slog.Logger, res Result, plan retry.Plan) string {
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
		suspend = plan.Next.IsZero()
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

// settle decides a settling failure (retry.Settle) by the record the
// Lease held when this run took it (nil: none). A run with no Lease to
// remember anything by (a dry run, --output) decides as before: permanent.
func (j *Job) settle(err error, last *retry.Record) error {
	if j.Lock == nil && failure.IsSettling(err) && !failure.IsPermanent(err) {
		return failure.Permanent(err)
	}
	return retry.Settle(err, last, j.now(), j.firstContact())
}

// plan is the retry plan of a run that ended with err, following last.
func (j *Job) plan(err error, last *retry.Record) retry.Plan {
	return j.Retry.Plan(err, last, j.now(), j.Scheduled, j.firstContact(), j.randDuration())
}

func (j *Job) firstContact() time.Duration {
	if j.FirstContact <= 0 {
		return retry.DefaultFirstContact
	}
	return j.FirstContact
}

func (j *Job) now() time.Time {
	if j.Now == nil {
		return time.Now().UTC()
	}
	return j.Now().UTC()
}
