package status

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	fix "github.com/rancher/registration-engine/job/remedy"
	"github.com/rancher/registration-engine/job/retry"
)

// ExpiryWarning is how long before the update server's certificate expires
// status starts asking for action: the engine picks up a renewed
// certificate on its next run, at most 18 h away, so two weeks leave time
// for a renewal to land and for a person to look if it does not.
const ExpiryWarning = 14 * 24 * time.Hour

// FailingWarning is how long the engine's runs may fail, transiently,
// before status stops calling a registered cluster simply "Registered":
// three of the CronJob's 18-hour periods, so one bad day at the update
// servers does not page anyone, and a week of failures does not hide
// behind an old success until the certificate or the code runs out.
const FailingWarning = 54 * time.Hour

// Decide reads the chain CronJob → run → Lease → Secret → CoreDNS →
// operator and returns the verdict: registered (exit 0), not yet (exit 1: a
// run or the operator is still working) or action needed (exit 2), naming
// the first broken link and what to do. A link whose read was refused is
// not broken; when the verdict depends on it, the verdict is unknown.
func Decide(r *Report, now time.Time, exits ExitCodes) Verdict {
	d := decider{r: r, now: now, exits: exits}
	v := d.decide()
	v.ExitCode = exits.of(v.State)
	return v
}

// ExitCodes are the exit codes the status command and the engine use,
// handed down by the command (package job owns them), so that this
// package decides states and reads pods' exit codes without a number of
// its own.
type ExitCodes struct {
	// NotYet is status's code for StateNotYet; ActionNeeded for
	// StateActionNeeded and StateUnknown. Registered is always 0.
	NotYet, ActionNeeded int
	// WaitTimeout is status --wait's code when its timeout passed before
	// a verdict other than StateNotYet (ErrWaitTimeout).
	WaitTimeout int
	// EnginePermanent is the engine's exit code for a failure no retry can
	// fix (the podFailurePolicy fails the Job on it).
	EnginePermanent int
}

func (e ExitCodes) of(state string) int {
	switch state {
	case StateRegistered:
		return 0
	case StateNotYet:
		return e.NotYet
	default:
		return e.ActionNeeded
	}
}

type decider struct {
	r     *Report
	now   time.Time
	exits ExitCodes
}

func (d decider) runNow() string {
	return operator.RunNowCommand(d.r.Namespace, d.r.CronJob.Name, fmt.Sprintf("%s-manual-%d", orName(d.r.CronJob.Name), d.now.Unix()))
}

func (d decider) decide() Verdict {
	r := d.r
	o := r.Operator
	if r.Secret.Access == Read && o.State == operator.StateActive && ptrValue(o.ProcessedCurrent) {
		if v, ok := d.registeredButAction(); ok {
			return v
		}
		since := "active"
		if o.ActiveSince != nil {
			since = "active since " + stamp(*o.ActiveSince)
		}
		line := fmt.Sprintf("Registered: %s, update server %s", since, r.Secret.Host)
		if len(r.DNS.Addresses) > 0 {
			line += " (" + strings.Join(r.DNS.Addresses, ", ") + ")"
		}
		return Verdict{State: StateRegistered, Line: line}
	}

	switch r.Secret.Access {
	case Forbidden, Failed:
		return unknown(fmt.Sprintf("cannot read %s/secrets/%s: %s", r.Namespace, r.Secret.Name, r.Secret.Access),
			remedy(r.Secret.Access, "run status with credentials that may get it (the Role of a read-only admin must include secrets)"))
	case Absent:
		return d.noSecret()
	}
	s := r.Secret
	switch {
	case s.OtherWriter != "":
		what, next, _ := strings.Cut(s.OtherWriter, "; ")
		return action(what, next)
	case s.Keys[operator.KeyRegCode] == 0:
		return action(fmt.Sprintf("%s has no regCode, so rancher/scc-operator cannot register", s.Name),
			fmt.Sprintf("put the code in the Secret registration-code (kubectl -n %s create secret generic registration-code --from-literal=regCode=…), then run the engine: %s", r.Namespace, d.runNow()))
	case s.Host == "":
		return action(fmt.Sprintf("%s has no usable registrationUrl (%q)", s.Name, s.RegistrationURL), "run the engine: "+d.runNow())
	}
	if c := s.Certificate; c != nil && c.Error == "" && !c.NotAfter.After(d.now) {
		return action(fmt.Sprintf("the update server's certificate in %s expired on %s", s.Name, stamp(c.NotAfter)),
			"run the engine to fetch the current one: "+d.runNow())
	}
	if what, next, ok := d.dnsBroken(); ok {
		return action(what, next)
	}
	if j := d.lastFinished(); j != nil && j.Outcome == JobFailed && d.permanent(*j) && o.State != operator.StateFailed {
		return d.failedRun(*j)
	}
	return d.operator()
}

