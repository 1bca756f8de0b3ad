package kube_test

import (
	"context"
	"encoding/json"
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

// TestSaveRun: a run's record costs the API server one read and one write
// of the Lease, and carries over the counts of the record it replaces; on a
// conflict (another writer between the read and the write) it reads again
// and carries over that writer's counts, not the stale ones.
func TestSaveRun(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	failed := kube.RunRecord{Time: t0, Outcome: "failed", ExitCode: 1, Phase: "find-update-server"}

	t.Run("one read and one write, counts carried over", func(t *testing.T) {
		c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: operator.Namespace}})
		l := newLease(c, "pod-1", t0)
		_, err := l.SaveRun(ctx, failed)
		require.NoError(t, err)
		c.ClearActions()

		second := failed
		second.Time = t0.Add(18 * time.Hour)
		got, err := l.SaveRun(ctx, second)
		require.NoError(t, err)
		assert.Equal(t, 2, got.ConsecutiveFailures)
		assert.Equal(t, t0, *got.FailingSince, "failing since the first")
		assert.Equal(t, []string{"get", "update"}, kubetest.Verbs(c, "leases"))
		assert.Equal(t, got, readRunRecord(t, c))
	})

	t.Run("a conflict reads again and carries over the other writer's counts", func(t *testing.T) {
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
				Annotations: map[string]string{kube.AnnotationLastRun: `{"time":"2026-11-30T10:00:00Z","outcome":"failed","exitCode":1,"consecutiveFailures":4,"failingSince":"2026-11-28T10:00:00Z"}`}}}
			require.NoError(t, c.Tracker().Update(coordinationv1.SchemeGroupVersion.WithResource("leases"), other, operator.Namespace))
			return true, nil, apierrors.NewConflict(leasesGR, leaseName, nil)
		})
		got, err := l.SaveRun(ctx, failed)
		require.NoError(t, err)
		assert.Equal(t, 5, got.ConsecutiveFailures)
		assert.Equal(t, time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC), got.FailingSince.UTC())
		assert.Equal(t, got, readRunRecord(t, c))
	})
}

func readRunRecord(t *testing.T, c *fake.Clientset) kube.RunRecord {
	t.Helper()
	le, err := c.CoordinationV1().Leases(operator.Namespace).Get(context.Background(), leaseName, metav1.GetOptions{})
	require.NoError(t, err)
	rec, ok, err := kube.ParseRunRecord(le.Annotations)
	require.NoError(t, err)
	require.True(t, ok)
	return rec
}

// TestReleaseRecordsTheRun: a run that holds the Lease records its verdict
// with the release, in one read and one write for both; on a Lease another
// run has taken over, the record is still written and that run keeps the
// Lease.
func TestReleaseRecordsTheRun(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	prev := kube.RunRecord{Time: t0.Add(-18 * time.Hour), Outcome: "failed", ExitCode: 1, ConsecutiveFailures: 1, FailingSince: &t0}
	raw, err := json.Marshal(prev)
	require.NoError(t, err)

	for _, takenOver := range []bool{false, true} {
		t.Run(map[bool]string{false: "held: released and recorded", true: "taken over: recorded, the holder kept"}[takenOver], func(t *testing.T) {
			c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: operator.Namespace,
				Annotations: map[string]string{kube.AnnotationLastRun: string(raw)}}})
			release, _, err := newLease(c, "pod-b", t0).Acquire(ctx)
			require.NoError(t, err)
			if takenOver {
				le := getLease(t, c)
				le.Spec.HolderIdentity = ptr.To("pod-c")
				_, err := c.CoordinationV1().Leases(operator.Namespace).Update(ctx, le, metav1.UpdateOptions{})
				require.NoError(t, err)
			}
			c.ClearActions()

			got, err := release(ctx, &kube.RunRecord{Time: t0, Outcome: "registered"})

			require.NoError(t, err)
			assert.Equal(t, []string{"get", "update"}, kubetest.Verbs(c, "leases"))
			assert.Zero(t, got.ConsecutiveFailures, "a success resets the count")
			require.NotNil(t, got.LastSuccess)
			assert.Equal(t, got, readRunRecord(t, c))
			want := ""
			if takenOver {
				want = "pod-c"
			}
			assert.Equal(t, want, holderIdentity(getLease(t, c)))
		})
	}
}

// TestAcquireHandsOverTheLastRecord: the run that takes the Lease gets the
// record of the run before with the same read, so that it can judge its own
// failure (first contact or not, failing since when) without another
// request; LastRun reads it for the retry CronJob's runs.
func TestAcquireHandsOverTheLastRecord(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: operator.Namespace}})
	l := newLease(c, "pod-1", t0)
	_, last, err := l.Acquire(ctx)
	require.NoError(t, err)
	assert.Nil(t, last, "no run recorded yet")
	_, ok, err := l.LastRun(ctx)
	require.NoError(t, err)
	assert.False(t, ok)

	next := t0.Add(10 * time.Minute)
	_, err = l.SaveRun(ctx, kube.RunRecord{Time: t0, Outcome: "failed", ExitCode: 1, Cause: kube.CauseSettling, NextAttempt: &next})
	require.NoError(t, err)
	c.ClearActions()
	_, last, err = newLease(c, "pod-2", t0.Add(time.Hour)).Acquire(ctx)
	require.NoError(t, err)
	require.NotNil(t, last)
	assert.Equal(t, kube.CauseSettling, last.Cause)
	assert.Equal(t, 1, last.ConsecutiveFailures)
	assert.Equal(t, next, *last.NextAttempt)
	assert.Equal(t, []string{"get", "update"}, kubetest.Verbs(c, "leases"), "no read more than before")
	rec, ok, err := l.LastRun(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, *last, rec)
}
