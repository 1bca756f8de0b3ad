package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/e2e/sccoperator"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
)

// TestOperatorRecovery is zero touch after rancher/scc-operator fails a
// Registration: the CronJob's Jobs, the real operator (add-rmt-support)
// and the fake update server failing as a passing outage does. A cause a
// retry can fix is recovered by the engine's own run; a refused code is
// never "recovered" by a delete; a stopped operator is never handed a
// deleted Secret; and three recoveries that met the same cause stop.
func TestOperatorRecovery(t *testing.T) {
	o := setupOperator(t)
	t.Run("503 at the first announce: the run recovers", func(t *testing.T) {
		o.testRecovers(t, "recover-503", fakecloud.UpdateFaults{SCCAnnounceFailures: 1}, "HTTP 503 Service Unavailable", 503)
	})
	t.Run("a reset connection at the first announce: the run recovers", func(t *testing.T) {
		o.testRecovers(t, "recover-reset", fakecloud.UpdateFaults{SCCAnnounceResets: 1}, "connection reset", 0)
	})
	t.Run("500 at the second SCC call", o.testActivate500)
	t.Run("401 on every run: nothing deleted, then a new code registers without a delete", o.testRefusedNeverDeleted)
	t.Run("the operator stopped: nothing deleted", o.testOperatorStopped)
	t.Run("three failed recoveries: the fourth run does not delete", o.testThreeFailedRecoveries)
}

// freshRecovery starts the case from a cluster the engine never
// registered: the operator running, no Secret, no recovery record, the
// update servers healed, a Recorder of every Registration state.
func (o *operatorEnv) freshRecovery(ctx context.Context, t *testing.T) (*sccoperator.Operator, *sccoperator.Recorder) {
	t.Helper()
	o.ResetCoreDNS(ctx, t)
	o.DNS.Forget()
	op := sccoperator.Run(t, o.Plane, sccoperator.Options{Binary: sccoperator.Binary(t, sccoperator.CommitRMT), ProxyURL: o.proxy.URL})
	o.forceDeleteSecret(ctx, t)
	o.resetUpdateServers()
	o.clearRecoveryRecord(ctx, t)
	rec, err := sccoperator.Record(ctx, o.Plane.Admin)
	require.NoError(t, err)
	t.Cleanup(rec.Stop)
	return op, rec
}

func (o *operatorEnv) setUpdateFaults(f fakecloud.UpdateFaults) {
	for _, u := range o.fc.Updates {
		u.SetFaults(f)
	}
}

// announces are the statuses the fake answered announces with, in order (0:
// the connection was reset).
func (o *operatorEnv) announces() []int {
	var out []int
	for _, r := range o.fc.SCCRequests() {
		if r.Method == "POST" && r.Path == "/connect/subscriptions/systems" {
			out = append(out, r.Status)
		}
	}
	return out
}