// registeredButAction finds what needs a person although the operator's
// Registration is active.
func (d decider) registeredButAction() (Verdict, bool) {
	r := d.r
	if w := r.Secret.OtherWriter; w != "" {
		what, next, _ := strings.Cut(w, "; ")
		return registeredAction(what, next), true
	}
	if c := r.Secret.Certificate; c != nil && c.Error == "" {
		left := c.NotAfter.Sub(d.now)
		switch {
		case left <= 0:
			return registeredAction(fmt.Sprintf("the update server's certificate expired on %s", stamp(c.NotAfter)),
				"run the engine to fetch the current one: "+d.runNow()), true
		case left < ExpiryWarning:
			return registeredAction(fmt.Sprintf("the update server's certificate expires in %s (%s)", days(left), stamp(c.NotAfter)),
				"the engine takes a renewed certificate on its next run; if the update server has not renewed it by then, contact SUSE support; to run now: "+d.runNow()), true
		}
	}
	if what, next, ok := d.dnsBroken(); ok {
		return registeredAction(what, next), true
	}
	if j := d.lastFinished(); j != nil && j.Outcome == JobFailed && d.permanent(*j) {
		what, next := d.failedRunText(*j)
		return registeredAction(what, next), true
	}
	if doubt := r.Lease.LastRunDoubt; doubt != "" {
		return registeredAction(fmt.Sprintf("the engine's run record on the Lease %s cannot be true: %s", r.Lease.Name, doubt),
			fmt.Sprintf("the engine only writes true ones: find what else updates leases/%s in %s (the engine's ServiceAccount token, or a Role that grants update on leases), then run the engine: %s", r.Lease.Name, r.Namespace, d.runNow())), true
	}
	if run := r.Lease.LastRun; run != nil && run.ConsecutiveFailures > 0 && run.FailingSince != nil && d.now.Sub(*run.FailingSince) >= FailingWarning {
		return registeredAction(fmt.Sprintf("the engine's runs have failed for %s (%d in a row since %s; the last, %s, in phase %s: %s)",
			days(d.now.Sub(*run.FailingSince)), run.ConsecutiveFailures, stamp(*run.FailingSince), stamp(run.Time), run.Phase, run.Error),
			"the registration data is no longer kept current: fix the cause in the error, then run the engine: "+d.runNow()), true
	}
	if r.CronJob.Access == Read && r.CronJob.Suspended {
		return registeredAction(fmt.Sprintf("the CronJob %s is suspended, so the registration data is no longer kept current", r.CronJob.Name),
			fmt.Sprintf("kubectl -n %s patch cronjob %s -p '{\"spec\":{\"suspend\":false}}'", r.Namespace, r.CronJob.Name)), true
	}
	return Verdict{}, false
}

