package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/providers/failure"
)

// The recovery of a Registration rancher/scc-operator failed for a passing
// cause. The operator never retries a Failed Registration; it asks a person
// to delete scc-registration, let it clean up, and create it again. For a
// cause a retry can fix (kube.ClassifyOperatorFailure), a run does that
// itself, once, and only when this very run has shown the operator can now
// succeed: phases 1–5 passed and the handover check found the name
// resolving in the cluster and the update server answering TLS with the
// pinned certificate.

type (
	// Recreator deletes the Secret the report was read from and writes it
	// afresh (*kube.SecretStore).
	Recreator interface {
		Recreate(ctx context.Context, r kube.Registration, uid types.UID, resourceVersion string, goneWait time.Duration) (kube.RecreateResult, error)
	}
	// OperatorChecker tells whether rancher/scc-operator is running
	// (*kube.OperatorLease).
	OperatorChecker interface {
		Check(ctx context.Context) (kube.OperatorLiveness, error)
		Ref() string
	}
	// RecoveryLog keeps the recovery record where the Secret's deletion
	// cannot take it (the engine's Lease, *kube.Lease).
	RecoveryLog interface {
		LoadRecovery(ctx context.Context) (kube.RecoveryRecord, bool, error)
		SaveRecovery(ctx context.Context, rec *kube.RecoveryRecord) error
	}
)

// Recovery is what a run needs to recover a Failed Registration
// (OPERATOR_RECOVERY=true, in a cluster).
type Recovery struct {
	Secrets  Recreator
	Operator OperatorChecker
	Record   RecoveryLog
	// LeaseRef is namespace/name of the Lease holding the record, for the
	// command that clears it.
	LeaseRef string
}

// What a run did about a Failed Registration (RecoveryReport.Outcome, and
// recovery=… in the run summary).
const (
	// RecoveryRecovered: deleted, written afresh, and the new Registration
	// is active. Exit 0.
	RecoveryRecovered = "recovered"
	// RecoveryFailedAgain: the new Registration failed too. Exit 2: the
	// next attempt is the next scheduled run's.
	RecoveryFailedAgain = "failed-again"
	// RecoveryPending: written afresh; the new Registration was neither
	// active nor failed within OPERATOR_WAIT. Exit 0 with a warning.
	RecoveryPending = "pending"
	// RecoveryNeedsPerson: the cause is not one a retry can fix; nothing
	// deleted. Exit 2.
	RecoveryNeedsPerson = "needs-person"
	// RecoveryNotAttempted: recoverable, but recovery is off or this run
	// did not prove the update server reachable; nothing deleted. Exit 2.
	RecoveryNotAttempted = "not-attempted"
	// RecoveryStopped: kube.MaxRecoveries in a row met the same cause;
	// nothing deleted. Exit 2.
	RecoveryStopped = "stopped"
	// RecoveryOperatorDown: the operator is not running; nothing deleted.
	// Exit 1: it may be restarting.
	RecoveryOperatorDown = "operator-not-running"
	// RecoveryTerminating: deleted, but the operator's finalizer still
	// holds it; never written over. Exit 2.
	RecoveryTerminating = "terminating"
	// RecoveryIncomplete: the recovery stopped on an API error (or the
	// Secret changed since it was read, and nothing was deleted).
	RecoveryIncomplete = "incomplete"
)

// RecoveryReport is what a run did about a Failed Registration, for the
// summary, the Event and tests.
type RecoveryReport struct {
	Outcome     string
	Cause       string
	Recoverable bool
	// Attempt is this recovery's number in the record (1…MaxRecoveries);
	// for RecoveryStopped, the attempts already made.
	Attempt int
	// Replaced is the report of the Failed Registration.
	Replaced kube.OperatorReport
	// Took is the time from the delete to the new Registration's answer.
	Took time.Duration
	// Event is the run's Event (Reason "" leaves it to recordEvent).
	Event kube.JobEvent
}

