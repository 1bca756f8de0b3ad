package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/operator"
)

// TestCluster: what the suites arrange on the shared plane is what they
// assume: the overlay's objects decode strictly, UseAKSLayout builds AKS's
// kube-system and ResetCoreDNS undoes it, PutLease leaves a dead run's Lease, and the process
// kubelet runs a Job's pod as the engine with the pod's arguments and
// records its exit.
func TestCluster(t *testing.T) {
	e := harness.SetupCluster(t)
	ctx := harness.Context(t)

	t.Run("the overlay's objects", func(t *testing.T) {
		o := e.OverlayObjects(t)
		assert.Equal(t, harness.EngineSA, o.SA.Name)
		assert.Equal(t, harness.CronJobName, o.CronJob.Name)
		assert.Equal(t, operator.Namespace, o.CronJob.Namespace)
		assert.NotEmpty(t, o.Role.Rules)
	})

	t.Run("UseAKSLayout, then ResetCoreDNS", func(t *testing.T) {
		cms := e.Admin.CoreV1().ConfigMaps("kube-system")
		e.UseAKSLayout(ctx, t)
		cm, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, fakecloud.AKSCorefile, cm.Data[coredns.CorefileKey])
		custom, err := cms.Get(ctx, coredns.CustomConfigMap, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"log.override": "log\n"}, custom.Data)

		e.ResetCoreDNS(ctx, t)
		cm, err = cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, e.Corefile, cm.Data[coredns.CorefileKey])
		assert.NotEqual(t, fakecloud.AKSCorefile, e.Corefile)
		_, err = cms.Get(ctx, coredns.CustomConfigMap, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "coredns-custom deleted: %v", err)
	})

	t.Run("PutLease", func(t *testing.T) {
		renewed := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
		e.PutLease(ctx, t, "dead-pod", renewed, 60)
		t.Cleanup(func() { e.DeleteLease(t) })
		l, err := e.Admin.CoordinationV1().Leases(operator.Namespace).Get(ctx, harness.LeaseName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "dead-pod", *l.Spec.HolderIdentity)
		assert.True(t, l.Spec.RenewTime.Time.Equal(renewed), "renewed at %s, want %s", l.Spec.RenewTime, renewed)
		assert.Equal(t, int32(60), *l.Spec.LeaseDurationSeconds)
	})

	t.Run("the process kubelet runs a Job's pod", func(t *testing.T) {
		ns := e.Namespace(ctx, t, "harness-")
		o := e.OverlayObjects(t)
		o.SA.Namespace = ns
		_, err := e.Admin.CoreV1().ServiceAccounts(ns).Create(ctx, o.SA, metav1.CreateOptions{})
		require.NoError(t, err)
		runs := e.StartKubelet(ctx, t, ns, harness.StartCloud(t))

		spec := o.CronJob.Spec.JobTemplate.Spec
		spec.Template.Spec.Containers[0].Args = []string{"--version"}
		created, err := e.Admin.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "version"}, Spec: spec,
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		done := controlplane.WaitJobFinished(ctx, t, e.Admin, ns, created.Name)
		cond := controlplane.FinishedCondition(done)
		require.NotNil(t, cond)
		pr := runs.ForJob(t, created.Name)
		require.Len(t, pr, 1)
		assert.Equal(t, batchv1.JobComplete, cond.Type, "%s: %s\n%s", cond.Reason, cond.Message, pr[0].Res)
		assert.Equal(t, job.ExitOK, pr[0].Res.Code)
		assert.Equal(t, "registration-engine "+job.Version+"\n", pr[0].Res.Stdout)
		assert.True(t, strings.HasPrefix(pr[0].Pod, "version-"), pr[0].Pod)
	})
}