// noSecret explains a missing Secret by the runs.
func (d decider) noSecret() Verdict {
	r := d.r
	if r.CronJob.Access == Absent {
		return action(fmt.Sprintf("the engine is not installed: no CronJob %s/%s", r.Namespace, kube.CronJobName),
			"install it (helm install registration-engine …, or kubectl apply -k manifests/overlays/azure)")
	}
	if v, ok := d.runInProgress(); ok {
		return v
	}
	if v, ok := d.leaseBlocks(); ok {
		return v
	}
	if v, ok := d.waitingForCode(); ok {
		return v
	}
	if run := r.Lease.LastRun; run != nil && run.SecretDeleted {
		return notYet(fmt.Sprintf("%s/%s was deleted after the engine's last successful run, and the last run (%s, at %s) did not recreate it",
			r.Namespace, r.Secret.Name, orNone(run.Job), stamp(run.Time)),
			"if a person is registering through Rancher's registration page, their Secret appears in moments and the engine leaves it alone; "+
				"otherwise the next attempt (the Job's retry, the retry CronJob) writes it afresh; to run it now: "+d.runNow())
	}
	if j := d.lastFinished(); j != nil {
		if j.Outcome == JobFailed {
			return d.failedRun(*j)
		}
		return action(fmt.Sprintf("%s is missing although run %s succeeded at %s", r.Secret.Name, j.Name, stampPtr(j.Finished)),
			"run the engine again: "+d.runNow())
	}
	if r.CronJob.Access == Read && r.CronJob.Suspended {
		return action(fmt.Sprintf("the engine has never run and its CronJob %s is suspended", r.CronJob.Name),
			"run it now: "+d.runNow())
	}
	if r.Jobs.Access != Read {
		return unknown(fmt.Sprintf("%s does not exist and the engine's Jobs cannot be read (%s)", r.Secret.Name, r.Jobs.Access),
			remedy(r.Jobs.Access, "run status with credentials that may list jobs in "+r.Namespace))
	}
	schedule := ""
	if r.CronJob.Schedule != "" {
		schedule = fmt.Sprintf(" (schedule %q)", r.CronJob.Schedule)
	}
	return notYet("the engine has not run yet; its CronJob starts the first run on its schedule"+schedule,
		"to run it now: "+d.runNow())
}

// waitingForCode: the engine's last run found no registration code
// configured and none in the Secret, and ended waiting for one (outcome
// waiting-for-code on the Lease's record, or the Event RegistrationCodeMissing
// on the newest finished Job). The remedy is the Event's when it is still
// there and the engine's own, which names the extension.
func (d decider) waitingForCode() (Verdict, bool) {
	r := d.r
	j := d.lastFinished()
	event := j != nil && j.Event != nil && j.Event.Reason == kube.ReasonCodeMissing
	run := r.Lease.LastRun
	if !event && (run == nil || run.Outcome != retry.OutcomeWaitingForCode || (j != nil && j.Outcome == JobFailed)) {
		return Verdict{}, false
	}
	when := ""
	switch {
	case run != nil && run.Outcome == retry.OutcomeWaitingForCode && run.Job != "":
		when = fmt.Sprintf(" (last run %s at %s)", run.Job, stamp(run.Time))
	case run != nil && run.Outcome == retry.OutcomeWaitingForCode:
		when = fmt.Sprintf(" (last run at %s)", stamp(run.Time))
	case j != nil:
		when = fmt.Sprintf(" (last run %s at %s)", j.Name, stampPtr(j.Finished))
	}
	next := "set it: " + d.codeRemedy()
	// Only the engine's own Event, from a pod of the Job: anyone who may
	// create Events could otherwise put a command here for a person to paste.
	if event && j.Event.FromJobPod {
		// "set it: " since the engine names the command of the release
		// (RELEASE_MANAGER); "set it with " from an engine before it.
		for _, sep := range []string{"set it: ", "set it with "} {
			if _, how, ok := strings.Cut(j.Event.Note, sep); ok {
				next = sep + how
				break
			}
		}
	}
	return action("no registration code yet: the engine found none configured and none in "+r.Secret.Name+", and waits for one"+when, next), true
}

