package kube_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/job/operator"
)

// The Lease stores the run record as it is given (job/retry reads and
// writes it): these tests hold the storing.

// appendRun is a Follow that stores prev with one more line: what it was
// given shows in what is stored.
func appendRun(line string) kube.Follow {
	return func(prev string) (string, error) { return prev + line + ";", nil }
}

// TestSaveRun: a run's record costs the API server one read and one write
// of the Lease, computed from the record there; on a conflict (another
// writer between the read and the write) it reads again and computes the
// record from that writer's, not the stale one.
func TestSaveRun(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

	t.Run("one read and one write, from the record there", func(t *testing.T) {
		c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: operator.Namespace}})
		l := newLease(c, "pod-1", t0)
		require.NoError(t, l.SaveRun(ctx, appendRun("first")))
		c.ClearActions()

		require.NoError(t, l.SaveRun(ctx, appendRun("second")))
		assert.Equal(t, []string{"get", "update"}, kubetest.Verbs(c, "leases"))
		assert.Equal(t, "first;second;", storedRecord(t, c))
	})

	t.Run("a conflict reads again and follows the other writer's record", func(t *testing.T) {
		c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: operator.Namespace}})
		l := newLease(c, "pod-1", t0)
		conflicted := false
		c.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			if conflicted {
				return false, nil, nil
			}
			conflicted = true
			// Another writer's record lands between this read and write.
			other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: operator.Namespace,
				Annotations: map[string]string{kube.AnnotationLastRun: "other;"}}}
			require.NoError(t, c.Tracker().Update(coordinationv1.SchemeGroupVersion.WithResource("leases"), other, operator.Namespace))
			return true, nil, apierrors.NewConflict(leasesGR, leaseName, nil)
		})
		require.NoError(t, l.SaveRun(ctx, appendRun("mine")))
		assert.Equal(t, "other;mine;", storedRecord(t, c))
	})
}

func storedRecord(t *testing.T, c *fake.Clientset) string {
	t.Helper()
	le, err := c.CoordinationV1().Leases(operator.Namespace).Get(context.Background(), leaseName, metav1.GetOptions{})
	require.NoError(t, err)
	return le.Annotations[kube.AnnotationLastRun]
}

// TestReleaseRecordsTheRun: a run that holds the Lease records its verdict
// with the release, in one read and one write for both; on a Lease another
// run has taken over, the record is still written and that run keeps the
// Lease.
func TestReleaseRecordsTheRun(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, takenOver := range []bool{false, true} {
		t.Run(map[bool]string{false: "held: released and recorded", true: "taken over: recorded, the holder kept"}[takenOver], func(t *testing.T) {
			c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: operator.Namespace,
				Annotations: map[string]string{kube.AnnotationLastRun: "before;"}}})
			release, _, err := newLease(c, "pod-b", t0).Acquire(ctx)
			require.NoError(t, err)
			if takenOver {
				le := getLease(t, c)
				le.Spec.HolderIdentity = ptr.To("pod-c")
				_, err := c.CoordinationV1().Leases(operator.Namespace).Update(ctx, le, metav1.UpdateOptions{})
				require.NoError(t, err)
			}
			c.ClearActions()

			require.NoError(t, release(ctx, appendRun("registered")))
			assert.Equal(t, []string{"get", "update"}, kubetest.Verbs(c, "leases"))
			assert.Equal(t, "before;registered;", storedRecord(t, c))
			want := ""
			if takenOver {
				want = "pod-c"
			}
			assert.Equal(t, want, holderIdentity(getLease(t, c)))
		})
	}
}

// TestAcquireHandsOverTheLastRecord: the run that takes the Lease gets the
// record of the run before with the same read, with the Lease's creation
// time, so that it can judge its own failure (first contact or not,
// failing since when) without another request; LastRun reads the same for
// the retry CronJob's looks.
func TestAcquireHandsOverTheLastRecord(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	created := t0.Add(-time.Hour)
	c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: operator.Namespace, CreationTimestamp: metav1.NewTime(created)}})
	l := newLease(c, "pod-1", t0)
	_, last, err := l.Acquire(ctx)
	require.NoError(t, err)
	require.NotNil(t, last, "the Lease exists: its creation time comes with it")
	assert.Empty(t, last.Record, "no run recorded yet")
	assert.Equal(t, created, last.Created.UTC(), "the API server's stamp, which no writer of the Lease can move")

	require.NoError(t, l.SaveRun(ctx, appendRun("failed")))
	c.ClearActions()
	_, last, err = newLease(c, "pod-2", t0.Add(time.Hour)).Acquire(ctx)
	require.NoError(t, err)
	require.NotNil(t, last)
	assert.Equal(t, "failed;", last.Record)
	assert.Equal(t, []string{"get", "update"}, kubetest.Verbs(c, "leases"), "no read more than before")
	got, ok, err := l.LastRun(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, *last, got)

	require.NoError(t, c.CoordinationV1().Leases(operator.Namespace).Delete(ctx, leaseName, metav1.DeleteOptions{}))
	_, ok, err = l.LastRun(ctx)
	require.NoError(t, err)
	assert.False(t, ok, "no Lease: no run yet")
}

// TestLastRunReadErrorIsNotARecord: when the API server fails the read,
// LastRun says so (an error), never "no run" or a record.
func TestLastRunReadErrorIsNotARecord(t *testing.T) {
	c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: operator.Namespace}})
	c.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
	})
	_, ok, err := newLease(c, "pod-1", time.Now()).LastRun(context.Background())
	require.Error(t, err)
	assert.True(t, apierrors.IsInternalError(err))
	assert.False(t, ok)
}
