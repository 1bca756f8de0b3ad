package job

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rancher/registration-engine/job/incluster"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/providers/failure"
)

// recoveryFake is the operator, its Lease, the Secret store's Recreate and
// the engine's Lease record at once; reports are handed out one per
// Report, the last repeated.
type recoveryFake struct {
	reports    []kube.OperatorReport
	waits      []time.Duration
	events     []kube.JobEvent
	operator   error // Check's answer
	recreate   error
	recreated  []recreateCall
	record     *kube.RecoveryRecord
	saved      []kube.RecoveryRecord
	checked    int
	recordLoad error
	recordSave error // SaveRecovery's answer
}

type recreateCall struct {
	reg kube.Registration
	uid types.UID
	rv  string
	// savedBefore is how many records had been saved when the delete ran.
	savedBefore int
}

func (f *recoveryFake) Report(_ context.Context, wait time.Duration) kube.OperatorReport {
	f.waits = append(f.waits, wait)
	r := f.reports[0]
	if len(f.reports) > 1 {
		f.reports = f.reports[1:]
	}
	return r
}

func (f *recoveryFake) Record(_ context.Context, e kube.JobEvent) error {
	f.events = append(f.events, e)
	return nil
}

func (f *recoveryFake) Recreate(_ context.Context, r kube.Registration, uid types.UID, rv string, _ time.Duration) (kube.RecreateResult, error) {
	f.recreated = append(f.recreated, recreateCall{r, uid, rv, len(f.saved)})
	if f.recreate != nil {
		return kube.RecreateResult{Deleted: true}, f.recreate
	}
	return kube.RecreateResult{Deleted: true, Gone: 300 * time.Millisecond}, nil
}

func (f *recoveryFake) Check(context.Context) (kube.OperatorLiveness, error) {
	f.checked++
	return kube.OperatorLiveness{Holder: "scc-operator-7d9", Age: 2 * time.Second}, f.operator
}

func (f *recoveryFake) Ref() string { return "kube-system/scc-controllers" }

func (f *recoveryFake) LoadRecovery(context.Context) (kube.RecoveryRecord, bool, error) {
	if f.recordLoad != nil {
		return kube.RecoveryRecord{}, false, f.recordLoad
	}
	if f.record == nil {
		return kube.RecoveryRecord{}, false, nil
	}
	return *f.record, true, nil
}

func (f *recoveryFake) SaveRecovery(_ context.Context, rec *kube.RecoveryRecord) error {
	if rec == nil {
		f.record = nil
		return nil
	}
	if f.recordSave != nil {
		return f.recordSave
	}
	cp := *rec
	f.record = &cp
	f.saved = append(f.saved, cp)
	return nil
}

const (
	msg503 = "Cannot register system to SCC: Error: Registration server returned 'Service Unavailable' (503)"
	msg500 = "Cannot register system to SCC: Error: Registration server returned 'Internal Server Error' (500)"
	msg401 = "non-recoverable HTTP error encountered; to reregister Rancher, resolve connection issues then try again. Original error: Cannot register system to SCC: Error: Registration server returned 'Unknown Registration Code.' (401)"
	target = "0123456789ab"
)

func failedReport(name, msg string) kube.OperatorReport {
	return kube.OperatorReport{State: kube.OperatorFailed, Registration: name, Message: msg, SecretUID: "uid-1", SecretResourceVersion: "41", Target: target}
}

func activeReport(name string) kube.OperatorReport {
	return kube.OperatorReport{State: kube.OperatorActive, Registration: name, SecretUID: "uid-2", SecretResourceVersion: "57", Target: target}
}

// recoveryJob is a Job whose run writes the Secret (changed) and finds the
// operator's answer in f.
func recoveryJob(r *recorder, f *recoveryFake, logs *bytes.Buffer) *Job {
	j := newJob(r, logs)
	j.Operator, j.OperatorWait, j.Events, j.SecretRef = f, 2*time.Minute, f, "cattle-scc-system/scc-registration"
	j.Recovery = &Recovery{Secrets: f, Operator: f, Record: f, LeaseRef: "cattle-scc-system/registration-engine"}
	return j
}