// codeRemedy is the command that sets the registration code on the
// release the CronJob says it is (RELEASE_MANAGER, fix.Remedies.SetCode).
func (d decider) codeRemedy() string {
	cj := d.r.CronJob
	r := fix.Remedies{Manager: cj.ReleaseManager, Release: cj.ReleaseName, Namespace: d.r.Namespace, ExtensionID: cj.ExtensionID}
	return r.SetCode(", then run the engine: " + d.runNow())
}

// runInProgress: the newest Job still runs.
func (d decider) runInProgress() (Verdict, bool) {
	if len(d.r.Jobs.Items) == 0 || d.r.Jobs.Items[0].Outcome != JobRunning {
		return Verdict{}, false
	}
	j := d.r.Jobs.Items[0]
	return notYet(fmt.Sprintf("run %s is in progress (started %s)", j.Name, stamp(j.Created)),
		fmt.Sprintf("wait for it: kubectl -n %s wait --for=condition=complete job/%s --timeout=15m", d.r.Namespace, j.Name)), true
}

// leaseBlocks: a run that is gone still holds the Lease, so every run
// until it expires is skipped.
func (d decider) leaseBlocks() (Verdict, bool) {
	l := d.r.Lease
	if l.Access != Read || l.State != LeaseHeld {
		return Verdict{}, false
	}
	if !l.HolderGone {
		return notYet(fmt.Sprintf("run %s holds the Lease %s until %s", l.Holder, l.Name, stampPtr(l.Until)), "wait for it to finish"), true
	}
	return notYet(fmt.Sprintf("the Lease %s is held by %s, a run that is gone, until %s; runs before then are skipped", l.Name, l.Holder, stampPtr(l.Until)),
		fmt.Sprintf("run the engine after %s: %s", stampPtr(l.Until), d.runNow())), true
}

// lastFinished is the newest finished Job.
func (d decider) lastFinished() *Job {
	for i, j := range d.r.Jobs.Items {
		if j.Outcome != JobRunning {
			return &d.r.Jobs.Items[i]
		}
	}
	return nil
}

// permanent: the engine exited with its permanent code, which the
// podFailurePolicy turns into a failed Job at once.
func (d decider) permanent(j Job) bool {
	return (j.ExitCode != nil && int(*j.ExitCode) == d.exits.EnginePermanent) || j.Reason == "PodFailurePolicy"
}

func (d decider) failedRun(j Job) Verdict {
	what, next := d.failedRunText(j)
	switch {
	case d.permanent(j), d.r.CronJob.Suspended:
		return action(what, next)
	default:
		return notYet(what, next)
	}
}

// failedRunText says how run j failed and what to do.
func (d decider) failedRunText(j Job) (what, next string) {
	what = fmt.Sprintf("the last run, %s, failed at %s", j.Name, stampPtr(j.Finished))
	if j.ExitCode != nil {
		what += fmt.Sprintf(" with exit code %d", *j.ExitCode)
	}
	if e := j.Event; e != nil && e.Note != "" {
		what += ": " + e.Note
	} else if j.Reason != "" {
		what += " (" + j.Reason + ")"
	}
	logs := fmt.Sprintf("kubectl -n %s logs job/%s", d.r.Namespace, j.Name)
	switch {
	case d.permanent(j):
		return what, "a retry cannot succeed: read the cause in " + logs + ", fix the configuration, then run the engine: " + d.runNow()
	case d.r.CronJob.Suspended:
		return what, "the CronJob is suspended: read " + logs + ", then run the engine: " + d.runNow()
	}
	if run := d.r.Lease.LastRun; run != nil && run.Retrying() != "" && (run.Job == j.Name || run.Time.After(j.Created)) {
		// The record says what comes next; its error is the run's own.
		what = fmt.Sprintf("the last run, %s, failed at %s in phase %s: %s; %s", orNone(run.Job), stamp(run.Time), run.Phase, run.Error, run.Retrying())
		return what, "nothing to do: the retry CronJob runs it; " + rancherPrompt + "; to retry now: " + d.runNow()
	}
	return what + "; the failure is transient and the next scheduled run retries", "to retry now: " + d.runNow()
}

