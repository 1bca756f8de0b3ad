package operator

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/rancher/registration-engine/job/escape"
	"github.com/rancher/registration-engine/job/kube"
)

// The remedies of a Decision: why the engine leaves a Failed Registration
// to a person, and what the person does. They are worded here once, for
// the run (Recover's error and Event) and for status (its verdict's next
// step), so that the two never tell a person different things.

// Where names what a remedy asks a person to act on.
type Where struct {
	// Secret is namespace/name of the Secret; Server the update server's
	// name.
	Secret, Server string
	// RunNow is the command that starts a run now (RunNowCommand);
	// ClearRecord the one that clears the recovery record
	// (ClearRecordCommand).
	RunNow, ClearRecord string
}

// Remedy says why the engine leaves a Failed Registration with verdict v
// to a person, and what the person does, by what Decide decided:
// NeedsPerson (why: the same values fail the same way), Stopped (why: the
// recoveries in a row ran out) or NotAttempted (why: recovery is off). Any
// other decision has no why of its own; its remedy is the manual recovery.
func (d Decision) Remedy(v Verdict, w Where) (why, remedy string) {
	switch d.Outcome {
	case NeedsPerson:
		why = "another attempt with the same values fails the same way, so the engine does not delete anything"
		switch {
		case v.CodeRefused():
			return "the update server refused the registration code, so the engine does not delete anything", refusedCodeRemedy(w)
		case v.Untrusted:
			return why, "the operator does not trust the update server's certificate: run rancher/scc-operator add-rmt-support (dad26bb) or later, which trusts registrationUrlCert (docs/install.md, \"Which rancher/scc-operator works\"); then " + manualRecovery(w)
		}
		return why, manualRecovery(w)
	case Stopped:
		return fmt.Sprintf("stopped recovering: %d recoveries in a row, the last at %s, ended with no active registration (this failure: %s), so the engine does not delete anything",
				d.Attempt, d.Last.UTC().Format(time.RFC3339), v.Cause),
			"fix what fails (the operator's log says what it met), then clear the record so the next run recovers again: " + w.ClearRecord + "; a new registration code or URL starts afresh by itself"
	case NotAttempted:
		return "the cause (" + v.Cause + ") is one a retry can fix, but OPERATOR_RECOVERY=false", manualRecovery(w)
	}
	return "", manualRecovery(w)
}

// refusedCodeRemedy is what a person does when the update server refused
// the registration code: a new code, which the operator registers afresh
// with no delete.
func refusedCodeRemedy(w Where) string {
	return "put a valid code in the Secret registration-code (key regCode) or REGISTRATION_CODE, then run the engine: " + w.RunNow + "; the operator registers the new code afresh, with no delete"
}

// manualRecovery is what the operator requires before it registers again:
// the Secret deleted, then written afresh by a run.
func manualRecovery(w Where) string {
	ns, name, _ := strings.Cut(w.Secret, "/")
	return fmt.Sprintf("the operator ignores %s until it is deleted: once %s resolves in the cluster and answers, run `kubectl -n %s delete secret %s` (the operator deregisters and releases it) and start the Job again (`%s`), which writes it afresh",
		w.Secret, w.Server, escape.Shell(ns), escape.Shell(name), w.RunNow)
}

// RunNowCommand is the kubectl command that starts a run of the CronJob
// ns/cronJob (kube.CronJobName when empty) now, as Job job. Remedies name
// the CronJob the engine runs under (CRONJOB_NAME), not the default.
func RunNowCommand(ns, cronJob, job string) string {
	return fmt.Sprintf("kubectl -n %s create job --from=%s %s", escape.Shell(ns), escape.Shell("cronjob/"+cmp.Or(cronJob, kube.CronJobName)), job)
}