// TestRunRecoversAFailedRegistration: a Registration the operator failed
// for a passing cause is deleted and written afresh by the run, once, and
// the run ends as the new Registration does; anything else keeps the old
// report-only behaviour and deletes nothing.
func TestRunRecoversAFailedRegistration(t *testing.T) {
	tests := map[string]struct {
		reports   []kube.OperatorReport
		record    *kube.RecoveryRecord
		operator  error
		recreate  error
		noRecover bool // OPERATOR_RECOVERY=false
		noWait    bool // HANDOVER_TIMEOUT=0
		unchanged bool

		exit      int
		recreated bool
		checked   bool
		outcome   string
		reason    string
		warning   bool
		note      []string
		errText   []string
		saved     *kube.RecoveryRecord // the last record saved (Time ignored)
		summary   string               // the summary's outcome, when set
	}{
		"503 then active: recovered, exit 0, the Event quotes the failure it replaced": {
			reports:   []kube.OperatorReport{failedReport("scc-registration-old", msg503), activeReport("scc-registration-new")},
			exit:      ExitOK,
			recreated: true, checked: true, outcome: RecoveryRecovered,
			reason: kube.ReasonOperatorRecovered,
			note:   []string{"had failed registration scc-registration-old: " + msg503, "HTTP 503 Service Unavailable", "registration scc-registration-new is active", "recovery 1 of 3"},
			saved:  &kube.RecoveryRecord{Attempts: 0, Cause: "HTTP 503 Service Unavailable", Message: msg503, Outcome: kube.RecoveryRecovered, Registration: "scc-registration-new", Target: target},
		},
		"an unchanged run that finds a Failed registration recovers it too": {
			unchanged: true,
			reports:   []kube.OperatorReport{failedReport("scc-registration-old", msg503), activeReport("scc-registration-new")},
			exit:      ExitOK, recreated: true, checked: true, outcome: RecoveryRecovered, reason: kube.ReasonOperatorRecovered,
			summary: OutcomeRegistered,
		},
		"failed again: exit 2 with both messages, the attempt counted, no second recovery": {
			reports:   []kube.OperatorReport{failedReport("scc-registration-old", msg503), failedReport("scc-registration-new", msg503)},
			exit:      ExitPermanent,
			recreated: true, checked: true, outcome: RecoveryFailedAgain,
			reason: kube.ReasonOperatorFailed, warning: true,
			errText: []string{"recovery 1 of 3 failed", "registration scc-registration-new failed too: " + msg503, "replaced registration scc-registration-old, failed with: " + msg503, "next scheduled run"},
			saved:   &kube.RecoveryRecord{Attempts: 1, Cause: "HTTP 503 Service Unavailable", Message: msg503, Outcome: kube.RecoveryFailed, Registration: "scc-registration-new", Target: target},
		},
		"the third failed recovery says it was the last": {
			reports:   []kube.OperatorReport{failedReport("scc-registration-old", msg503), failedReport("scc-registration-new", msg503)},
			record:    &kube.RecoveryRecord{Attempts: 2, Cause: "HTTP 503 Service Unavailable", Outcome: kube.RecoveryFailed, Target: target},
			exit:      ExitPermanent,
			recreated: true, checked: true, outcome: RecoveryFailedAgain, reason: kube.ReasonOperatorFailed, warning: true,
			errText: []string{"recovery 3 of 3 failed", "that was the last of 3", "annotate lease registration-engine registration-engine.cattle.io/operator-recovery-"},
		},
		"401: needs a person, nothing deleted, the operator not even asked": {
			reports: []kube.OperatorReport{failedReport("scc-registration-old", msg401)},
			exit:    ExitPermanent, outcome: RecoveryNeedsPerson,
			reason: kube.ReasonOperatorFailed, warning: true,
			note:    []string{"Needs you (HTTP 401 Unauthorized", "registration-code", "with no delete"},
			errText: []string{"needs you", "nothing was deleted"},
		},
		"the operator is not running: nothing deleted, exit 1, the error says so": {
			reports:  []kube.OperatorReport{failedReport("scc-registration-old", msg503)},
			operator: fmt.Errorf("%w: its Lease kube-system/scc-controllers is held by nobody", kube.ErrOperatorNotRunning),
			exit:     ExitTransient, checked: true, outcome: RecoveryOperatorDown,
			reason: kube.ReasonOperatorFailed, warning: true,
			note:    []string{"not recovered, nothing deleted", "rancher/scc-operator is not running", "held by nobody"},
			errText: []string{"nothing deleted", "is held by nobody"},
		},
		"three recoveries in a row met the same cause: stopped, nothing deleted": {
			reports: []kube.OperatorReport{failedReport("scc-registration-old", msg503)},
			record:  &kube.RecoveryRecord{Attempts: 3, Cause: "HTTP 503 Service Unavailable", Outcome: kube.RecoveryFailed, Target: target, Time: time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)},
			exit:    ExitPermanent, outcome: RecoveryStopped,
			reason: kube.ReasonOperatorFailed, warning: true,
			errText: []string{"stopped recovering: 3 recoveries in a row", "2026-12-01T18:00:00Z", "kubectl -n cattle-scc-system annotate lease registration-engine registration-engine.cattle.io/operator-recovery-"},
		},
		"three of another cause do not stop a recovery of this one": {
			reports: []kube.OperatorReport{failedReport("scc-registration-old", msg500), activeReport("scc-registration-new")},
			record:  &kube.RecoveryRecord{Attempts: 3, Cause: "HTTP 503 Service Unavailable", Outcome: kube.RecoveryFailed, Target: target},
			exit:    ExitOK, recreated: true, checked: true, outcome: RecoveryRecovered, reason: kube.ReasonOperatorRecovered,
			note: []string{"recovery 1 of 3"},
		},
		"three for another code or URL do not stop a recovery": {
			reports: []kube.OperatorReport{failedReport("scc-registration-old", msg503), activeReport("scc-registration-new")},
			record:  &kube.RecoveryRecord{Attempts: 3, Cause: "HTTP 503 Service Unavailable", Outcome: kube.RecoveryFailed, Target: "another"},
			exit:    ExitOK, recreated: true, checked: true, outcome: RecoveryRecovered, reason: kube.ReasonOperatorRecovered,
		},
		"OPERATOR_RECOVERY=false: reported only": {
			reports: []kube.OperatorReport{failedReport("scc-registration-old", msg503)}, noRecover: true,
			exit: ExitPermanent, outcome: RecoveryNotAttempted, reason: kube.ReasonOperatorFailed, warning: true,
			errText: []string{"not recovered automatically: OPERATOR_RECOVERY=false", "kubectl -n cattle-scc-system delete secret scc-registration"},
		},
		"no handover check this run: nothing deleted": {
			reports: []kube.OperatorReport{failedReport("scc-registration-old", msg503)}, noWait: true,
			exit: ExitPermanent, outcome: RecoveryNotAttempted, reason: kube.ReasonOperatorFailed, warning: true,
			errText: []string{"did not check that the operator can reach the update server", "HANDOVER_TIMEOUT=0"},
		},
		"the finalizer never let it go: exit 2, never written over, recorded": {
			reports:  []kube.OperatorReport{failedReport("scc-registration-old", msg503)},
			recreate: failure.Permanent(fmt.Errorf("kube: secret cattle-scc-system/scc-registration: %w: waits for its finalizers", kube.ErrSecretTerminating)),
			exit:     ExitPermanent, recreated: true, checked: true, outcome: RecoveryTerminating,
			reason: kube.ReasonOperatorFailed, warning: true,
			errText: []string{"recovery 1 of 3", "being deleted", "rancher/scc-operator is running"},
			saved:   &kube.RecoveryRecord{Attempts: 1, Cause: "HTTP 503 Service Unavailable", Message: msg503, Outcome: kube.RecoveryTerminating, Registration: "scc-registration-old", Target: target},
		},
		"the Secret changed since it was read: nothing deleted, the attempt not counted": {
			reports:  []kube.OperatorReport{failedReport("scc-registration-old", msg503)},
			record:   &kube.RecoveryRecord{Attempts: 1, Cause: "HTTP 503 Service Unavailable", Outcome: kube.RecoveryFailed, Target: target},
			recreate: fmt.Errorf("kube: secret cattle-scc-system/scc-registration: %w: nothing deleted", kube.ErrSecretChanged),
			exit:     ExitTransient, recreated: true, checked: true, outcome: RecoveryIncomplete, reason: kube.ReasonOperatorFailed, warning: true,
			saved: &kube.RecoveryRecord{Attempts: 1, Cause: "HTTP 503 Service Unavailable", Outcome: kube.RecoveryFailed, Target: target},
		},
		"an active registration resets the record": {
			reports: []kube.OperatorReport{activeReport("scc-registration-new")},
			record:  &kube.RecoveryRecord{Attempts: 2, Cause: "HTTP 503 Service Unavailable", Outcome: kube.RecoveryFailed, Target: target},
			exit:    ExitOK, reason: kube.ReasonRegistered,
			saved: &kube.RecoveryRecord{Attempts: 0, Cause: "HTTP 503 Service Unavailable", Outcome: kube.RecoveryRecovered, Registration: "scc-registration-new", Target: target},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := &recorder{changed: !tc.unchanged}
			f := &recoveryFake{reports: tc.reports, record: tc.record, operator: tc.operator, recreate: tc.recreate}
			var logs bytes.Buffer
			j := recoveryJob(r, f, &logs)
			if tc.noRecover {
				j.Recovery = nil
			}
			if tc.noWait {
				j.InCluster.(*incluster.Name).Config.Timeout = 0
			}
			res, err := j.Run(context.Background())
			assert.Equal(t, tc.exit, ExitCode(err), "%v", err)
			if tc.recreated {
				require.Len(t, f.recreated, 1, "one recovery, never two in a run")
				c := f.recreated[0]
				assert.Equal(t, types.UID("uid-1"), c.uid, "the delete's precondition is the Secret the report was read from")
				assert.Equal(t, "41", c.rv)
				assert.Equal(t, r.written[0], c.reg, "written afresh with the values of this run")
			} else {
				assert.Empty(t, f.recreated, "nothing deleted")
			}
			assert.Equal(t, tc.checked, f.checked > 0, "the operator's Lease asked")
			if tc.outcome != "" {
				require.NotNil(t, res.Recovery)
				assert.Equal(t, tc.outcome, res.Recovery.Outcome)
			}
			require.Len(t, f.events, 1, "one Event per run")
			ev := f.events[0]
			assert.Equal(t, tc.reason, ev.Reason)
			assert.Equal(t, tc.warning, ev.Warning)
			for _, n := range tc.note {
				assert.Contains(t, ev.Note, n)
			}
			for _, e := range tc.errText {
				require.Error(t, err)
				assert.Contains(t, err.Error(), e)
			}
			if err != nil {
				assert.ErrorIs(t, err, ErrOperatorFailed)
			}
			if tc.saved != nil {
				require.NotEmpty(t, f.saved)
				got := f.saved[len(f.saved)-1]
				got.Time = time.Time{}
				want := *tc.saved
				want.Time = time.Time{}
				assert.Equal(t, want, got)
			}
			lines := logLines(t, &logs)
			last := lines[len(lines)-1]
			if tc.outcome != "" {
				assert.Equal(t, tc.outcome, last["recovery"], "the summary names the recovery")
			}
			if tc.summary != "" {
				assert.Equal(t, tc.summary, last["outcome"], "a recovered run wrote the Secret")
			}
		})
	}
}