// testRecovers: the update server fails the operator's first announce
// (faults), so the operator fails the Registration; the same Job's run
// sees it, deletes the Secret, writes it afresh, and the new Registration
// is active. The old Registration is gone, the Event says what happened.
func (o *operatorEnv) testRecovers(t *testing.T, name string, faults fakecloud.UpdateFaults, cause string, firstStatus int) {
	ctx := harness.Context(t)
	_, rec := o.freshRecovery(ctx, t)
	o.setUpdateFaults(faults)
	runs := o.StartKubelet(ctx, t, operator.Namespace, o.c)

	pr, done := o.runJob(ctx, t, runs, name)
	require.Equal(t, batchv1.JobComplete, controlplane.FinishedCondition(done).Type, pr.Res.String())
	assert.Equal(t, job.ExitOK, pr.Res.Code, pr.Res.Stderr)
	sum := summary(t, pr.Res.Stderr)
	assert.Equal(t, operator.Recovered, sum["recovery"], pr.Res.Stderr)
	assert.Equal(t, operator.StateActive, sum["operator"])
	assert.Equal(t, cause, sum["cause"])
	oldName, _ := sum["replacedRegistration"].(string)
	newName, _ := sum["registration"].(string)
	require.NotEmpty(t, oldName, pr.Res.Stderr)
	require.NotEmpty(t, newName)
	assert.NotEqual(t, oldName, newName, "a new Secret gets a new salt, so a new Registration")
	replaced, _ := sum["replacedMessage"].(string)

	// The operator's own record: the old one Failed, then gone; the new
	// one Done and activated.
	failed, err := rec.Wait(ctx, oldName, sccoperator.Registration.Failed)
	require.NoError(t, err)
	assert.Equal(t, replaced, failed.FailureMessage(), "the summary quotes the operator's own words")
	active, err := rec.Wait(ctx, newName, sccoperator.Registration.Done)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(o.Plane.Admin)
	require.NoError(t, err)
	_, err = sccoperator.Get(ctx, dyn, oldName)
	assert.True(t, apierrors.IsNotFound(err), "the old Registration is gone: %v", err)

	statuses := o.announces()
	require.GreaterOrEqual(t, len(statuses), 2, "%v", statuses)
	assert.Equal(t, firstStatus, statuses[0], "the first announce failed")
	assert.Equal(t, 201, statuses[len(statuses)-1], "the announce after the recovery succeeded")

	ev := o.jobEvent(ctx, t, name)
	assert.Equal(t, kube.ReasonOperatorRecovered, ev.Reason)
	assert.Equal(t, "Normal", ev.Type)
	assert.Contains(t, ev.Note, "had failed registration "+oldName)
	assert.Contains(t, ev.Note, "registration "+newName+" is active")

	took := active.Seen.Sub(failed.Seen)
	t.Logf("run summary: %s", lastLine(pr.Res.Stderr))
	t.Logf("kubectl describe job:\n%s", o.Plane.Kubectl(t, "-n", operator.Namespace, "describe", "job", name))
	t.Logf("proved: rancher/scc-operator %.7s failed Registration %s (%q; cause %s); the same Job's run deleted the Secret, wrote it afresh, and Registration %s was active %s after the failure (announces answered %v); the old Registration is gone and the Job carries Event %s: %q",
		sccoperator.CommitRMT, oldName, replaced, cause, newName, took.Round(time.Millisecond), statuses, ev.Reason, ev.Note)
}

// testActivate500: the update server answers the operator's second call,
// the product activation, with 500 once. The operator retries that call
// itself (ReconcileActivateError leaves a Registration alone for an error
// that is not a non-recoverable HTTP one), so the engine must not delete
// anything: the run sees the Registration active.
func (o *operatorEnv) testActivate500(t *testing.T) {
	ctx := harness.Context(t)
	_, rec := o.freshRecovery(ctx, t)
	o.setUpdateFaults(fakecloud.UpdateFaults{SCCActivateFailures: 1})
	runs := o.StartKubelet(ctx, t, operator.Namespace, o.c)

	pr, done := o.runJob(ctx, t, runs, "recover-activate-500")
	require.Equal(t, batchv1.JobComplete, controlplane.FinishedCondition(done).Type, pr.Res.String())
	sum := summary(t, pr.Res.Stderr)
	assert.Equal(t, operator.StateActive, sum["operator"], pr.Res.Stderr)
	regName, _ := sum["registration"].(string)
	states := rec.States(regName)
	var failedOnce bool
	for _, s := range states {
		failedOnce = failedOnce || s.Failed()
	}
	var products []int
	for _, r := range o.fc.SCCRequests() {
		if r.Path == "/connect/systems/products" {
			products = append(products, r.Status)
		}
	}
	require.NotEmpty(t, products)
	assert.Equal(t, 500, products[0], "the second call failed first")
	// The operator retries a failed activation itself (only a
	// non-recoverable HTTP error there marks the Registration Failed), so
	// there is nothing for the engine to recover.
	assert.False(t, failedOnce, "Registration %s passed through Failure: %v", regName, states)
	assert.Nil(t, sum["recovery"], "the operator retried by itself: nothing for the engine to recover")
	t.Logf("proved: a 500 at rancher/scc-operator's second call (POST /connect/systems/products answered %v) never failed Registration %s: the operator retried the activation itself and it is active (%d states); the run found it active and deleted nothing",
		products, regName, len(states))
}

