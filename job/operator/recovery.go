package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/kube"
)

type (
	// Recreator deletes the Secret the report was read from and writes it
	// afresh (*SecretStore).
	Recreator interface {
		Recreate(ctx context.Context, r Values, uid types.UID, resourceVersion string, goneWait time.Duration) (RecreateResult, error)
	}
	// Checker tells whether rancher/scc-operator is running (*LeaderLease).
	Checker interface {
		Check(ctx context.Context) (Liveness, error)
		Ref() string
	}
	// RecordStore keeps the recovery record where the Secret's deletion
	// cannot take it (the engine's Lease: LeaseRecords).
	RecordStore interface {
		Load(ctx context.Context) (Record, bool, error)
		Save(ctx context.Context, rec *Record) error
	}
	// Watcher reads what rancher/scc-operator made of the Secret (*Watch).
	Watcher interface {
		Report(ctx context.Context, wait time.Duration) Report
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
		return fmt.Errorf("OPERATOR_LEASE=%q: want namespace/name of rancher/scc-operator's Lease (default %s/%s)", c.OperatorLease, LeaseNamespace, LeaseName)
	}
	return nil
}

// Recovery is what a run needs to recover a Failed Registration
// (OPERATOR_RECOVERY=true, in a cluster). A nil *Recovery is recovery
// off: Recover only reports, Forget and WithOperatorState do nothing.
type Recovery struct {
	Secrets  Recreator
	Operator Checker
	Record   RecordStore
	// LeaseRef is namespace/name of the Lease holding the record, for the
	// command that clears it.
	LeaseRef string
	// Watch reads the new Registration, waiting up to Wait
	// (OPERATOR_WAIT) for it to become active or fail.
	Watch Watcher
	Wait  time.Duration
	// Redact redacts the run's secrets from the operator's words before
	// the record keeps them (the Lease is read by more than the engine);
	// nil keeps them as they are.
	Redact func(string) string
}

// NewRecovery assembles the production Recovery from cfg: the Secret store
// recreates, the engine's Lease keeps the record, the operator's Lease
// (read through clients) says whether it runs, watch reads the new
// Registration for up to wait. It returns nil when cfg turns recovery off.
func NewRecovery(cfg Config, clients *kube.Clients, secrets *SecretStore, lease *kube.Lease, watch Watcher, wait time.Duration, redact func(string) string) *Recovery {
	if !cfg.Enabled {
		return nil
	}
	ns, name, _ := strings.Cut(cfg.OperatorLease, "/")
	return &Recovery{
		Secrets:  secrets,
		Operator: &LeaderLease{Leases: clients.Leases, Namespace: ns, Name: name, Clock: clock.RealClock{}},
		Record:   LeaseRecords{Lease: lease},
		LeaseRef: lease.Ref(),
		Watch:    watch,
		Wait:     wait,
		Redact:   redact,
	}
}

// What a run did about a Failed Registration (RecoveryReport.Outcome, and
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
	// Stopped: MaxRecoveries in a row for this code and URL; nothing
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

// Decision is what a run will do about a Failed Registration, decided from
// what can be known before it acts: the failure's verdict, the recovery
// record and whether recovery is on. A run acts on it (Recover); status
// shows it. Outcome is NeedsPerson, NotAttempted or Stopped when the run
// deletes nothing, "" when it recovers (attempt Attempt), unless the
// operator is found not running or the handover was not proved.
type Decision struct {
	Outcome string
	// Attempt is the recovery's number (1…MaxRecoveries); for Stopped, the
	// attempts already made.
	Attempt int
	// Last is when the last recovery was made (Stopped).
	Last time.Time
}

// Decide is the one owner of the rule that says whether a Failed
// Registration is recovered. rec is nil when there is no record.
func Decide(v Verdict, rec *Record, target string, enabled bool) Decision {
	switch {
	case !v.Recoverable:
		return Decision{Outcome: NeedsPerson}
	case !enabled:
		return Decision{Outcome: NotAttempted}
	case rec != nil && rec.Exhausted(target):
		return Decision{Outcome: Stopped, Attempt: rec.Attempts, Last: rec.Time}
	case rec != nil:
		return Decision{Attempt: rec.Next(target)}
	default:
		return Decision{Attempt: 1}
	}
}

// Failure is a Registration the operator failed, and what the run knows
// that decides whether it may be recovered.
type Failure struct {
	// Report is the operator's report of the Failed Registration, its
	// Verdict included.
	Report Report
	// Server is the update server's name; Written the values this run
	// wrote (or found current), which a recovery writes afresh.
	Server  string
	Written Values
	// Unproven says why this run did not check that the operator can
	// reach the update server (the handover wait did not run); "" when it
	// did and passed.
	Unproven string
	// SecretRef is namespace/name of the Secret, CronJob the CronJob's
	// name, for the remedies.
	SecretRef string
	CronJob   string
}