// TestRecoveryIsRecordedBeforeTheDelete: the attempt is on the Lease before
// the Secret is deleted, so a run killed halfway still counts it.
func TestRecoveryIsRecordedBeforeTheDelete(t *testing.T) {
	r := &recorder{changed: true}
	f := &recoveryFake{reports: []kube.OperatorReport{failedReport("scc-registration-old", msg503), failedReport("scc-registration-new", msg503)}}
	f.recreate = errors.New("killed")
	var logs bytes.Buffer
	_, err := recoveryJob(r, f, &logs).Run(context.Background())
	require.Error(t, err)
	require.NotEmpty(t, f.saved)
	assert.Equal(t, kube.RecoveryIncomplete, f.saved[0].Outcome)
	assert.Equal(t, 1, f.saved[0].Attempts)
	require.Len(t, f.recreated, 1)
	assert.Equal(t, 1, f.recreated[0].savedBefore, "the attempt was on the Lease when the delete ran")
}

// TestRecoveryNotRecordedNothingDeleted: an attempt that cannot be
// recorded is not made: the record is what stops a loop of recoveries.
func TestRecoveryNotRecordedNothingDeleted(t *testing.T) {
	r := &recorder{changed: true}
	f := &recoveryFake{reports: []kube.OperatorReport{failedReport("scc-registration-old", msg503)}, recordSave: errors.New("leases \"registration-engine\" is forbidden")}
	var logs bytes.Buffer
	_, err := recoveryJob(r, f, &logs).Run(context.Background())
	require.Error(t, err)
	assert.Empty(t, f.recreated, "nothing deleted without the record")
	assert.Equal(t, ExitTransient, ExitCode(err), "a retry may record it")
}