// testRefusedNeverDeleted: a code the update server refuses (401 "Unknown
// Registration Code.") is not a passing cause: three runs fail with exit 2,
// the Secret keeps its UID (nothing is ever deleted), and once the
// CronJob's code is right the next run writes it and the operator
// registers afresh, still without a delete.
func (o *operatorEnv) testRefusedNeverDeleted(t *testing.T) {
	ctx := recoveryContext(t)
	_, _ = o.freshRecovery(ctx, t)
	const wrong = "E2E-WRONG-CODE"
	o.setCronJobEnv(ctx, t, map[string]string{"REGISTRATION_CODE": wrong})
	t.Cleanup(func() {
		o.setCronJobEnv(context.Background(), t, map[string]string{"REGISTRATION_CODE": harness.OverlayRegCode})
	})
	runs := o.StartKubelet(ctx, t, operator.Namespace, o.c)

	var uid types.UID
	var evidence []string
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("refused-%d", i)
		pr, done := o.runJob(ctx, t, runs, name)
		assert.Equal(t, batchv1.JobFailed, controlplane.FinishedCondition(done).Type, pr.Res.String())
		assert.Equal(t, job.ExitPermanent, pr.Res.Code, pr.Res.Stderr)
		sum := summary(t, pr.Res.Stderr)
		assert.Equal(t, operator.NeedsPerson, sum["recovery"], pr.Res.Stderr)
		assert.Equal(t, false, sum["recoverable"])
		assert.Equal(t, "HTTP 401 Unauthorized", sum["cause"])
		assert.NotContains(t, pr.Res.Stderr, "recovering the registration: deleting", "no recovery started")
		s := o.Secret(ctx, t)
		if i == 1 {
			uid = s.UID
		}
		assert.Equal(t, uid, s.UID, "run %d: the Secret was never deleted", i)
		assert.Nil(t, s.DeletionTimestamp)
		ev := o.jobEvent(ctx, t, name)
		assert.Equal(t, kube.ReasonOperatorFailed, ev.Reason)
		assert.Contains(t, ev.Note, "registration-code", "the remedy is a code, not a delete")
		evidence = append(evidence, fmt.Sprintf("%s: exit %d, Secret uid %s resourceVersion %s", name, pr.Res.Code, s.UID, s.ResourceVersion))
	}
	t.Logf("kubectl describe job refused-3:\n%s", o.Plane.Kubectl(t, "-n", operator.Namespace, "describe", "job", "refused-3"))

	o.setCronJobEnv(ctx, t, map[string]string{"REGISTRATION_CODE": harness.OverlayRegCode})
	pr, done := o.runJob(ctx, t, runs, "refused-fixed")
	require.Equal(t, batchv1.JobComplete, controlplane.FinishedCondition(done).Type, pr.Res.String())
	sum := summary(t, pr.Res.Stderr)
	assert.Equal(t, operator.StateActive, sum["operator"], pr.Res.Stderr)
	assert.Equal(t, job.OutcomeRegistered, sum["outcome"])
	assert.Nil(t, sum["recovery"], "no recovery: the operator registered the new code by itself")
	s := o.Secret(ctx, t)
	assert.Equal(t, uid, s.UID, "registered with the new code without a delete")
	t.Logf("proved: with a code the update server refuses, three runs exited 2 with recovery=needs-person and deleted nothing (%s); with the right code the next run wrote it and rancher/scc-operator made Registration %v active, the Secret still uid %s (no delete)",
		strings.Join(evidence, "; "), sum["registration"], s.UID)
}