// recover is reportOperator's answer to a Failed Registration: it recovers
// what a retry can fix and otherwise fails the run with the remedy. It is
// called at most once per run.
func (j *Job) recover(ctx context.Context, log *slog.Logger, res *Result, server string, written writeFacts, verdict kube.FailureVerdict) error {
	rep := res.Operator
	res.Failed = PhaseOperator
	rr := &RecoveryReport{Cause: verdict.Cause, Recoverable: verdict.Recoverable, Replaced: rep}
	res.Recovery = rr
	failed := fmt.Sprintf("registration %s: %s (cause: %s)", rep.Registration, rep.Message, verdict.Cause)
	warn := func(reason, note string) {
		rr.Event = kube.JobEvent{Warning: true, Reason: reason, Action: "Recover", Note: note}
	}

	if !verdict.Recoverable {
		rr.Outcome = RecoveryNeedsPerson
		remedy := j.needsPersonRemedy(verdict, server)
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s. Needs you (%s: another attempt with the same values fails the same way, so nothing was deleted). Remedy: %s", rep.Registration, rep.Message, verdict.Cause, remedy))
		return failure.Permanent(fmt.Errorf("%w: %s; needs you: another attempt with the same values fails the same way, so nothing was deleted; %s", ErrOperatorFailed, failed, remedy))
	}
	var why string
	switch {
	case j.Recovery == nil:
		why = "OPERATOR_RECOVERY=false"
	case written.noHandover != "":
		why = "this run did not check that the operator can reach the update server (" + written.noHandover + ")"
	}
	if why != "" {
		rr.Outcome = RecoveryNotAttempted
		remedy := operatorRemedy(j.secretRef(), server)
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s (%s, which a retry can fix). Not recovered automatically: %s. Remedy: %s", rep.Registration, rep.Message, verdict.Cause, why, remedy))
		return failure.Permanent(fmt.Errorf("%w: %s; not recovered automatically: %s; %s", ErrOperatorFailed, failed, why, remedy))
	}

	prev, hadRecord, err := j.Recovery.Record.LoadRecovery(ctx)
	if err != nil {
		rr.Outcome = RecoveryIncomplete
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s. Not recovered: %v", rep.Registration, rep.Message, err))
		return fmt.Errorf("%w: %s; not recovered, nothing deleted: %w", ErrOperatorFailed, failed, err)
	}
	if prev.Exhausted(rep.Target, verdict.Cause) {
		rr.Outcome, rr.Attempt = RecoveryStopped, prev.Attempts
		msg := fmt.Sprintf("stopped recovering: %d recoveries in a row, the last at %s, ended with the same cause (%s), so nothing was deleted; fix what fails (the operator's log says what it met), then clear the record so the next run recovers again: %s; a new registration code or URL starts afresh by itself",
			prev.Attempts, prev.Time.UTC().Format(time.RFC3339), verdict.Cause, j.clearRecordCommand())
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s. Needs you: %s", rep.Registration, rep.Message, msg))
		log.Error("not recovering the registration", slog.String("reason", msg), slog.Int("attempts", prev.Attempts))
		return failure.Permanent(fmt.Errorf("%w: %s; %s", ErrOperatorFailed, failed, msg))
	}
	attempt := prev.Next(rep.Target, verdict.Cause)
	rr.Attempt = attempt
	of := fmt.Sprintf("%d of %d", attempt, kube.MaxRecoveries)

	if _, err := j.Recovery.Operator.Check(ctx); err != nil {
		rr.Outcome = RecoveryOperatorDown
		msg := fmt.Sprintf("not recovered, nothing deleted: %v; a Secret deleted now would wait for the operator's finalizer; once the operator runs (its Lease %s renewed), the next run recovers (attempt %s)", err, j.Recovery.Operator.Ref(), of)
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s (%s). %s", rep.Registration, rep.Message, verdict.Cause, msg))
		log.Error("not recovering the registration: the operator is not running", slog.String("error", err.Error()))
		return fmt.Errorf("%w: %s; %s", ErrOperatorFailed, failed, msg)
	}

	// The attempt is recorded before the delete: a run killed halfway
	// still counts it.
	now := time.Now()
	rec := kube.RecoveryRecord{Attempts: attempt, Time: now, Cause: verdict.Cause, Message: rep.Message, Outcome: kube.RecoveryIncomplete, Target: rep.Target, Registration: rep.Registration}
	if err := j.Recovery.Record.SaveRecovery(ctx, &rec); err != nil {
		rr.Outcome = RecoveryIncomplete
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s. Not recovered: the attempt could not be recorded: %v", rep.Registration, rep.Message, err))
		return fmt.Errorf("%w: %s; not recovered, nothing deleted: the attempt could not be recorded: %w", ErrOperatorFailed, failed, err)
	}
	log.Warn("recovering the registration: deleting the Secret the operator failed and writing it afresh, as the operator asks",
		slog.Int("attempt", attempt), slog.Int("maxAttempts", kube.MaxRecoveries), slog.String("cause", verdict.Cause), slog.String("registration", rep.Registration))

	t := time.Now()
	// 0: kube.DefaultGoneWait for the finalizer to let the Secret go.
	rres, err := j.Recovery.Secrets.Recreate(ctx, written.reg, rep.SecretUID, rep.SecretResourceVersion, 0)
	if err != nil {
		rr.Outcome = RecoveryIncomplete
		switch {
		case errors.Is(err, kube.ErrSecretChanged):
			// Nothing deleted: the attempt did not happen.
			if hadRecord {
				j.saveRecord(ctx, log, &prev)
			} else {
				j.saveRecord(ctx, log, nil)
			}
		case errors.Is(err, kube.ErrSecretTerminating):
			rr.Outcome = RecoveryTerminating
			rec.Outcome = kube.RecoveryTerminating
			j.saveRecord(ctx, log, &rec)
			err = j.withOperatorState(ctx, err)
		}
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s (%s). Recovery %s did not finish: %v", rep.Registration, rep.Message, verdict.Cause, of, err))
		return fmt.Errorf("%w: %s; recovery %s: %w", ErrOperatorFailed, failed, of, err)
	}
	res.Changed, res.Outcome = true, OutcomeRegistered

	next := j.Operator.Report(ctx, j.OperatorWait)
	res.Operator = next
	rr.Took = time.Since(t)
	rec.Registration, rec.Time = next.Registration, time.Now()
	switch next.State {
	case kube.OperatorActive:
		res.Failed = ""
		rr.Outcome = RecoveryRecovered
		rec.Attempts, rec.Outcome = 0, kube.RecoveryRecovered
		j.saveRecord(ctx, log, &rec)
		rr.Event = kube.JobEvent{Reason: kube.ReasonOperatorRecovered, Action: "Recover", Note: fmt.Sprintf(
			"rancher/scc-operator had failed registration %s: %s (%s, which a retry can fix). The engine deleted %s (the operator let it go after %s), wrote it afresh with the same values, and registration %s is active %s later (recovery %s)",
			rep.Registration, rep.Message, verdict.Cause, j.secretRef(), rres.Gone.Round(time.Millisecond), next.Registration, rr.Took.Round(time.Millisecond), of)}
		log.Info("recovered the registration", slog.String("registration", next.Registration), slog.String("replaced", rep.Registration), slog.String("replacedMessage", rep.Message), slog.Int64("recoveryMs", rr.Took.Milliseconds()), slog.Int("attempt", attempt))
		return nil
	case kube.OperatorFailed:
		rr.Outcome = RecoveryFailedAgain
		again := kube.ClassifyOperatorFailure(next.Message)
		rec.Outcome, rec.Message = kube.RecoveryFailed, next.Message
		j.saveRecord(ctx, log, &rec)
		var then string
		switch {
		case !again.Recoverable:
			then = "the new failure needs you (" + again.Cause + "): " + j.needsPersonRemedy(again, server)
		case attempt >= kube.MaxRecoveries:
			then = fmt.Sprintf("that was the last of %d: later runs do not delete the Secret for this cause until %s is cleared (%s) or the code or URL changes", kube.MaxRecoveries, kube.AnnotationRecovery, j.clearRecordCommand())
		default:
			then = "the next scheduled run recovers again (this run exits 2, which ends the Job without retries: an outage outlasts a Job's retries, which would spend every attempt within minutes)"
		}
		msg := fmt.Sprintf("recovery %s failed: the new registration %s failed too: %s (cause: %s); it replaced registration %s, failed with: %s; %s", of, next.Registration, next.Message, again.Cause, rep.Registration, rep.Message, then)
		warn(kube.ReasonOperatorFailed, "rancher/scc-operator: "+msg)
		return failure.Permanent(fmt.Errorf("%w: %s", ErrOperatorFailed, msg))
	default:
		res.Failed = ""
		rr.Outcome = RecoveryPending
		rec.Outcome = kube.RecoveryPending
		j.saveRecord(ctx, log, &rec)
		rr.Event = kube.JobEvent{Warning: true, Reason: kube.ReasonRegistered, Action: "Recover", Note: fmt.Sprintf(
			"recovery %s: rancher/scc-operator had failed registration %s: %s (%s); the engine deleted %s and wrote it afresh; operator=%s: %s",
			of, rep.Registration, rep.Message, verdict.Cause, j.secretRef(), next.State, next.Message)}
		log.Warn("wrote the Secret afresh; rancher/scc-operator has not finished the new registration", slog.String("operator", next.State), slog.String("operatorMessage", next.Message), slog.String("operatorWait", j.OperatorWait.String()))
		return nil
	}
}

