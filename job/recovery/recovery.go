// Package recovery is the run's answer to a Registration rancher/scc-operator
// failed. The operator never retries a Failed Registration; it asks a person
// to delete scc-registration, let it clean up, and create it again. For a
// cause a retry can fix (kube.ClassifyOperatorFailure), a run does that
// itself, once, and only when this very run has shown the operator can now
// succeed: phases 1–5 passed and the handover check found the name
// resolving in the cluster and the update server answering TLS with the
// pinned certificate. For any other cause, or with recovery off, it fails
// the run with the remedy and deletes nothing.
//
// Recovery.Recover is the one call the operator step of package job makes
// for a Failed Registration; Forget resets the record once a Registration
// is active. Package job owns the exit codes: this package marks what no
// retry can fix permanent (failure.Permanent) and leaves the rest
// transient.
package recovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/providers/failure"
)

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
	// RecordStore keeps the recovery record where the Secret's deletion
	// cannot take it (the engine's Lease, *kube.Lease).
	RecordStore interface {
		LoadRecovery(ctx context.Context) (kube.RecoveryRecord, bool, error)
		SaveRecovery(ctx context.Context, rec *kube.RecoveryRecord) error
	}
	// OperatorWatcher reads what rancher/scc-operator made of the Secret
	// written afresh (*kube.OperatorWatch).
	OperatorWatcher interface {
		Report(ctx context.Context, wait time.Duration) kube.OperatorReport
	}
)

// Config is what decides whether and how a run recovers; its settings are
// OPERATOR_RECOVERY and OPERATOR_LEASE (the settings table in job owns
// their names and help; Validate owns the rule of OPERATOR_LEASE).
type Config struct {
	// Enabled is OPERATOR_RECOVERY (default true): false only reports a
	// Failed Registration, with the remedy.
	Enabled bool
	// OperatorLease is namespace/name of rancher/scc-operator's
	// leader-election Lease, which tells whether it runs.
	OperatorLease string
}

// Validate checks OPERATOR_LEASE's shape, whether or not recovery is on.
func (c Config) Validate() error {
	if ns, name, ok := strings.Cut(c.OperatorLease, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("OPERATOR_LEASE=%q: want namespace/name of rancher/scc-operator's Lease (default %s/%s)", c.OperatorLease, kube.OperatorLeaseNamespace, kube.OperatorLeaseName)
	}
	return nil
}

// Recovery is what a run needs to recover a Failed Registration
// (OPERATOR_RECOVERY=true, in a cluster). A nil *Recovery is recovery
// off: Recover only reports, Forget and WithOperatorState do nothing.
type Recovery struct {
	Secrets  Recreator
	Operator OperatorChecker
	Record   RecordStore
	// LeaseRef is namespace/name of the Lease holding the record, for the
	// command that clears it.
	LeaseRef string
	// Watch reads the new Registration, waiting up to Wait
	// (OPERATOR_WAIT) for it to become active or fail.
	Watch OperatorWatcher
	Wait  time.Duration
}

// New assembles the production Recovery from cfg: the Secret store
// recreates, the engine's Lease keeps the record, the operator's Lease
// (read through clients) says whether it runs, watch reads the new
// Registration for up to wait. It returns nil when cfg turns recovery off.
func New(cfg Config, clients *kube.Clients, secrets *kube.SecretStore, lease *kube.Lease, watch OperatorWatcher, wait time.Duration) *Recovery {
	if !cfg.Enabled {
		return nil
	}
	ns, name, _ := strings.Cut(cfg.OperatorLease, "/")
	return &Recovery{
		Secrets:  secrets,
		Operator: &kube.OperatorLease{Leases: clients.Leases, Namespace: ns, Name: name, Clock: clock.RealClock{}},
		Record:   lease,
		LeaseRef: lease.Namespace + "/" + lease.Name,
		Watch:    watch,
		Wait:     wait,
	}
}

