package operator_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/job/operator"
)

// TestRecoveryRecordOnTheLease: the record survives on the engine's Lease,
// next to what the Lease itself holds, and can be cleared.
func TestRecoveryRecordOnTheLease(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 18, 0, 0, 0, time.UTC)
	c := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: kube.LeaseName, Namespace: operator.Namespace, ResourceVersion: "7"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pod-1"), LeaseDurationSeconds: ptr.To[int32](600), RenewTime: ptr.To(metav1.NewMicroTime(t0))},
	})
	records := operator.LeaseRecords{Lease: &kube.Lease{Leases: kubetest.Typed(c), Namespace: operator.Namespace, Name: kube.LeaseName, Holder: "pod-1", Clock: clocktesting.NewFakePassiveClock(t0)}}
	_, ok, err := records.Load(ctx)
	require.NoError(t, err)
	assert.False(t, ok)

	rec := operator.Record{Attempts: 2, Time: t0, Cause: "HTTP 503 Service Unavailable", Message: "API error (code: 503)", Outcome: operator.RecordFailed, Target: operator.TargetHash("CODE", "https://x")}
	require.NoError(t, records.Save(ctx, &rec))
	got, ok, err := records.Load(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, rec, got)
	le, err := c.CoordinationV1().Leases(operator.Namespace).Get(ctx, kube.LeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "pod-1", *le.Spec.HolderIdentity, "the Lease's spec untouched")

	assert.Equal(t, 3, got.Next(rec.Target))
	assert.Equal(t, 1, got.Next(operator.TargetHash("CODE-2", "https://x")), "a new code starts afresh")
	got.Attempts = operator.MaxRecoveries
	assert.True(t, got.Exhausted(rec.Target))
	assert.False(t, got.Exhausted(operator.TargetHash("CODE", "https://y")), "a new URL starts afresh")

	require.NoError(t, records.Save(ctx, nil))
	_, ok, err = records.Load(ctx)
	require.NoError(t, err)
	assert.False(t, ok, "cleared")
	assert.NotContains(t, operator.TargetHash("CODE", "https://x"), "CODE")
}