// forgetRecoveries resets the record once the operator's Registration is
// active: the recoveries in a row that count towards MaxRecoveries ended.
func (j *Job) forgetRecoveries(ctx context.Context, log *slog.Logger, rep kube.OperatorReport) {
	if j.Recovery == nil {
		return
	}
	rec, ok, err := j.Recovery.Record.LoadRecovery(ctx)
	if err != nil {
		log.Warn("could not read the recovery record", slog.String("error", err.Error()))
		return
	}
	if !ok || rec.Outcome == kube.RecoveryRecovered {
		return
	}
	rec.Attempts, rec.Outcome, rec.Registration, rec.Time = 0, kube.RecoveryRecovered, rep.Registration, time.Now()
	j.saveRecord(ctx, log, &rec)
}

// saveRecord writes the record; a failure is a warning (the error of the
// run, if any, is what the user must see).
func (j *Job) saveRecord(ctx context.Context, log *slog.Logger, rec *kube.RecoveryRecord) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := j.Recovery.Record.SaveRecovery(sctx, rec); err != nil {
		log.Warn("could not save the recovery record", slog.String("error", err.Error()))
	}
}

// withOperatorState adds to a Secret-being-deleted error whether the
// operator, whose finalizer holds it, is running.
func (j *Job) withOperatorState(ctx context.Context, err error) error {
	if err == nil || !errors.Is(err, kube.ErrSecretTerminating) || j.Recovery == nil || j.Recovery.Operator == nil {
		return err
	}
	live, cerr := j.Recovery.Operator.Check(ctx)
	if cerr != nil {
		return fmt.Errorf("%w; %v: start it, and it lets the Secret go", err, cerr)
	}
	return fmt.Errorf("%w; rancher/scc-operator is running (Lease %s renewed %s ago by %s) and has not let it go yet: its log says why", err, j.Recovery.Operator.Ref(), live.Age.Round(time.Second), live.Holder)
}

// needsPersonRemedy is what a person must do about a failure no retry with
// the same values can fix.
func (j *Job) needsPersonRemedy(v kube.FailureVerdict, server string) string {
	switch {
	case v.CodeRefused():
		return "the update server refused the registration code: put a valid one in the Secret registration-code (key regCode) or REGISTRATION_CODE; the next run writes it and the operator registers afresh under a new name, with no delete"
	case v.Untrusted:
		return "the operator does not trust the update server's certificate: run rancher/scc-operator add-rmt-support (dad26bb) or later, which trusts registrationUrlCert (README \"Which rancher/scc-operator works\"); then " + operatorRemedy(j.secretRef(), server)
	default:
		return operatorRemedy(j.secretRef(), server)
	}
}

// clearRecordCommand is the kubectl command that clears the record.
func (j *Job) clearRecordCommand() string {
	ref := kube.Namespace + "/" + kube.LeaseName
	if j.Recovery != nil && j.Recovery.LeaseRef != "" {
		ref = j.Recovery.LeaseRef
	}
	ns, name, _ := strings.Cut(ref, "/")
	return "`" + kube.ClearRecoveryCommand(ns, name) + "`"
}
