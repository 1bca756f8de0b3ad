package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/escape"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/retry"
)

// The run's traces, where they outlive its log: one Event on its Job
// (recordEvent) and the verdict on the engine's Lease (recordRun). Run
// leaves both after the phases, before its summary line.

// recordEvent records the run's outcome on its Job. An Event that cannot
// be created is a warning, never a failed run.
func (j *Job) recordEvent(ctx context.Context, log *slog.Logger, res Result, runErr error, plan retry.Plan) {
	if res.Outcome == OutcomeNotDue || res.Outcome == OutcomeUnread {
		return
	}
	if j.Events == nil {
		log.Debug("no Event recorded: no Job known (JOB_NAME or JOB_UID unset)")
		return
	}
	e := kube.JobEvent{Action: "Register", Server: res.Server, Address: addrString(res.Address)}
	switch {
	case res.Outcome == OutcomeSkipped:
		// A Job that completes having done nothing must say so where
		// `kubectl describe job` looks.
		e.Reason, e.Note = kube.ReasonSkipped, "skipped, nothing done: "+res.Skipped
	case res.Outcome == OutcomeWaitingForCode && runErr == nil:
		e.Warning, e.Reason = true, kube.ReasonCodeMissing
		e.Note = fmt.Sprintf("no registration code yet, nothing written (update server https://%s reachable at %s): set it: %s", res.Server, addrString(res.Address), j.codeRemedy())
	case hasOperatorEvent(res):
		e, _ = res.Operator.Event()
	case runErr != nil && plan.Cause == retry.CauseSettling:
		e = kube.JobEvent{Reason: kube.ReasonWaiting, Action: "Register", Note: fmt.Sprintf("%s: phase %s failed (exit code %d): %v", plan.Note(), res.Failed, ExitCode(runErr), runErr)}
	case runErr != nil:
		e = failedEvent(res.Failed, runErr)
		if n := plan.Note(); n != "" {
			e.Note = n + ": " + e.Note
		}
		e.Server, e.Address = res.Server, addrString(res.Address)
	default:
		e.Reason, e.Note = kube.ReasonUnchanged, j.secretRef()+" already current for"
		if res.Changed {
			e.Reason, e.Note = kube.ReasonRegistered, "wrote "+j.secretRef()+" for"
		}
		e.Warning = res.Operator.Report.State == operator.StatePending
		e.Note += fmt.Sprintf(" https://%s (address %s)%s", res.Server, addrString(res.Address), res.Operator.Note())
	}
	// The note quotes peers (an error, the operator's message), which may
	// quote a secret; the recorder redacts too, whoever calls it.
	e.Note = j.Secrets.String(e.Note)
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := j.Events.Record(ectx, e); err != nil {
		log.Warn("could not record the run's Event on its Job", slog.String("reason", e.Reason), slog.String("error", err.Error()))
		return
	}
	log.Debug("event recorded", slog.String("reason", e.Reason))
}

// failedEvent is the Warning Event of a run whose phase failed with err:
// a run's and a run's that could not start alike.
func failedEvent(phase string, err error) kube.JobEvent {
	return kube.JobEvent{Warning: true, Reason: kube.ReasonFailed, Action: "Register",
		Note: fmt.Sprintf("phase %s failed (exit code %d): %v", phase, ExitCode(err), err)}
}

// recordRun keeps the run's verdict on the engine's Lease, where it
// outlives the Event: with the release when the run holds the Lease (one
// write for both), else through Runs; a skipped run did nothing and
// records nothing. A record or release that fails is a warning, never a
// failed run.
func (j *Job) recordRun(ctx context.Context, log *slog.Logger, res Result, runErr error, release kube.Release, plan retry.Plan) {
	var rec *retry.Record
	if j.Runs != nil && res.Outcome != OutcomeSkipped && res.Outcome != OutcomeNotDue && res.Outcome != OutcomeUnread {
		rec = &retry.Record{
			Time: j.now(), Job: j.JobName, Outcome: res.Outcome, ExitCode: ExitCode(runErr),
			Server: res.Server, Operator: res.Operator.Report.State,
		}
		if runErr != nil {
			rec.Outcome, rec.Phase, rec.Permanent = OutcomeFailed, res.Failed, failure.IsPermanent(runErr)
			rec.Error = escape.Record(runErr.Error(), j.Secrets.String, retry.MaxError)
			rec.SecretDeleted = errors.Is(runErr, operator.ErrSecretDeleted)
			*rec = plan.Apply(*rec)
		}
	}
	// The run's context may be cancelled already: a context of its own, so
	// that the next run need not wait for the Lease to expire.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var saved retry.Record
	var follow kube.Follow
	if rec != nil {
		follow = func(prev string) (v string, err error) {
			saved, v, err = retry.Follow(prev, *rec)
			return v, err
		}
	}
	switch {
	case release != nil:
		if err := release(rctx, follow); err != nil {
			log.Warn("could not release the lease (the next run waits for it to expire) or record the run's verdict on it", slog.String("error", err.Error()))
			return
		}
	case rec != nil:
		if err := j.Runs.SaveRun(rctx, follow); err != nil {
			log.Warn("could not record the run's verdict on the engine's Lease", slog.String("error", err.Error()))
			return
		}
	}
	if rec != nil {
		log.Debug("run recorded", slog.Int("consecutiveFailures", saved.ConsecutiveFailures))
	}
}

// hasOperatorEvent: the operator step decided the run's Event (a Failed
// Registration's).
func hasOperatorEvent(res Result) bool {
	_, ok := res.Operator.Event()
	return ok
}

// secretRef is namespace/name of the Secret the run writes.
func (j *Job) secretRef() string {
	if j.SecretRef == "" {
		return operator.Namespace + "/" + operator.SecretName
	}
	return j.SecretRef
}