// rancherPrompt is what an administrator sees in Rancher (2.12 and later)
// while the first registration is still being retried, and what to do
// about it: Rancher's registration page would replace the PAYG
// registration with a code typed by hand (docs/troubleshoot.md, "A person
// registers through Rancher's registration page").
const rancherPrompt = `meanwhile Rancher shows administrators the notification "Rancher Prime Registration" with "Register Now": do not enter a code there, the engine registers this PAYG cluster`

// dnsBroken: the update server's name does not resolve in the cluster to
// the address the engine chose: no entry, or one that points elsewhere than
// the last successful run reached.
func (d decider) dnsBroken() (what, next string, broken bool) {
	n := d.r.DNS
	if sh := n.Shadow; sh != nil && sh.Access == Read {
		ns, svc, _ := strings.Cut(sh.Service, "/")
		return fmt.Sprintf("Service %s shadows %s: a pod's resolver (ndots:5) asks %s first, which that Service answers, so rancher/scc-operator reaches it instead of the update server", sh.Service, n.Host, sh.Name),
			fmt.Sprintf("remove or rename it (kubectl -n %s delete service %s) or the namespace %s, then run the engine: %s", ns, svc, ns, d.runNow()), true
	}
	if !n.Checked {
		return "", "", false
	}
	if n.Access == Absent {
		return fmt.Sprintf("%s has no hosts entry for %s, so rancher/scc-operator cannot resolve the update server", n.Object, n.Host),
			"run the engine, which writes it: " + d.runNow(), true
	}
	if n.Access == Read && n.LastRunAddress != "" && !containsAddr(n.Addresses, n.LastRunAddress) {
		return fmt.Sprintf("%s maps %s to %s, but the last run reached the update server at %s", n.Object, n.Host, strings.Join(n.Addresses, ", "), n.LastRunAddress),
			"run the engine, which rewrites the entry: " + d.runNow(), true
	}
	return "", "", false
}

// containsAddr: addr is one of addrs, compared as IP addresses.
func containsAddr(addrs []string, addr string) bool {
	want, err := netip.ParseAddr(addr)
	return slices.ContainsFunc(addrs, func(a string) bool {
		got, perr := netip.ParseAddr(a)
		if err != nil || perr != nil {
			return a == addr
		}
		return got.Unmap() == want.Unmap()
	})
}

// operator explains an operator that has not (yet) registered.
func (d decider) operator() Verdict {
	r := d.r
	o := r.Operator
	s := r.Secret
	switch o.State {
	case operator.StateFailed:
		return d.operatorFailed()
	case operator.StateAbsent:
		why := "no operator holds its leader Lease " + o.Leader.Name
		if o.APIInstalled != nil && !*o.APIInstalled {
			why = "the API registrations.scc.cattle.io is not served"
		} else if o.Leader.Access == Absent {
			why = "its leader Lease " + o.Leader.Name + " does not exist"
		}
		return action(fmt.Sprintf("rancher/scc-operator has not adopted %s: %s", s.Name, why),
			"install or start rancher/scc-operator (Rancher Prime 2.12 or later installs it in cattle-scc-system)")
	case operator.StatePending:
		if !o.Adopted {
			return notYet(fmt.Sprintf("rancher/scc-operator has not adopted %s yet (written %s)", s.Name, stampPtr(s.Written)), "wait a minute, then run status again")
		}
		if o.ProcessedCurrent != nil && !*o.ProcessedCurrent {
			return notYet(fmt.Sprintf("rancher/scc-operator has not processed %s's current values yet (written %s, last processed %s)", s.Name, stampPtr(s.Written), stampPtr(o.LastProcessed)),
				"wait a minute, then run status again")
		}
		state := o.Current
		if state == "" {
			state = "not started"
		}
		return notYet(fmt.Sprintf("rancher/scc-operator is registering (Registration %s: %s)", o.Registration, state), "wait a minute, then run status again")
	}
	switch {
	case o.Registration != "" && o.Access != Read:
		return unknown(fmt.Sprintf("cannot read rancher/scc-operator's Registration %s: %s", o.Registration, o.Access),
			remedy(o.Access, "run status with credentials that may get registrations.scc.cattle.io"))
	default:
		return unknown(fmt.Sprintf("cannot tell whether rancher/scc-operator runs: its leader Lease %s is %s", o.Leader.Name, o.Leader.Access),
			remedy(o.Leader.Access, "run status with credentials that may read it"))
	}
}