// testOperatorStopped: with the operator's Registration Failed and the
// operator stopped (its Lease released), a run deletes nothing: a deleted
// Secret would wait for the operator's finalizer. It fails with exit 1 and
// says so.
func (o *operatorEnv) testOperatorStopped(t *testing.T) {
	ctx := recoveryContext(t)
	op, _ := o.freshRecovery(ctx, t)
	o.setUpdateFaults(fakecloud.UpdateFaults{SCCAnnounceFailures: 1})
	o.setCronJobEnv(ctx, t, map[string]string{"OPERATOR_RECOVERY": "false"})
	t.Cleanup(func() { o.setCronJobEnv(context.Background(), t, map[string]string{"OPERATOR_RECOVERY": "true"}) })
	runs := o.StartKubelet(ctx, t, operator.Namespace, o.c)
	pr, _ := o.runJob(ctx, t, runs, "stopped-setup")
	require.Equal(t, operator.NotAttempted, summary(t, pr.Res.Stderr)["recovery"], pr.Res.Stderr)
	require.NoError(t, op.Stop())
	before := o.Secret(ctx, t)

	o.setCronJobEnv(ctx, t, map[string]string{"OPERATOR_RECOVERY": "true"})
	o.Plane.Kubectl(t, "-n", operator.Namespace, "create", "job", "--from=cronjob/"+harness.CronJobName, "stopped")
	t.Cleanup(func() { o.DeleteJob(t, operator.Namespace, "stopped") })
	// Exit 1: the Job retries (backoffLimit 2), each pod watching the
	// operator's Lease for a renewal before it gives up.
	done := controlplane.WaitJobFinishedWithin(ctx, t, o.Admin, operator.Namespace, "stopped", 5*time.Minute)
	assert.Equal(t, batchv1.JobFailed, controlplane.FinishedCondition(done).Type)
	prs := runs.ForJob(t, "stopped")
	require.NotEmpty(t, prs)
	for _, pr := range prs {
		assert.Equal(t, job.ExitTransient, pr.Res.Code, pr.Res.Stderr)
		sum := summary(t, pr.Res.Stderr)
		assert.Equal(t, operator.OperatorDown, sum["recovery"], pr.Res.Stderr)
		msg, _ := sum["error"].(string)
		assert.Contains(t, msg, "rancher/scc-operator is not running")
		assert.Contains(t, msg, "nothing deleted")
		assert.NotContains(t, pr.Res.Stderr, "recovering the registration: deleting", "no recovery started")
	}
	after := o.Secret(ctx, t)
	assert.Equal(t, before.UID, after.UID, "nothing deleted")
	assert.Nil(t, after.DeletionTimestamp, "not left Terminating")
	// One Event per pod: each retry says so again.
	list, err := o.Admin.EventsV1().Events(operator.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var events int
	for _, ev := range list.Items {
		if ev.ReportingController != kube.ReportingController || ev.Regarding.Name != "stopped" {
			continue
		}
		events++
		assert.Equal(t, kube.ReasonOperatorFailed, ev.Reason)
		assert.Equal(t, "Warning", ev.Type)
		assert.Contains(t, ev.Note, "not recovered, nothing deleted: rancher/scc-operator is not running")
	}
	assert.Equal(t, len(prs), events, "an Event per pod")
	t.Logf("kubectl describe job stopped:\n%s", o.Plane.Kubectl(t, "-n", operator.Namespace, "describe", "job", "stopped"))
	t.Logf("proved: with Registration Failed and rancher/scc-operator stopped, %d pod(s) of Job stopped exited %d, deleted nothing (Secret uid %s, not Terminating) and said: %v",
		len(prs), prs[0].Res.Code, after.UID, summary(t, prs[0].Res.Stderr)["error"])
}

// testThreeFailedRecoveries: an update server that answers 500 to every
// announce makes each recovery fail again. Three runs recover (each a new
// Secret); the fourth deletes nothing and says why; clearing the record
// with the README's command, once the server answers, lets the next run
// recover.
func (o *operatorEnv) testThreeFailedRecoveries(t *testing.T) {
	ctx := recoveryContext(t)
	_, _ = o.freshRecovery(ctx, t)
	o.setUpdateFaults(fakecloud.UpdateFaults{SCCAnnounce5xx: true})
	runs := o.StartKubelet(ctx, t, operator.Namespace, o.c)

	var uids []types.UID
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("again-%d", i)
		pr, done := o.runJob(ctx, t, runs, name)
		assert.Equal(t, batchv1.JobFailed, controlplane.FinishedCondition(done).Type, pr.Res.String())
		assert.Equal(t, batchv1.JobReasonPodFailurePolicy, controlplane.FinishedCondition(done).Reason, "exit 2 ends the Job: the next attempt is the next schedule's")
		assert.Equal(t, job.ExitPermanent, pr.Res.Code, pr.Res.Stderr)
		sum := summary(t, pr.Res.Stderr)
		assert.Equal(t, operator.FailedAgain, sum["recovery"], pr.Res.Stderr)
		assert.Equal(t, float64(i), sum["recoveryAttempt"])
		uids = append(uids, o.Secret(ctx, t).UID)
	}
	assert.Len(t, slices.Compact(slices.Clone(uids)), len(uids), "each recovery wrote a new Secret: %v", uids)
	rec := o.recoveryRecord(ctx, t)
	assert.Equal(t, operator.MaxRecoveries, rec.Attempts)

	pr, _ := o.runJob(ctx, t, runs, "again-4")
	assert.Equal(t, job.ExitPermanent, pr.Res.Code)
	sum := summary(t, pr.Res.Stderr)
	assert.Equal(t, operator.Stopped, sum["recovery"], pr.Res.Stderr)
	msg, _ := sum["error"].(string)
	assert.Contains(t, msg, "stopped recovering: 3 recoveries in a row")
	assert.Contains(t, msg, "annotate lease registration-engine "+operator.AnnotationRecovery+"-")
	assert.Equal(t, uids[2], o.Secret(ctx, t).UID, "the fourth run deleted nothing")
	t.Logf("kubectl describe job again-4:\n%s", o.Plane.Kubectl(t, "-n", operator.Namespace, "describe", "job", "again-4"))
	t.Logf("the recovery record on the Lease:\n%s", o.Plane.Kubectl(t, "-n", operator.Namespace, "get", "lease", kube.LeaseName, "-o", "jsonpath={.metadata.annotations}"))

	// The update server answers again; a person clears the record as the
	// README says; the next run recovers.
	o.setUpdateFaults(fakecloud.UpdateFaults{})
	o.Plane.Kubectl(t, "-n", operator.Namespace, "annotate", "lease", kube.LeaseName, operator.AnnotationRecovery+"-")
	pr, done := o.runJob(ctx, t, runs, "again-cleared")
	require.Equal(t, batchv1.JobComplete, controlplane.FinishedCondition(done).Type, pr.Res.String())
	assert.Equal(t, operator.Recovered, summary(t, pr.Res.Stderr)["recovery"], pr.Res.Stderr)
	t.Logf("proved: with every announce answered 500, three runs each recovered once and failed again (exit 2, Secret uids %v); the fourth deleted nothing and said %q; after `kubectl annotate lease %s %s-` and a healed server the next run recovered",
		uids, msg, kube.LeaseName, operator.AnnotationRecovery)
}

