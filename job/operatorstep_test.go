package job

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/incluster"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/operator/operatortest"
	"github.com/rancher/registration-engine/job/proxycheck"
)

// recoveryJob is a Job whose run writes the Secret (unless r says
// unchanged) and finds the operator's answers in f, with recovery on.
func recoveryJob(r *recorder, f *operatortest.Fake, logs *bytes.Buffer) *Job {
	j := newJob(r, logs)
	j.Events, j.SecretRef = f, "cattle-scc-system/scc-registration"
	j.Operator = &operator.Step{
		Watch: f, Wait: 2 * time.Minute, SecretRef: j.SecretRef,
		Recovery: &operator.Recovery{Secrets: f, Operator: f, Record: f, LeaseRef: "cattle-scc-system/registration-engine", Watch: f, Wait: 2 * time.Minute},
	}
	return j
}

// TestRunHandsAFailedRegistrationToRecovery: the operator step hands a
// Failed Registration to job/operator with what this run proved, and what
// the recovery did reaches the exit code, the summary and the Job's one
// Event; an active Registration resets the record. job/operator's own
// tests cover each of its outcomes.
func TestRunHandsAFailedRegistrationToRecovery(t *testing.T) {
	tests := map[string]struct {
		reports   []operator.Report
		record    *operator.Record
		operator  error
		unchanged bool
		noRecover bool // OPERATOR_RECOVERY=false
		noWait    bool // HANDOVER_TIMEOUT=0

		exit      int
		recreated bool
		recovery  string // the summary's recovery, "" for none
		outcome   string // the summary's outcome
		phase     string // the summary's failedPhase
		operatorS string // the summary's operator
		reason    string
		failed    bool // the run fails with ErrOperatorFailed; its message is in the golden file
		saved     *operator.Record
	}{
		"503 then active: recovered, exit 0, the summary says registered and the new registration": {
			reports: []operator.Report{operatortest.FailedReport("scc-registration-old", operatortest.Msg503), operatortest.ActiveReport("scc-registration-new")},
			exit:    ExitOK, recreated: true, recovery: operator.Recovered, outcome: OutcomeRegistered, operatorS: operator.StateActive,
			reason: kube.ReasonOperatorRecovered,
		},
		"an unchanged run that finds a Failed registration recovers it too": {
			unchanged: true,
			reports:   []operator.Report{operatortest.FailedReport("scc-registration-old", operatortest.Msg503), operatortest.ActiveReport("scc-registration-new")},
			exit:      ExitOK, recreated: true, recovery: operator.Recovered, outcome: OutcomeRegistered, operatorS: operator.StateActive,
			reason: kube.ReasonOperatorRecovered,
		},
		"failed again: exit 2, failedPhase operator": {
			reports: []operator.Report{operatortest.FailedReport("scc-registration-old", operatortest.Msg503), operatortest.FailedReport("scc-registration-new", operatortest.Msg503)},
			exit:    ExitPermanent, recreated: true, recovery: operator.FailedAgain, outcome: OutcomeFailed, phase: PhaseOperator, operatorS: operator.StateFailed,
			reason: kube.ReasonOperatorFailed, failed: true,
		},
		"the operator is not running: exit 1, nothing deleted": {
			reports:  []operator.Report{operatortest.FailedReport("scc-registration-old", operatortest.Msg503)},
			operator: fmt.Errorf("%w: its Lease kube-system/scc-controllers is held by nobody", operator.ErrOperatorNotRunning),
			exit:     ExitTransient, recovery: operator.OperatorDown, outcome: OutcomeFailed, phase: PhaseOperator, operatorS: operator.StateFailed,
			reason: kube.ReasonOperatorFailed, failed: true,
		},
		"OPERATOR_RECOVERY=false: reported only": {
			reports: []operator.Report{operatortest.FailedReport("scc-registration-old", operatortest.Msg503)}, noRecover: true,
			exit: ExitPermanent, recovery: operator.NotAttempted, outcome: OutcomeFailed, phase: PhaseOperator, operatorS: operator.StateFailed,
			reason: kube.ReasonOperatorFailed, failed: true,
		},
		"no handover check this run: nothing deleted, the reason from phase 6": {
			reports: []operator.Report{operatortest.FailedReport("scc-registration-old", operatortest.Msg503)}, noWait: true,
			exit: ExitPermanent, recovery: operator.NotAttempted, outcome: OutcomeFailed, phase: PhaseOperator, operatorS: operator.StateFailed,
			reason: kube.ReasonOperatorFailed, failed: true,
		},
		"an active registration resets the record": {
			reports: []operator.Report{operatortest.ActiveReport("scc-registration-new")},
			record:  &operator.Record{Attempts: 2, Cause: "HTTP 503 Service Unavailable", Outcome: operator.RecordFailed, Target: operatortest.Target},
			exit:    ExitOK, outcome: OutcomeRegistered, operatorS: operator.StateActive,
			reason: kube.ReasonRegistered,
			saved:  &operator.Record{Attempts: 0, Cause: "HTTP 503 Service Unavailable", Outcome: operator.RecordRecovered, Registration: "scc-registration-new", Target: operatortest.Target},
		},
	}
	msgs := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := &recorder{changed: !tc.unchanged}
			f := &operatortest.Fake{Reports: tc.reports, Kept: tc.record, OperatorErr: tc.operator}
			var logs bytes.Buffer
			j := recoveryJob(r, f, &logs)
			if tc.noRecover {
				j.Operator.Recovery = nil
			}
			if tc.noWait {
				j.InCluster.(*incluster.Name).Config.Timeout = 0
			}
			res, err := j.Run(context.Background())
			assert.Equal(t, tc.exit, ExitCode(err), "%v", err)
			if tc.failed {
				require.Error(t, err)
				msgs.Add(name, err)
				assert.ErrorIs(t, err, operator.ErrOperatorFailed)
			}
			if tc.recreated {
				require.Len(t, f.Recreated, 1, "one recovery, never two in a run")
				assert.Equal(t, r.written[0], f.Recreated[0].Reg, "written afresh with the values of this run")
				assert.True(t, res.Changed)
			} else {
				assert.Empty(t, f.Recreated, "nothing deleted")
			}
			if tc.recovery != "" {
				require.NotNil(t, res.Operator.Recovery)
				assert.Equal(t, tc.recovery, res.Operator.Recovery.Outcome)
			} else {
				assert.Nil(t, res.Operator.Recovery)
			}
			require.Len(t, f.Events, 1, "one Event per run")
			assert.Equal(t, tc.reason, f.Events[0].Reason)
			if tc.saved != nil {
				require.NotEmpty(t, f.Saved)
				got := f.Saved[len(f.Saved)-1]
				got.Time = time.Time{}
				assert.Equal(t, *tc.saved, got)
			}

			lines := logLines(t, &logs)
			last := lines[len(lines)-1]
			assert.Equal(t, "run finished", last["msg"])
			assert.Equal(t, tc.outcome, last["outcome"])
			assert.Equal(t, tc.operatorS, last["operator"])
			if tc.phase != "" {
				assert.Equal(t, tc.phase, last["failedPhase"])
			}
			if tc.recovery != "" {
				assert.Equal(t, tc.recovery, last["recovery"], "the summary names the recovery")
				assert.Equal(t, "HTTP 503 Service Unavailable", last["cause"])
			} else {
				assert.NotContains(t, last, "recovery")
			}
			if tc.recreated {
				assert.Equal(t, "scc-registration-old", last["replacedRegistration"])
				assert.Equal(t, "scc-registration-new", last["registration"], "the summary's registration is the new one")
			}
		})
	}
}