// RecoveryReport is what a run did about a Failed Registration, for the
// summary, the Event and tests.
type RecoveryReport struct {
	Outcome     string
	Cause       string
	Recoverable bool
	// Attempt is this recovery's number in the record (1…MaxRecoveries);
	// for Stopped, the attempts already made.
	Attempt int
	// Replaced is the report of the Failed Registration.
	Replaced Report
	// Took is the time from the delete to the new Registration's answer.
	Took time.Duration
	// Event is the run's Event.
	Event kube.JobEvent
	// Rewritten says the Secret was deleted and written afresh; Operator
	// is then the new Registration's report.
	Rewritten bool
	Operator  Report
}

// Attrs are the report as the run summary's attributes.
func (r RecoveryReport) Attrs() []any {
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
func (r *Recovery) Recover(ctx context.Context, log *slog.Logger, f Failure) (RecoveryReport, error) {
	rep, verdict := f.Report, f.Report.Verdict
	rr := RecoveryReport{Cause: verdict.Cause, Recoverable: verdict.Recoverable, Replaced: rep}
	failed := fmt.Sprintf("registration %s: %s (cause: %s)", rep.Registration, rep.Message, verdict.Cause)
	warn := func(reason, note string) {
		rr.Event = kube.JobEvent{Warning: true, Reason: reason, Action: "Recover", Note: note}
	}

	var (
		prev      Record
		hadRecord bool
	)
	if r != nil && f.Unproven == "" && verdict.Recoverable {
		var err error
		if prev, hadRecord, err = r.Record.Load(ctx); err != nil {
			rr.Outcome = Incomplete
			warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s. Not recovered: %v", rep.Registration, rep.Message, err))
			return rr, fmt.Errorf("%w: %s; not recovered, nothing deleted: %w", ErrOperatorFailed, failed, err)
		}
	}
	var recp *Record
	if hadRecord {
		recp = &prev
	}
	d := Decide(verdict, recp, rep.Target, r != nil)
	var why string
	switch {
	case d.Outcome == NeedsPerson:
		rr.Outcome = NeedsPerson
		why, remedy := d.Remedy(verdict, r.where(f))
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s. Needs you (%s: %s). Remedy: %s", rep.Registration, rep.Message, verdict.Cause, why, remedy))
		return rr, failure.Permanent(fmt.Errorf("%w: %s; needs you: %s; %s", ErrOperatorFailed, failed, why, remedy))
	case d.Outcome == NotAttempted:
		why = "OPERATOR_RECOVERY=false"
	case f.Unproven != "":
		why = "this run did not check that the operator can reach the update server (" + f.Unproven + ")"
	}
	if why != "" {
		rr.Outcome = NotAttempted
		_, remedy := d.Remedy(verdict, r.where(f))
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s (%s, which a retry can fix). Not recovered automatically: %s. Remedy: %s", rep.Registration, rep.Message, verdict.Cause, why, remedy))
		return rr, failure.Permanent(fmt.Errorf("%w: %s; not recovered automatically: %s; %s", ErrOperatorFailed, failed, why, remedy))
	}
	if d.Outcome == Stopped {
		rr.Outcome, rr.Attempt = Stopped, d.Attempt
		why, remedy := d.Remedy(verdict, r.where(f))
		msg := why + "; " + remedy
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s. Needs you: %s", rep.Registration, rep.Message, msg))
		log.Error("not recovering the registration", slog.String("reason", msg), slog.Int("attempts", d.Attempt))
		return rr, failure.Permanent(fmt.Errorf("%w: %s; %s", ErrOperatorFailed, failed, msg))
	}
	attempt := d.Attempt
	rr.Attempt = attempt
	of := fmt.Sprintf("%d of %d", attempt, MaxRecoveries)

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
	rec := Record{Attempts: attempt, Time: now, Cause: verdict.Cause, Message: keepMessage(rep.Message, r.Redact), Outcome: RecordIncomplete, Target: rep.Target, Registration: rep.Registration}
	if err := r.Record.Save(ctx, &rec); err != nil {
		rr.Outcome = Incomplete
		warn(kube.ReasonOperatorFailed, fmt.Sprintf("rancher/scc-operator marked registration %s Failed: %s. Not recovered: the attempt could not be recorded: %v", rep.Registration, rep.Message, err))
		return rr, fmt.Errorf("%w: %s; not recovered, nothing deleted: the attempt could not be recorded: %w", ErrOperatorFailed, failed, err)
	}
	log.Warn("recovering the registration: deleting the Secret the operator failed and writing it afresh, as the operator asks",
		slog.Int("attempt", attempt), slog.Int("maxAttempts", MaxRecoveries), slog.String("cause", verdict.Cause), slog.String("registration", rep.Registration))

	t := time.Now()
	// 0: DefaultGoneWait for the finalizer to let the Secret go.
	rres, err := r.Secrets.Recreate(ctx, f.Written, rep.SecretUID, rep.SecretResourceVersion, 0)
	if err != nil {
		rr.Outcome = Incomplete
		switch {
		case errors.Is(err, ErrSecretChanged):
			// Nothing deleted: the attempt did not happen.
			if hadRecord {
				r.saveRecord(ctx, log, &prev)
			} else {
				r.saveRecord(ctx, log, nil)
			}
		case errors.Is(err, ErrSecretTerminating):
			rr.Outcome = Terminating
			rec.Outcome = RecordTerminating
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
	case StateActive:
		rr.Outcome = Recovered
		rec.Attempts, rec.Outcome = 0, RecordRecovered
		r.saveRecord(ctx, log, &rec)
		rr.Event = kube.JobEvent{Reason: kube.ReasonOperatorRecovered, Action: "Recover", Note: fmt.Sprintf(
			"rancher/scc-operator had failed registration %s: %s (%s, which a retry can fix). The engine deleted %s (the operator let it go after %s), wrote it afresh with the same values, and registration %s is active %s later (recovery %s)",
			rep.Registration, rep.Message, verdict.Cause, f.SecretRef, rres.Gone.Round(time.Millisecond), next.Registration, rr.Took.Round(time.Millisecond), of)}
		log.Info("recovered the registration", slog.String("registration", next.Registration), slog.String("replaced", rep.Registration), slog.String("replacedMessage", rep.Message), slog.Int64("recoveryMs", rr.Took.Milliseconds()), slog.Int("attempt", attempt))
		return rr, nil
	case StateFailed:
		rr.Outcome = FailedAgain
		again := Classify(next.Message)
		rec.Outcome, rec.Message = RecordFailed, keepMessage(next.Message, r.Redact)
		r.saveRecord(ctx, log, &rec)
		var then string
		switch {
		case !again.Recoverable:
			why, remedy := Decision{Outcome: NeedsPerson}.Remedy(again, r.where(f))
			then = "the new failure needs you (" + again.Cause + ": " + why + "): " + remedy
		case attempt >= MaxRecoveries:
			then = fmt.Sprintf("that was the last of %d: later runs do not delete the Secret until %s is cleared (`%s`) or the code or URL changes", MaxRecoveries, AnnotationRecovery, r.where(f).ClearRecord)
		default:
			then = "the next scheduled run recovers again (this run exits 2, which ends the Job without retries: an outage outlasts a Job's retries, which would spend every attempt within minutes)"
		}
		msg := fmt.Sprintf("recovery %s failed: the new registration %s failed too: %s (cause: %s); it replaced registration %s, failed with: %s; %s", of, next.Registration, next.Message, again.Cause, rep.Registration, rep.Message, then)
		warn(kube.ReasonOperatorFailed, "rancher/scc-operator: "+msg)
		return rr, failure.Permanent(fmt.Errorf("%w: %s", ErrOperatorFailed, msg))
	default:
		rr.Outcome = Pending
		rec.Outcome = RecordPending
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
func (r *Recovery) Forget(ctx context.Context, log *slog.Logger, rep Report) {
	if r == nil {
		return
	}
	rec, ok, err := r.Record.Load(ctx)
	if err != nil {
		log.Warn("could not read the recovery record", slog.String("error", err.Error()))
		return
	}
	if !ok || rec.Outcome == RecordRecovered {
		return
	}
	rec.Attempts, rec.Outcome, rec.Registration, rec.Time = 0, RecordRecovered, rep.Registration, time.Now()
	r.saveRecord(ctx, log, &rec)
}

// saveRecord writes the record; a failure is a warning (the error of the
// run, if any, is what the user must see).
func (r *Recovery) saveRecord(ctx context.Context, log *slog.Logger, rec *Record) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.Record.Save(sctx, rec); err != nil {
		log.Warn("could not save the recovery record", slog.String("error", err.Error()))
	}
}

// WithOperatorState adds to a Secret-being-deleted error whether the
// operator, whose finalizer holds it, is running. Any other error, and
// every error when r is nil, is returned as it is.
func (r *Recovery) WithOperatorState(ctx context.Context, err error) error {
	if err == nil || !errors.Is(err, ErrSecretTerminating) || r == nil || r.Operator == nil {
		return err
	}
	live, cerr := r.Operator.Check(ctx)
	if cerr != nil {
		return fmt.Errorf("%w; %v: start it, and it lets the Secret go", err, cerr)
	}
	return fmt.Errorf("%w; rancher/scc-operator is running (Lease %s renewed %s ago by %s) and has not let it go yet: its log says why", err, r.Operator.Ref(), live.Age.Round(time.Second), live.Holder)
}

// where is what the remedies of failure f name: its Secret, the update
// server, the command that starts a run and the one that clears the record.
func (r *Recovery) where(f Failure) Where {
	ref := Namespace + "/" + kube.LeaseName
	if r != nil && r.LeaseRef != "" {
		ref = r.LeaseRef
	}
	ns, name, _ := strings.Cut(ref, "/")
	secretNS, _, _ := strings.Cut(f.SecretRef, "/")
	return Where{Secret: f.SecretRef, Server: f.Server, RunNow: RunNowCommand(secretNS, f.CronJob, "<name>"), ClearRecord: ClearRecordCommand(ns, name)}
}