// recoveryContext bounds a case of several Jobs, each a whole run with its
// handover wait.
func recoveryContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// clearRecoveryRecord removes the engine's recovery record, if any.
func (o *operatorEnv) clearRecoveryRecord(ctx context.Context, t *testing.T) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		leases := o.Admin.CoordinationV1().Leases(operator.Namespace)
		l, err := leases.Get(ctx, kube.LeaseName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if _, ok := l.Annotations[operator.AnnotationRecovery]; !ok {
			return true, nil
		}
		delete(l.Annotations, operator.AnnotationRecovery)
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err == nil, nil
	})
	require.NoError(t, err)
}

// recoveryRecord reads the engine's recovery record.
func (o *operatorEnv) recoveryRecord(ctx context.Context, t *testing.T) operator.Record {
	t.Helper()
	l, err := o.Admin.CoordinationV1().Leases(operator.Namespace).Get(ctx, kube.LeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	rec, ok, err := operator.ParseRecord(l.Annotations)
	require.NoError(t, err)
	require.True(t, ok, "a record on the Lease: %v", l.Annotations)
	return rec
}

// setCronJobEnv sets variables of the CronJob's container.
func (o *operatorEnv) setCronJobEnv(ctx context.Context, t *testing.T, env map[string]string) {
	cj, err := o.Admin.BatchV1().CronJobs(operator.Namespace).Get(ctx, harness.CronJobName, metav1.GetOptions{})
	require.NoError(t, err)
	controlplane.SetEnv(&cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0], env)
	_, err = o.Admin.BatchV1().CronJobs(operator.Namespace).Update(ctx, cj, metav1.UpdateOptions{})
	require.NoError(t, err)
}