// What a run did about a Failed Registration (Report.Outcome, and
// recovery=… in the run summary).
const (
	// Recovered: deleted, written afresh, and the new Registration is
	// active. Exit 0.
	Recovered = "recovered"
	// FailedAgain: the new Registration failed too. Exit 2: the next
	// attempt is the next scheduled run's.
	FailedAgain = "failed-again"
	// Pending: written afresh; the new Registration was neither active nor
	// failed within OPERATOR_WAIT. Exit 0 with a warning.
	Pending = "pending"
	// NeedsPerson: the cause is not one a retry can fix; nothing deleted.
	// Exit 2.
	NeedsPerson = "needs-person"
	// NotAttempted: recoverable, but recovery is off or this run did not
	// prove the update server reachable; nothing deleted. Exit 2.
	NotAttempted = "not-attempted"
	// Stopped: kube.MaxRecoveries in a row met the same cause; nothing
	// deleted. Exit 2.
	Stopped = "stopped"
	// OperatorDown: the operator is not running; nothing deleted. Exit 1:
	// it may be restarting.
	OperatorDown = "operator-not-running"
	// Terminating: deleted, but the operator's finalizer still holds it;
	// never written over. Exit 2.
	Terminating = "terminating"
	// Incomplete: the recovery stopped on an API error (or the Secret
	// changed since it was read, and nothing was deleted).
	Incomplete = "incomplete"
)

// Failure is a Registration the operator failed, and what the run knows
// that decides whether it may be recovered.
type Failure struct {
	// Report is the operator's report of the Failed Registration;
	// Verdict its classification (kube.ClassifyOperatorFailure).
	Report  kube.OperatorReport
	Verdict kube.FailureVerdict
	// Server is the update server's name; Written the values this run
	// wrote (or found current), which a recovery writes afresh.
	Server  string
	Written kube.Registration
	// Unproven says why this run did not check that the operator can
	// reach the update server (the handover wait did not run); "" when it
	// did and passed.
	Unproven string
	// SecretRef is namespace/name of the Secret, for the remedies.
	SecretRef string
}

// Report is what a run did about a Failed Registration, for the summary,
// the Event and tests.
type Report struct {
	Outcome     string
	Cause       string
	Recoverable bool
	// Attempt is this recovery's number in the record (1…MaxRecoveries);
	// for Stopped, the attempts already made.
	Attempt int
	// Replaced is the report of the Failed Registration.
	Replaced kube.OperatorReport
	// Took is the time from the delete to the new Registration's answer.
	Took time.Duration
	// Event is the run's Event.
	Event kube.JobEvent
	// Rewritten says the Secret was deleted and written afresh; Operator
	// is then the new Registration's report.
	Rewritten bool
	Operator  kube.OperatorReport
}

// Attrs are the report as the run summary's attributes.
func (r Report) Attrs() []any {
	attrs := []any{slog.String("recovery", r.Outcome), slog.String("cause", r.Cause), slog.Bool("recoverable", r.Recoverable)}
	if r.Attempt > 0 {
		attrs = append(attrs, slog.Int("recoveryAttempt", r.Attempt))
	}
	if r.Outcome == Recovered || r.Outcome == FailedAgain || r.Outcome == Pending {
		attrs = append(attrs, slog.String("replacedRegistration", r.Replaced.Registration), slog.String("replacedMessage", r.Replaced.Message), slog.Int64("recoveryMs", r.Took.Milliseconds()))
	}
	return attrs
}