// operatorFailed says who fixes a Failed Registration: the engine's next
// run, for a passing cause it may still recover, or a person.
func (d decider) operatorFailed() Verdict {
	r := d.r
	o := r.Operator
	s := r.Secret
	msg := o.Message
	if msg == "" {
		msg = "no message"
	}
	what := fmt.Sprintf("rancher/scc-operator's Registration %s failed: %q", o.Registration, msg)
	// What the engine's next run will do, and what a person does when it
	// will not: job/operator decides and words it, for the run and for
	// status alike.
	v := operator.Classify(o.Message)
	dec := operator.Decide(v, r.Lease.Recovery, s.Target, r.CronJob.OperatorRecovery)
	why, remedy := dec.Remedy(v, operator.Where{Secret: r.Namespace + "/" + s.Name, Server: s.Host, RunNow: d.runNow(),
		ClearRecord: operator.ClearRecordCommand(r.Namespace, r.Lease.Name)})
	switch dec.Outcome {
	case operator.NeedsPerson:
		return action(what, fmt.Sprintf("needs you (%s: %s): %s", v.Cause, why, remedy))
	case operator.NotAttempted, operator.Stopped:
		return action(what, fmt.Sprintf("needs you: %s; %s", why, remedy))
	}
	if o.Leader.Access == Read && !o.Leader.Alive {
		return action(what, fmt.Sprintf("needs you: rancher/scc-operator is not running (no live holder of %s), and the engine deletes nothing until it runs; start it, and the next run recovers (cause %s)", o.Leader.Name, o.Cause))
	}
	return notYet(what, fmt.Sprintf("recovering automatically at the next run (attempt %d of %d, cause %s); to recover now: %s", dec.Attempt, operator.MaxRecoveries, o.Cause, d.runNow()))
}

func action(what, next string) Verdict {
	return Verdict{State: StateActionNeeded, Line: "Not registered: " + what + " — " + next, Next: next}
}

func registeredAction(what, next string) Verdict {
	return Verdict{State: StateActionNeeded, Line: "Registered, action needed: " + what + " — " + next, Next: next}
}

func notYet(what, next string) Verdict {
	return Verdict{State: StateNotYet, Line: "Not registered yet: " + what + " — " + next, Next: next}
}

// remedy is what to do about a read that went as a: credentials when it
// was refused (Forbidden); when it failed otherwise (a timeout, a 5xx),
// more access would not help, and the cause is among the Unreadable lines.
func remedy(a Access, credentials string) string {
	if a == Failed {
		return "the API server did not answer the read (the error is under Unreadable); run status again"
	}
	return credentials
}

func unknown(what, next string) Verdict {
	return Verdict{State: StateUnknown, Line: "Unknown: " + what + " — " + next, Next: next}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func stampPtr(t *time.Time) string {
	if t == nil {
		return "an unknown time"
	}
	return stamp(*t)
}

// days says a duration the way a person reads an expiry.
func days(d time.Duration) string {
	switch n := int(d.Hours() / 24); {
	case n >= 2:
		return fmt.Sprintf("%d days", n)
	case d >= time.Hour:
		return fmt.Sprintf("%d hours", int(d.Hours()))
	default:
		return "less than an hour"
	}
}

// orName is the CronJob's name, kube.CronJobName when status did not learn
// it.
func orName(name string) string {
	if name == "" {
		return kube.CronJobName
	}
	return name
}
