package status

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rancher/registration-engine/job/kube"
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
		Operator: Operator{State: kube.OperatorActive, Adopted: true, ProcessedCurrent: &yes, Access: Read},
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
			r.Operator.State, r.Operator.ProcessedCurrent = kube.OperatorPending, nil
			r.DNS.Object, r.DNS.Addresses, r.DNS.LastRunAddress = "kube-system/coredns", []string{"192.0.2.99"}, "::1"
		}, wantState: StateActionNeeded, wantStart: "Not registered: kube-system/coredns maps smt-azure.susecloud.net to 192.0.2.99, but the last run reached the update server at ::1 — run the engine"},
		"entry matching the last run": {change: func(r *Report) { r.DNS.LastRunAddress = "10.0.0.4" },
			wantState: StateRegistered, wantStart: "Registered: "},
		"IN_CLUSTER_DNS=false: the entry is not ours to check": {change: func(r *Report) { r.DNS = DNS{} },
			wantState: StateRegistered, wantStart: "Registered: "},
		"operator behind the Secret's values": {change: func(r *Report) {
			no := false
			r.Operator.ProcessedCurrent, r.Operator.State = &no, kube.OperatorPending
		}, wantState: StateNotYet, wantStart: "Not registered yet: rancher/scc-operator has not processed scc-registration's current values"},
		"transient failure of the last run, no Secret": {change: func(r *Report) {
			r.Secret = Secret{Name: "scc-registration", Access: Absent}
			r.Jobs.Items = []Job{{Name: "registration-engine-29400000", Outcome: JobFailed, ExitCode: code(1), Reason: "BackoffLimitExceeded"}}
		}, wantState: StateNotYet, wantStart: "Not registered yet: the last run, registration-engine-29400000, failed"},
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