// Recover is the run's answer to a Failed Registration: it recovers what a
// retry can fix and otherwise fails the run with the remedy. It is called
// at most once per run. A nil error means the Secret was written afresh
// and the new Registration is active or still pending.
func (r *Recovery) Recover(ctx context.Context, log *slog.Logger, f Failure) (Report, error) {
	rep, verdict, server := f.Report, f.Verdict, f.Server
	rr := Report{Cause: verdict.Cause, Recoverable: verdict.Recoverable, Replaced: rep}
	failed := fmt.Sprintf("registration %s: %s (cause: %s)", rep.Registration, rep.Message, verdict.Cause)
	warn := func(reason, note string) {
		rr.Event = kube.JobEvent{Warning: true, Reason: reason, Action: "Recover", Note: note}
	}

	if !verdict.Recoverable {
		rr.Outcome = NeedsPerson
		remedy := needsPersonRemedy(verdict, f.SecretRef, server)
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s. Needs you (%s: another attempt with the same values fails the same way, so nothing was deleted). Remedy: %s", rep.Registration, rep.Message, verdict.Cause, remedy))
		return rr, failure.Permanent(fmt.Errorf("%w: %s; needs you: another attempt with the same values fails the same way, so nothing was deleted; %s", ErrOperatorFailed, failed, remedy))
	}
	var why string
	switch {
	case r == nil:
		why = "OPERATOR_RECOVERY=false"
	case f.Unproven != "":
		why = "this run did not check that the operator can reach the update server (" + f.Unproven + ")"
	}
	if why != "" {
		rr.Outcome = NotAttempted
		remedy := operatorRemedy(f.SecretRef, server)
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s (%s, which a retry can fix). Not recovered automatically: %s. Remedy: %s", rep.Registration, rep.Message, verdict.Cause, why, remedy))
		return rr, failure.Permanent(fmt.Errorf("%w: %s; not recovered automatically: %s; %s", ErrOperatorFailed, failed, why, remedy))
	}

	prev, hadRecord, err := r.Record.LoadRecovery(ctx)
	if err != nil {
		rr.Outcome = Incomplete
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s. Not recovered: %v", rep.Registration, rep.Message, err))
		return rr, fmt.Errorf("%w: %s; not recovered, nothing deleted: %w", ErrOperatorFailed, failed, err)
	}
	if prev.Exhausted(rep.Target, verdict.Cause) {
		rr.Outcome, rr.Attempt = Stopped, prev.Attempts
		msg := fmt.Sprintf("stopped recovering: %d recoveries in a row, the last at %s, ended with the same cause (%s), so nothing was deleted; fix what fails (the operator's log says what it met), then clear the record so the next run recovers again: %s; a new registration code or URL starts afresh by itself",
			prev.Attempts, prev.Time.UTC().Format(time.RFC3339), verdict.Cause, r.clearRecordCommand())
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s. Needs you: %s", rep.Registration, rep.Message, msg))
		log.Error("not recovering the registration", slog.String("reason", msg), slog.Int("attempts", prev.Attempts))
		return rr, failure.Permanent(fmt.Errorf("%w: %s; %s", ErrOperatorFailed, failed, msg))
	}
	attempt := prev.Next(rep.Target, verdict.Cause)
	rr.Attempt = attempt
	of := fmt.Sprintf("%d of %d", attempt, kube.MaxRecoveries)

	if _, err := r.Operator.Check(ctx); err != nil {
		rr.Outcome = OperatorDown
		msg := fmt.Sprintf("not recovered, nothing deleted: %v; a Secret deleted now would wait for the operator's finalizer; once the operator runs (its Lease %s renewed), the next run recovers (attempt %s)", err, r.Operator.Ref(), of)
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s (%s). %s", rep.Registration, rep.Message, verdict.Cause, msg))
		log.Error("not recovering the registration: the operator is not running", slog.String("error", err.Error()))
		return rr, fmt.Errorf("%w: %s; %s", ErrOperatorFailed, failed, msg)
	}

	// The attempt is recorded before the delete: a run killed halfway
	// still counts it.
	now := time.Now()
	rec := kube.RecoveryRecord{Attempts: attempt, Time: now, Cause: verdict.Cause, Message: rep.Message, Outcome: kube.RecoveryIncomplete, Target: rep.Target, Registration: rep.Registration}
	if err := r.Record.SaveRecovery(ctx, &rec); err != nil {
		rr.Outcome = Incomplete
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s. Not recovered: the attempt could not be recorded: %v", rep.Registration, rep.Message, err))
		return rr, fmt.Errorf("%w: %s; not recovered, nothing deleted: the attempt could not be recorded: %w", ErrOperatorFailed, failed, err)
	}
	log.Warn("recovering the registration: deleting the Secret the operator failed and writing it afresh, as the operator asks",
		slog.Int("attempt", attempt), slog.Int("maxAttempts", kube.MaxRecoveries), slog.String("cause", verdict.Cause), slog.String("registration", rep.Registration))

	t := time.Now()
	// 0: kube.DefaultGoneWait for the finalizer to let the Secret go.
	rres, err := r.Secrets.Recreate(ctx, f.Written, rep.SecretUID, rep.SecretResourceVersion, 0)
	if err != nil {
		rr.Outcome = Incomplete
		switch {
		case errors.Is(err, kube.ErrSecretChanged):
			// Nothing deleted: the attempt did not happen.
			if hadRecord {
				r.saveRecord(ctx, log, &prev)
			} else {
				r.saveRecord(ctx, log, nil)
			}
		case errors.Is(err, kube.ErrSecretTerminating):
			rr.Outcome = Terminating
			rec.Outcome = kube.RecoveryTerminating
			r.saveRecord(ctx, log, &rec)
			err = r.WithOperatorState(ctx, err)
		}
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s (%s). Recovery %s did not finish: %v", rep.Registration, rep.Message, verdict.Cause, of, err))
		return rr, fmt.Errorf("%w: %s; recovery %s: %w", ErrOperatorFailed, failed, of, err)
	}
	rr.Rewritten = true

	next := r.Watch.Report(ctx, r.Wait)
	rr.Operator = next
	rr.Took = time.Since(t)
	rec.Registration, rec.Time = next.Registration, time.Now()
	switch next.State {
	case kube.OperatorActive:
		rr.Outcome = Recovered
		rec.Attempts, rec.Outcome = 0, kube.RecoveryRecovered
		r.saveRecord(ctx, log, &rec)
		rr.Event = kube.JobEvent{Reason: kube.ReasonOperatorRecovered, Action: "Recover", Note: fmt.Sprintf(
			"rancher/scc-operator had failed registration %s: %s (%s, which a retry can fix). The engine deleted %s (the operator let it go after %s), wrote it afresh with the same values, and registration %s is active %s later (recovery %s)",
			rep.Registration, rep.Message, verdict.Cause, f.SecretRef, rres.Gone.Round(time.Millisecond), next.Registration, rr.Took.Round(time.Millisecond), of)}
		log.Info("recovered the registration", slog.String("registration", next.Registration), slog.String("replaced", rep.Registration), slog.String("replacedMessage", rep.Message), slog.Int64("recoveryMs", rr.Took.Milliseconds()), slog.Int("attempt", attempt))
		return rr, nil
	case kube.OperatorFailed:
		rr.Outcome = FailedAgain
		again := kube.ClassifyOperatorFailure(next.Message)
		rec.Outcome, rec.Message = kube.RecoveryFailed, next.Message
		r.saveRecord(ctx, log, &rec)
		var then string
		switch {
		case !again.Recoverable:
			then = "the new failure needs you (" + again.Cause + "): " + needsPersonRemedy(again, f.SecretRef, server)
		case attempt >= kube.MaxRecoveries:
			then = fmt.Sprintf("that was the last of %d: later runs do not delete the Secret for this cause until %s is cleared (%s) or the code or URL changes", kube.MaxRecoveries, kube.AnnotationRecovery, r.clearRecordCommand())
		default:
			then = "the next scheduled run recovers again (this run exits 2, which ends the Job without retries: an outage outlasts a Job's retries, which would spend every attempt within minutes)"
		}
		msg := fmt.Sprintf("recovery %s failed: the new registration %s failed too: %s (cause: %s); it replaced registration %s, failed with: %s; %s", of, next.Registration, next.Message, again.Cause, rep.Registration, rep.Message, then)
		warn(kube.ReasonOperatorFailed, "rancher/scc-operator: "+msg)
		return rr, failure.Permanent(fmt.Errorf("%w: %s", ErrOperatorFailed, msg))
	default:
		rr.Outcome = Pending
		rec.Outcome = kube.RecoveryPending
		r.saveRecord(ctx, log, &rec)
		rr.Event = kube.JobEvent{Warning: true, Reason: kube.ReasonRegistered, Action: "Recover", Note: fmt.Sprintf(
			"recovery %s: rancher/scc-operator had failed registration %s: %s (%s); the engine deleted %s and wrote it afresh; operator=%s: %s",
			of, rep.Registration, rep.Message, verdict.Cause, f.SecretRef, next.State, next.Message)}
		log.Warn("wrote the Secret afresh; rancher/scc-operator has not finished the new registration", slog.String("operator", next.State), slog.String("operatorMessage", next.Message), slog.String("operatorWait", r.Wait.String()))
		return rr, nil
	}
}