// TestRunSaysTheSecretIsStillTerminating: a later run that finds the
// Secret still held by the finalizer writes nothing over it and says
// whether the operator, whose finalizer it is, runs.
func TestRunSaysTheSecretIsStillTerminating(t *testing.T) {
	// The message says whether the operator runs (its Lease) and, if not,
	// to start it.
	msgs := testkit.NewMessages(t)
	for name, tc := range map[string]struct {
		operator error
	}{
		"operator running":     {},
		"operator not running": {operator: fmt.Errorf("%w: its Lease kube-system/scc-controllers is held by nobody", operator.ErrOperatorNotRunning)},
	} {
		t.Run(name, func(t *testing.T) {
			r := &recorder{failAt: "write", failWith: failure.Permanent(fmt.Errorf("operator: secret cattle-scc-system/scc-registration: %w: waits for its finalizers", operator.ErrSecretTerminating))}
			f := &operatortest.Fake{Reports: []operator.Report{operatortest.ActiveReport("x")}, OperatorErr: tc.operator}
			var logs bytes.Buffer
			res, err := recoveryJob(r, f, &logs).Run(context.Background())
			require.ErrorIs(t, err, operator.ErrSecretTerminating)
			assert.Equal(t, ExitPermanent, ExitCode(err))
			assert.Equal(t, "write-secret", res.Failed)
			msgs.Add(name, err)
		})
	}
}