// TestRunSaysTheSecretIsStillTerminating: a later run that finds the
// Secret still held by the finalizer writes nothing over it and says
// whether the operator, whose finalizer it is, runs.
func TestRunSaysTheSecretIsStillTerminating(t *testing.T) {
	for name, tc := range map[string]struct {
		operator error
		want     string
	}{
		"operator running":     {want: "rancher/scc-operator is running (Lease kube-system/scc-controllers renewed 2s ago by scc-operator-7d9) and has not let it go yet"},
		"operator not running": {operator: fmt.Errorf("%w: its Lease kube-system/scc-controllers is held by nobody", kube.ErrOperatorNotRunning), want: "is held by nobody: start it, and it lets the Secret go"},
	} {
		t.Run(name, func(t *testing.T) {
			r := &recorder{failAt: "write", failWith: failure.Permanent(fmt.Errorf("kube: secret cattle-scc-system/scc-registration: %w: waits for its finalizers", kube.ErrSecretTerminating))}
			f := &recoveryFake{reports: []kube.OperatorReport{activeReport("x")}, operator: tc.operator}
			var logs bytes.Buffer
			res, err := recoveryJob(r, f, &logs).Run(context.Background())
			require.ErrorIs(t, err, kube.ErrSecretTerminating)
			assert.Equal(t, ExitPermanent, ExitCode(err))
			assert.Equal(t, "write-secret", res.Failed)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
