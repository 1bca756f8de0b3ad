package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rancher/registration-engine/job/backoff"
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

	// LeaseCreated is when the API server created the engine's Lease (its
	// metadata.creationTimestamp): the engine's first run. The API server
	// sets it and nothing that may write the Lease can move it, so the
	// first-contact window is counted from it. Read with the record, never
	// stored in it; zero when unknown.
	LeaseCreated time.Time `json:"-"`
	// Doubt says what in the stored record could not be true, as
	// ReadRunRecord found it ("" when nothing); never stored.
	Doubt string `json:"-"`
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

// PhaseRunRecord is the phase a record that does not parse is counted
// failed in (ReadRunRecord).
const PhaseRunRecord = "run-record"

// ReadRunRecord reads the record from a Lease's annotations as a run may act
// on it at now: ok is false only when there is none. The engine writes the
// record, but so may anything that holds its ServiceAccount's token, and a
// record that lies about time must neither keep a failing cluster from its
// verdict nor silence its retries. So a record that does not parse, or
// whose outcome the engine never writes, counts as a failure that began now
// and is due now; of a failed run's record, a time after now (beyond
// RecordSkew) counts as now,
// a failingSince after the record's time (or none) as the record's time,
// and a nextAttempt more than the longest gap (backoff.DefaultMaxGap) after
// the record's time as due now; each of these makes the next attempt due
// now, i.e. at the retry CronJob's next look (none, for a failure recorded
// as permanent: the schedule runs the next). Doubt says what was found.
func ReadRunRecord(annotations map[string]string, now time.Time) (rec RunRecord, ok bool) {
	rec, ok, err := ParseRunRecord(annotations)
	switch {
	case err != nil:
		return unreadable(now, fmt.Sprintf("the record does not parse (%v)", err)), true
	case ok && !recordedOutcomes[rec.Outcome]:
		return unreadable(now, fmt.Sprintf("the record's outcome %q is none the engine writes", rec.Outcome)), true
	case ok:
		return rec.checked(now), true
	}
	return rec, false
}

// RecordSkew is how far ahead of the reader's clock a record's time may be
// and still be believed: the run that wrote it ran on another node, whose
// clock may be ahead (within LeaseMargin, as the Lease's expiry assumes).
const RecordSkew = LeaseMargin

// recordedOutcomes are the outcomes a run records (job's OutcomeRegistered,
// OutcomeUnchanged, OutcomeFailed and OutcomeWaitingForCode).
var recordedOutcomes = map[string]bool{"registered": true, "unchanged": true, "failed": true, OutcomeWaitingForCode: true}

// unreadable is what a record that cannot be read counts as: a failure that
// began at now and is due now.
func unreadable(now time.Time, why string) RunRecord {
	t, since, next := now, now, now
	return RunRecord{
		Time: t, Outcome: "failed", Phase: PhaseRunRecord, Error: why,
		ConsecutiveFailures: 1, FailingSince: &since, Cause: CauseTransient, NextAttempt: &next,
		Doubt: why + ": counted as a failure that began at " + now.UTC().Format(time.RFC3339) + ", due now",
	}
}

// checked is r with the times of a failed run's record that cannot be true
// replaced (ReadRunRecord), and Doubt saying which.
func (r RunRecord) checked(now time.Time) RunRecord {
	if !r.Failing() {
		return r
	}
	var doubts []string
	t := r.Time
	if t.IsZero() || t.After(now.Add(RecordSkew)) {
		doubts = append(doubts, fmt.Sprintf("its time %s is after now", stamp(r.Time)))
		t = now
	}
	r.Time = t
	if r.FailingSince == nil || r.FailingSince.After(t) {
		doubts = append(doubts, fmt.Sprintf("failingSince %s is not before its time", stampPtr(r.FailingSince)))
		since := t
		r.FailingSince = &since
	}
	if r.NextAttempt != nil && r.NextAttempt.After(t.Add(backoff.DefaultMaxGap)) {
		doubts = append(doubts, fmt.Sprintf("nextAttempt %s is more than the longest gap (%s) after it", stampPtr(r.NextAttempt), backoff.DefaultMaxGap))
	}
	if len(doubts) == 0 {
		return r
	}
	if r.ConsecutiveFailures < 1 {
		r.ConsecutiveFailures = 1
	}
	if r.Cause == "" {
		r.Cause = CauseTransient
	}
	if r.Cause == CausePermanent {
		r.NextAttempt = nil // failed for good: the schedule runs the next
	} else {
		next := now
		r.NextAttempt = &next
	}
	r.Doubt = strings.Join(doubts, "; ") + fmt.Sprintf(": counted as a failure since %s, due now", stamp(*r.FailingSince))
	return r
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func stampPtr(t *time.Time) string {
	if t == nil {
		return "(none)"
	}
	return stamp(*t)
}

// LastRun reads the record of the last run from the Lease as ReadRunRecord
// checks it at the Lease's clock, with the Lease's creation time; ok is
// false when there is none. The retry CronJob's runs read it to decide
// whether an attempt is due; an error is the API server's (the record was
// not read).
func (l *Lease) LastRun(ctx context.Context) (rec RunRecord, ok bool, err error) {
	ns := l.Namespace
	cur, err := l.Leases.Leases(ns).Get(ctx, l.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, fmt.Errorf("kube: lease %s/%s: run record: %w", ns, l.Name, APIError(err, Access{Verbs: []string{"get"}, Resource: "leases/" + l.Name, Namespace: ns}))
	}
	rec, ok = ReadRunRecord(cur.Annotations, l.now())
	if rec.Doubt != "" {
		logger(l.Log).Warn("the run record on the lease cannot be true", slog.String("lease", l.Ref()), slog.String("doubt", rec.Doubt))
	}
	rec.LeaseCreated = cur.CreationTimestamp.Time
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
// in annotations, and its annotation's value. The record there is read as
// ReadRunRecord checks it at cur's time: one that does not parse or lies
// about time carries over as a failure that began at most at cur's time.
func nextRunRecord(annotations map[string]string, cur RunRecord) (RunRecord, string, error) {
	prev, _ := ReadRunRecord(annotations, cur.Time)
	next := prev.Next(cur)
	b, err := json.Marshal(next)
	if err != nil {
		return next, "", fmt.Errorf("kube: run record: %w", err)
	}
	return next, string(b), nil
}
