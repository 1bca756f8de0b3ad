package retry

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// MaxError caps the error a Record keeps, in bytes.
const MaxError = 1024

// Record is the durable verdict of the engine's last run: what it did,
// and for how long runs have failed. The engine keeps it on its Lease
// (job/kube stores it as it is given, in the annotation
// kube.AnnotationLastRun); Events are gone after an hour, this stays until
// the next run, and kubectl alone reads it.
type Record struct {
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
	// that failed and may succeed another time (Policy); nil when the
	// run succeeded or failed for good (the schedule's next run comes).
	NextAttempt *time.Time `json:"nextAttempt,omitempty"`
	// SettlesBy is, for CauseSettling, when the first-contact window closes:
	// the same failure after it is permanent.
	SettlesBy *time.Time `json:"settlesBy,omitempty"`
	// Refresh: the failing streak is a registered cluster's scheduled
	// refresh, whose attempts are spaced wider (Policy).
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
	// Read found it ("" when nothing); never stored.
	Doubt string `json:"-"`
}

// Retrying says, for a person, what comes of a failed run that will be
// tried again: "" when none will (it succeeded, or failed for good).
func (r Record) Retrying() string {
	if !r.Failing() || r.NextAttempt == nil {
		return ""
	}
	at := utc(*r.NextAttempt)
	if r.Cause == CauseSettling && r.SettlesBy != nil {
		return fmt.Sprintf("waiting for Azure to propagate the identity or its role assignment: attempt %d is due by %s; it needs a person if it still fails after %s",
			r.ConsecutiveFailures+1, at, utc(*r.SettlesBy))
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
func (r Record) Failing() bool { return r.Outcome == "failed" }

// OutcomeWaitingForCode is the outcome of a run that found no registration
// code configured and none in the Secret: it wrote nothing, exits 0 and
// records an Event of reason ReasonCodeMissing; status reads it from the
// record.
const OutcomeWaitingForCode = "waiting-for-code"

// Next is the record of a run that ended as cur, following r (the record
// before it, zero when there was none): the success and failure counts
// carry over.
func (r Record) Next(cur Record) Record {
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

// Parse reads a record as stored (raw, "" when there is none); ok is false
// when there is none.
func Parse(raw string) (rec Record, ok bool, err error) {
	if raw == "" {
		return rec, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return rec, false, fmt.Errorf("run record: %w", err)
	}
	return rec, true, nil
}

// Encode is the record as stored.
func (r Record) Encode() (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("run record: %w", err)
	}
	return string(b), nil
}

// Follow is the record of a run that ended as cur, following the one
// stored as prev ("" when none), and its stored form. prev is read as Read
// checks it at cur's time: one that does not parse or lies about time
// carries over as a failure that began at most at cur's time.
func Follow(prev string, cur Record) (Record, string, error) {
	last, _ := Read(prev, cur.Time)
	next := last.Next(cur)
	v, err := next.Encode()
	return next, v, err
}

// PhaseRecord is the phase a record that does not parse is counted
// failed in (Read).
const PhaseRecord = "run-record"

// Read reads a record as stored (raw, "" when there is none) as a run may
// act on it at now: ok is false only when there is none. The engine writes the
// record, but so may anything that holds its ServiceAccount's token, and a
// record that lies about time must neither keep a failing cluster from its
// verdict nor silence its retries. So a record that does not parse, or
// whose outcome the engine never writes, counts as a failure that began now
// and is due now; of a failed run's record, a time after now (beyond
// RecordSkew) counts as now,
// a failingSince after the record's time (or none) as the record's time,
// and a nextAttempt more than the longest gap (Policy.LongestGap) after
// the record's time as due now; each of these makes the next attempt due
// now, i.e. at the retry CronJob's next look (none, for a failure recorded
// as permanent: the schedule runs the next). Doubt says what was found.
func Read(raw string, now time.Time) (rec Record, ok bool) {
	rec, ok, err := Parse(raw)
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
// clock may be ahead (within the margin the Lease's expiry allows,
// kube.LeaseMargin; a test holds the two equal).
const RecordSkew = 2 * time.Minute

// recordedOutcomes are the outcomes a run records (job's OutcomeRegistered,
// OutcomeUnchanged, OutcomeFailed and OutcomeWaitingForCode).
var recordedOutcomes = map[string]bool{"registered": true, "unchanged": true, "failed": true, OutcomeWaitingForCode: true}

// unreadable is what a record that cannot be read counts as: a failure that
// began at now and is due now.
func unreadable(now time.Time, why string) Record {
	t, since, next := now, now, now
	return Record{
		Time: t, Outcome: "failed", Phase: PhaseRecord, Error: why,
		ConsecutiveFailures: 1, FailingSince: &since, Cause: CauseTransient, NextAttempt: &next,
		Doubt: why + ": counted as a failure that began at " + now.UTC().Format(time.RFC3339) + ", due now",
	}
}

// checked is r with the times of a failed run's record that cannot be true
// replaced (Read), and Doubt saying which.
func (r Record) checked(now time.Time) Record {
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
	if longest := (Policy{}).LongestGap(r.Refresh); r.NextAttempt != nil && r.NextAttempt.After(t.Add(longest)) {
		doubts = append(doubts, fmt.Sprintf("nextAttempt %s is more than the longest gap (%s) after it", stampPtr(r.NextAttempt), longest))
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