// TestDrainDuringARecovery: a SIGTERM or the run deadline while a recovery
// waits for the operator's finalizer to let the deleted Secret go ends the
// run as every phase's end does (143, 124: the Job retries), not as a
// permanent "the Secret is being deleted" (exit 2, no retry, the finalizer
// blamed).
func TestDrainDuringARecovery(t *testing.T) {
	for name, tc := range map[string]struct {
		deadline bool
		exit     int
	}{
		"SIGTERM":      {exit: ExitTerminated},
		"run deadline": {deadline: true, exit: ExitDeadline},
	} {
		t.Run(name, func(t *testing.T) {
			f := &operatortest.Fake{Reports: []operator.Report{operatortest.FailedReport("scc-registration-old", operatortest.Msg503)}, RecreateBlocks: true, InRecreate: make(chan struct{})}
			var logs bytes.Buffer
			j := recoveryJob(&recorder{changed: true}, f, &logs)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if tc.deadline {
				j.Deadline = 200 * time.Millisecond
			} else {
				go func() { <-f.InRecreate; cancel(ErrTerminated) }()
			}
			res, err := j.Run(ctx)
			require.Error(t, err)
			assert.Equal(t, tc.exit, ExitCode(err), "%v", err)
			assert.Equal(t, PhaseOperator, res.Failed)
			assert.False(t, failure.IsPermanent(err) && ExitCode(err) == ExitPermanent)
		})
	}
}

// proxiedOperator is an operator Deployment whose HTTPS_PROXY does not
// exempt the update server.
type proxiedOperator struct{}

func (proxiedOperator) OperatorEnv(context.Context) (proxycheck.OperatorEnv, error) {
	return proxycheck.OperatorEnv{Namespace: "cattle-scc-system", Deployment: "rancher-scc-operator", Container: "rancher-scc-operator",
		Env: []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy.corp:3128"}}}, nil
}

// TestRunStopsWhenTheOperatorIsBehindAProxy: a Secret the operator could
// only reach the update server for through a proxy (which never sees the
// engine's CoreDNS entry) is bound to fail; the run writes nothing, edits
// no CoreDNS, recovers nothing, and exits 2 with the fix.
func TestRunStopsWhenTheOperatorIsBehindAProxy(t *testing.T) {
	f := &operatortest.Fake{Reports: []operator.Report{operatortest.FailedReport("scc-registration-old", operatortest.Msg503)}}
	r := &recorder{changed: true}
	j := recoveryJob(r, f, &bytes.Buffer{})
	j.Operator.Proxy = proxiedOperator{}
	res, err := j.Run(context.Background())
	require.ErrorIs(t, err, operator.ErrOperatorProxied)
	assert.Equal(t, ExitPermanent, ExitCode(err))
	assert.Equal(t, "write-secret", res.Failed)
	assert.Equal(t, []string{"lease", "detect", "prove", "find"}, r.calls, "no CoreDNS edit, no handover wait, no write")
	assert.Empty(t, f.Recreated, "no recovery")
	require.Len(t, f.Events, 1)
	assert.Contains(t, f.Events[0].Note, "NO_PROXY")
}
