package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// AnnotationLastRun on the engine's Lease holds the RunRecord of the last
// run that did something (a run skipped for a held Lease records nothing).
// Events are gone after an hour; this stays until the next run, and
// kubectl alone reads it:
//
//	kubectl -n cattle-scc-system get lease registration-engine -o jsonpath='{.metadata.annotations.registration-engine\.cattle\.io/last-run}'
const AnnotationLastRun = "registration-engine.cattle.io/last-run"

// MaxRunError caps the error a RunRecord keeps, in bytes.
const MaxRunError = 1024

// RunRecord is the durable verdict of the engine's last run: what it did,
// and for how long runs have failed.
type RunRecord struct {
	// Time is when the run finished; Job is the Job that ran it.
	Time time.Time `json:"time"`
	Job  string    `json:"job,omitempty"`
	// Outcome is registered, unchanged or failed; ExitCode the process's.
	Outcome  string `json:"outcome"`
	ExitCode int    `json:"exitCode"`
	// Phase is the phase that failed, Error its error (redacted, escaped,
	// cut to MaxRunError bytes), Permanent whether a retry can succeed.
	Phase     string `json:"phase,omitempty"`
	Error     string `json:"error,omitempty"`
	Permanent bool   `json:"permanent,omitempty"`
	// Server is the update server the run chose; Operator what
	// rancher/scc-operator made of the Secret.
	Server   string `json:"server,omitempty"`
	Operator string `json:"operator,omitempty"`
	// LastSuccess is the last run that ended registered or unchanged.
	LastSuccess *time.Time `json:"lastSuccess,omitempty"`
	// ConsecutiveFailures counts the failed runs since LastSuccess;
	// FailingSince is the first of them.
	ConsecutiveFailures int        `json:"consecutiveFailures"`
	FailingSince        *time.Time `json:"failingSince,omitempty"`
	// Cause is the class of a failed run's error: CauseTransient,
	// CauseSettling or CausePermanent.
	Cause string `json:"cause,omitempty"`
	// NextAttempt is when the retry CronJob runs the next attempt of a run
	// that failed and may succeed another time (job/backoff); nil when the
	// run succeeded or failed for good (the schedule's next run comes).
	NextAttempt *time.Time `json:"nextAttempt,omitempty"`
	// SettlesBy is, for CauseSettling, when the first-contact window closes:
	// the same failure after it is permanent.
	SettlesBy *time.Time `json:"settlesBy,omitempty"`
	// Refresh: the failing streak is a registered cluster's scheduled
	// refresh, whose attempts are spaced wider (job/backoff).
	Refresh bool `json:"refresh,omitempty"`
	// SecretDeleted: the run found the registration Secret the run before
	// it left deleted since, and wrote nothing (operator.ErrSecretDeleted);
	// status says so although no Secret is left to read.
	SecretDeleted bool `json:"secretDeleted,omitempty"`
}

// Retrying says, for a person, what comes of a failed run that will be
// tried again: "" when none will (it succeeded, or failed for good).
func (r RunRecord) Retrying() string {
	if !r.Failing() || r.NextAttempt == nil {
		return ""
	}
	at := r.NextAttempt.UTC().Format("2006-01-02 15:04 UTC")
	if r.Cause == CauseSettling && r.SettlesBy != nil {
		return fmt.Sprintf("waiting for Azure to propagate the identity or its role assignment: attempt %d is due by %s; it needs a person if it still fails after %s",
			r.ConsecutiveFailures+1, at, r.SettlesBy.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if r.Refresh {
		return fmt.Sprintf("retrying the refresh: attempt %d is due by %s (cause %s; the registration stays as it is meanwhile)", r.ConsecutiveFailures+1, at, r.Cause)
	}
	return fmt.Sprintf("retrying: attempt %d is due by %s (cause %s)", r.ConsecutiveFailures+1, at, r.Cause)
}

// Causes of a failed run, as its record keeps them.
const (
	// CauseTransient: a peer was down, slow or throttling.
	CauseTransient = "transient"
	// CauseSettling: Azure may still be propagating the identity or its
	// role assignment, and the cluster's first-contact window is open.
	CauseSettling = "settling"
	// CausePermanent: another attempt with the same settings cannot
	// succeed; it needs a person.
	CausePermanent = "permanent"
)

// Failing reports whether the record is of a failed run.
func (r RunRecord) Failing() bool { return r.Outcome == "failed" }

// OutcomeWaitingForCode is the outcome of a run that found no registration
// code configured and none in the Secret: it wrote nothing, exits 0 and
// records an Event of reason ReasonCodeMissing; status reads it from the
// record.
const OutcomeWaitingForCode = "waiting-for-code"

// Next is the record of a run that ended as cur, following r (the record
// before it, zero when there was none): the success and failure counts
// carry over.
func (r RunRecord) Next(cur RunRecord) RunRecord {
	cur.LastSuccess, cur.ConsecutiveFailures, cur.FailingSince = r.LastSuccess, r.ConsecutiveFailures, r.FailingSince
	if cur.Outcome == OutcomeWaitingForCode {
		return cur // neither a success nor a failure: the counts stay
	}
	if cur.Failing() {
		cur.ConsecutiveFailures++
		if cur.FailingSince == nil {
			t := cur.Time
			cur.FailingSince = &t
		}
		return cur
	}
	t := cur.Time
	cur.LastSuccess, cur.ConsecutiveFailures, cur.FailingSince = &t, 0, nil
	return cur
}

// ParseRunRecord reads the record from a Lease's annotations; ok is false
// when there is none.
func ParseRunRecord(annotations map[string]string) (rec RunRecord, ok bool, err error) {
	raw, ok := annotations[AnnotationLastRun]
	if !ok || raw == "" {
		return rec, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return rec, false, fmt.Errorf("annotation %s: %w", AnnotationLastRun, err)
	}
	return rec, true, nil
}

// LastRun reads the record of the last run from the Lease; ok is false when
// there is none (or it does not parse: the next record starts afresh). The
// retry CronJob's runs read it to decide whether an attempt is due.
func (l *Lease) LastRun(ctx context.Context) (rec RunRecord, ok bool, err error) {
	raw, ok, err := l.Annotation(ctx, AnnotationLastRun)
	if err != nil || !ok {
		return rec, false, err
	}
	rec, ok, _ = ParseRunRecord(map[string]string{AnnotationLastRun: raw})
	return rec, ok, nil
}

// SaveRun records cur on the Lease, carrying over the counts of the
// record there, in one read and one write (UpdateAnnotation): for a run
// that ends without holding the Lease; one that holds it records with the
// release (Release).
func (l *Lease) SaveRun(ctx context.Context, cur RunRecord) (RunRecord, error) {
	next := cur
	err := l.UpdateAnnotation(ctx, AnnotationLastRun, func(raw string, ok bool) (*string, error) {
		var v string
		var err error
		next, v, err = nextRunRecord(map[string]string{AnnotationLastRun: raw}, cur)
		return &v, err
	})
	return next, err
}

// nextRunRecord is the record of a run that ended as cur, following the one
// in annotations, and its annotation's value. A record there that does not
// parse is replaced: the counts start again.
func nextRunRecord(annotations map[string]string, cur RunRecord) (RunRecord, string, error) {
	prev, _, _ := ParseRunRecord(annotations)
	next := prev.Next(cur)
	b, err := json.Marshal(next)
	if err != nil {
		return next, "", fmt.Errorf("kube: run record: %w", err)
	}
	return next, string(b), nil
}
