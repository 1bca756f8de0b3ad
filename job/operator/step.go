package operator

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/rancher/registration-engine/job/kube"
)

// Step is the run's operator step: after the write (or on a run that found
// the Secret current) it reads what rancher/scc-operator made of it, and
// for a Registration it failed hands the failure to Recovery. A nil *Step
// is no cluster (dry run, --output): nothing is read.
type Step struct {
	Watch Watcher
	// Wait bounds the wait for the operator's answer after a write
	// (OPERATOR_WAIT); an unchanged run looks once.
	Wait time.Duration
	// Recovery, when set (OPERATOR_RECOVERY, in a cluster), recovers a
	// Registration the operator failed for a passing cause. Nil: a Failed
	// Registration is only reported, with the remedy.
	Recovery *Recovery
	// SecretRef is namespace/name of the Secret, CronJob the CronJob that
	// runs the engine (CRONJOB_NAME), for the remedies.
	SecretRef string
	CronJob   string
	// Proxy, when set, is where the operator's proxy settings are read
	// before anything is written (CheckProxy); nil skips the check.
	Proxy ProxySource
}

// Input is what the run hands the step: whether it wrote the Secret, to
// which update server, the values, and why the handover check did not run
// ("" when it ran and passed).
type Input struct {
	Changed  bool
	Server   string
	Written  Values
	Unproven string
}

// Outcome is what the step found and did.
type Outcome struct {
	// Report is the operator's answer; State is "" when it was not read.
	// After a recovery it is the new Registration's report.
	Report Report
	// Recovery is what the step did about a Failed Registration; nil when
	// it found none.
	Recovery *RecoveryReport
	// Rewritten: a recovery wrote the Secret afresh.
	Rewritten bool
}

// Event is the run's Event when the step decides it (a Failed
// Registration's); ok is false when the run's own outcome is the Event.
func (o Outcome) Event() (e kube.JobEvent, ok bool) {
	if o.Recovery == nil || o.Recovery.Event.Reason == "" {
		return kube.JobEvent{}, false
	}
	return o.Recovery.Event, true
}

// Run reads the operator's answer: after a write it waits up to Wait for
// active or failed, on an unchanged run it looks once. A Failed
// Registration is Recovery's: it recovers one a retry can fix, and
// otherwise fails the run with the remedy, since the operator ignores the
// Secret until a person deletes it and the Job must show it. Pending and
// absent leave the run successful, pending with a warning.
func (s *Step) Run(ctx context.Context, log *slog.Logger, in Input) (Outcome, error) {
	var out Outcome
	if s == nil {
		return out, nil
	}
	var wait time.Duration
	if in.Changed {
		wait = s.Wait
	}
	t := time.Now()
	rep := s.Watch.Report(ctx, wait)
	out.Report = rep
	attrs := []any{slog.String("operator", rep.State), slog.String("registration", rep.Registration), slog.String("operatorMessage", rep.Message), slog.Int64("durationMs", time.Since(t).Milliseconds())}
	switch rep.State {
	case StateFailed:
		attrs = append(attrs, slog.Bool("recoverable", rep.Verdict.Recoverable), slog.String("cause", rep.Verdict.Cause))
		log.Error("rancher/scc-operator failed the registration", attrs...)
		rr, err := s.Recovery.Recover(ctx, log, Failure{
			Report: rep, Server: in.Server, Written: in.Written, Unproven: in.Unproven, SecretRef: s.SecretRef, CronJob: s.CronJob,
		})
		out.Recovery = &rr
		if rr.Rewritten {
			out.Rewritten, out.Report = true, rr.Operator
		}
		return out, err
	case StatePending:
		log.Warn("rancher/scc-operator has not finished the registration", append(attrs, slog.String("operatorWait", wait.String()))...)
	case StateActive:
		log.Info("rancher/scc-operator's registration", attrs...)
		s.Recovery.Forget(ctx, log, rep)
	default:
		log.Info("rancher/scc-operator's registration", attrs...)
	}
	return out, nil
}

// Explain adds to a write's error what the operator has to do with it: a
// Secret being deleted waits for the operator's finalizer, so whether the
// operator runs is the cause a person needs. Any other error is returned
// as it is.
func (s *Step) Explain(ctx context.Context, err error) error {
	if s == nil || !errors.Is(err, ErrSecretTerminating) {
		return err
	}
	return s.Recovery.WithOperatorState(ctx, err)
}

// Note is the operator's answer as the Event of a successful run quotes
// it; "" when it was not read.
func (o Outcome) Note() string {
	rep := o.Report
	if rep.State == "" {
		return ""
	}
	note := "; operator=" + rep.State
	if rep.Registration != "" {
		note += " registration " + rep.Registration
	}
	if rep.Message != "" {
		note += ": " + rep.Message
	}
	return note
}

// Attrs are the outcome as the run summary's attributes.
func (o Outcome) Attrs() []any {
	var attrs []any
	if o.Report.State != "" {
		attrs = append(attrs, slog.String("operator", o.Report.State), slog.String("registration", o.Report.Registration))
		if o.Report.Message != "" {
			attrs = append(attrs, slog.String("operatorMessage", o.Report.Message))
		}
	}
	if o.Recovery != nil {
		attrs = append(attrs, o.Recovery.Attrs()...)
	}
	return attrs
}