// Forget resets the record once the operator's Registration is active: the
// recoveries in a row that count towards MaxRecoveries ended.
func (r *Recovery) Forget(ctx context.Context, log *slog.Logger, rep kube.OperatorReport) {
	if r == nil {
		return
	}
	rec, ok, err := r.Record.LoadRecovery(ctx)
	if err != nil {
		log.Warn("could not read the recovery record", slog.String("error", err.Error()))
		return
	}
	if !ok || rec.Outcome == kube.RecoveryRecovered {
		return
	}
	rec.Attempts, rec.Outcome, rec.Registration, rec.Time = 0, kube.RecoveryRecovered, rep.Registration, time.Now()
	r.saveRecord(ctx, log, &rec)
}

// saveRecord writes the record; a failure is a warning (the error of the
// run, if any, is what the user must see).
func (r *Recovery) saveRecord(ctx context.Context, log *slog.Logger, rec *kube.RecoveryRecord) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.Record.SaveRecovery(sctx, rec); err != nil {
		log.Warn("could not save the recovery record", slog.String("error", err.Error()))
	}
}

// WithOperatorState adds to a Secret-being-deleted error whether the
// operator, whose finalizer holds it, is running. Any other error, and
// every error when r is nil, is returned as it is.
func (r *Recovery) WithOperatorState(ctx context.Context, err error) error {
	if err == nil || !errors.Is(err, kube.ErrSecretTerminating) || r == nil || r.Operator == nil {
		return err
	}
	live, cerr := r.Operator.Check(ctx)
	if cerr != nil {
		return fmt.Errorf("%w; %v: start it, and it lets the Secret go", err, cerr)
	}
	return fmt.Errorf("%w; rancher/scc-operator is running (Lease %s renewed %s ago by %s) and has not let it go yet: its log says why", err, r.Operator.Ref(), live.Age.Round(time.Second), live.Holder)
}

// needsPersonRemedy is what a person must do about a failure no retry with
// the same values can fix; secret is namespace/name.
func needsPersonRemedy(v kube.FailureVerdict, secret, server string) string {
	switch {
	case v.CodeRefused():
		return "the update server refused the registration code: put a valid one in the Secret registration-code (key regCode) or REGISTRATION_CODE; the next run writes it and the operator registers afresh under a new name, with no delete"
	case v.Untrusted:
		return "the operator does not trust the update server's certificate: run rancher/scc-operator add-rmt-support (dad26bb) or later, which trusts registrationUrlCert (README \"Which rancher/scc-operator works\"); then " + operatorRemedy(secret, server)
	default:
		return operatorRemedy(secret, server)
	}
}

// operatorRemedy is what the operator requires before it registers again;
// secret is namespace/name.
func operatorRemedy(secret, server string) string {
	ns, name, _ := strings.Cut(secret, "/")
	return fmt.Sprintf("the operator ignores %s until it is deleted: once %s resolves in the cluster and answers, run `kubectl -n %s delete secret %s` (the operator deregisters and releases it) and start the Job again (`kubectl -n %s create job --from=cronjob/%s <name>`), which writes it afresh",
		secret, server, ns, name, ns, kube.CronJobName)
}

// clearRecordCommand is the kubectl command that clears the record.
func (r *Recovery) clearRecordCommand() string {
	ref := kube.Namespace + "/" + kube.LeaseName
	if r != nil && r.LeaseRef != "" {
		ref = r.LeaseRef
	}
	ns, name, _ := strings.Cut(ref, "/")
	return "`" + kube.ClearRecoveryCommand(ns, name) + "`"
}
