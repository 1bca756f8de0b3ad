package kube_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/job/operator"
)

const leaseName = "registration-engine"

var (
	leasesGR = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	t0       = time.Date(2026, 11, 30, 18, 0, 0, 0, time.UTC)
)

func newLease(c *fake.Clientset, holder string, now time.Time) *kube.Lease {
	return &kube.Lease{
		Leases: kubetest.Typed(c), Namespace: operator.Namespace, Name: leaseName,
		Holder: holder, Duration: 10 * time.Minute,
		Clock: clocktesting.NewFakePassiveClock(now),
	}
}

// heldLease is a Lease that holder renewed at renewed for 10 minutes.
func heldLease(holder string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: operator.Namespace, ResourceVersion: "7"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			LeaseDurationSeconds: ptr.To[int32](600),
			AcquireTime:          ptr.To(metav1.NewMicroTime(renewed)),
			RenewTime:            ptr.To(metav1.NewMicroTime(renewed)),
			LeaseTransitions:     ptr.To[int32](3),
		},
	}
}

func getLease(t *testing.T, c *fake.Clientset) *coordinationv1.Lease {
	t.Helper()
	le, err := c.CoordinationV1().Leases(operator.Namespace).Get(context.Background(), leaseName, metav1.GetOptions{})
	require.NoError(t, err)
	return le
}

func holderIdentity(le *coordinationv1.Lease) string {
	if le.Spec.HolderIdentity == nil {
		return ""
	}
	return *le.Spec.HolderIdentity
}

func TestLeaseAcquire(t *testing.T) {
	tests := map[string]struct {
		existing *coordinationv1.Lease
		now      time.Time
		actions  []string
		// held names the holder in the expected *LeaseHeldError; empty
		// means the Lease is ours.
		held        string
		transitions int32
		// jobUID is this run's Job (JOB_UID); empty: a run outside a Job.
		jobUID string
	}{
		"absent: created by apply": {
			now:     t0,
			actions: []string{"get", kubetest.ApplyVerb},
		},
		"free (released by the last run): taken with an update": {
			existing: func() *coordinationv1.Lease {
				le := heldLease("pod-a", t0.Add(-time.Minute))
				le.Spec.HolderIdentity = nil
				return le
			}(),
			now:         t0,
			actions:     []string{"get", "update"},
			transitions: 4,
		},
		"held by another run, not expired": {
			existing: heldLease("pod-a", t0.Add(-time.Minute)),
			now:      t0,
			actions:  []string{"get"},
			held:     "pod-a",
		},
		"held by another run, expired: taken over": {
			existing:    heldLease("pod-a", t0.Add(-11*time.Minute)),
			now:         t0,
			actions:     []string{"get", "update"},
			transitions: 4,
		},
		"held by a dead pod of this Job, not expired: this Job's retry takes it over": {
			existing: func() *coordinationv1.Lease {
				le := heldLease("job-1-aaaaa", t0.Add(-time.Minute))
				le.Annotations = map[string]string{kube.AnnotationLeaseJobUID: "uid-1", kube.AnnotationLeaseJobName: "job-1"}
				return le
			}(),
			now:         t0,
			jobUID:      "uid-1",
			actions:     []string{"get", "update"},
			transitions: 4,
		},
		"held by a pod of another Job, not expired: skipped": {
			existing: func() *coordinationv1.Lease {
				le := heldLease("job-0-aaaaa", t0.Add(-time.Minute))
				le.Annotations = map[string]string{kube.AnnotationLeaseJobUID: "uid-0", kube.AnnotationLeaseJobName: "job-0"}
				return le
			}(),
			now:     t0,
			jobUID:  "uid-1",
			actions: []string{"get"},
			held:    "job-0-aaaaa",
		},
		"held by us (same pod): renewed": {
			existing:    heldLease("pod-b", t0.Add(-time.Minute)),
			now:         t0,
			actions:     []string{"get", "update"},
			transitions: 3,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientset()
			if tc.existing != nil {
				require.NoError(t, c.Tracker().Add(tc.existing))
			}
			l := newLease(c, "pod-b", tc.now)
			if tc.jobUID != "" {
				l.JobName, l.JobUID = "job-1", tc.jobUID
			}

			release, _, err := l.Acquire(context.Background())

			assert.Equal(t, tc.actions, kubetest.Verbs(c, "leases"))
			if tc.held != "" {
				require.ErrorIs(t, err, kube.ErrLeaseHeld)
				assert.False(t, failure.IsPermanent(err))
				var held *kube.LeaseHeldError
				require.ErrorAs(t, err, &held)
				assert.Equal(t, tc.held, held.Holder)
				assert.Equal(t, tc.existing.Spec.RenewTime.Add(10*time.Minute), held.Until)
				assert.Nil(t, release)
				assert.Equal(t, tc.held, holderIdentity(getLease(t, c)), "the holder's Lease is untouched")
				return
			}
			require.NoError(t, err)
			require.NotNil(t, release)
			got := getLease(t, c)
			assert.Equal(t, "pod-b", holderIdentity(got))
			assert.Equal(t, int32(720), *got.Spec.LeaseDurationSeconds, "the run deadline and LeaseMargin, judged on another node's clock")
			if tc.jobUID != "" {
				assert.Equal(t, map[string]string{kube.AnnotationLeaseJobUID: tc.jobUID, kube.AnnotationLeaseJobName: "job-1"}, got.Annotations, "the Lease names the Job")
			}
			assert.True(t, got.Spec.RenewTime.Time.Equal(tc.now))
			assert.True(t, got.Spec.AcquireTime.Time.Equal(tc.now))
			if tc.transitions != 0 {
				assert.Equal(t, tc.transitions, *got.Spec.LeaseTransitions)
			}
			for _, a := range c.Actions() {
				if u, ok := a.(k8stesting.UpdateAction); ok {
					assert.Equal(t, "7", u.GetObject().(*coordinationv1.Lease).ResourceVersion, "the takeover carries the resourceVersion it read")
				}
			}
		})
	}
}

// Two runs that both saw no Lease: the second apply conflicts with the
// first one's fields (a field manager per holder) instead of overwriting.
func TestLeaseCreateRaceLosesToFirstCreator(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	_, _, err := newLease(c, "pod-a", t0).Acquire(ctx)
	require.NoError(t, err)

	// pod-b read before pod-a created it.
	var once sync.Once
	c.PrependReactor("get", "leases", func(k8stesting.Action) (handled bool, ret runtime.Object, err error) {
		once.Do(func() { handled, err = true, apierrors.NewNotFound(leasesGR, leaseName) })
		return handled, nil, err
	})
	_, _, err = newLease(c, "pod-b", t0.Add(time.Second)).Acquire(ctx)

	require.ErrorIs(t, err, kube.ErrLeaseHeld)
	var held *kube.LeaseHeldError
	require.ErrorAs(t, err, &held)
	assert.Equal(t, "pod-a", held.Holder)
	assert.Equal(t, "pod-a", holderIdentity(getLease(t, c)))
}

// Two runs taking over the same expired Lease: the loser's update conflicts.
func TestLeaseTakeoverConflict(t *testing.T) {
	c := fake.NewClientset(heldLease("pod-a", t0.Add(-time.Hour)))
	c.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(leasesGR, leaseName, errors.New("the object has been modified"))
	})

	release, _, err := newLease(c, "pod-b", t0).Acquire(context.Background())

	require.ErrorIs(t, err, kube.ErrLeaseHeld)
	assert.Nil(t, release)
}

func TestLeaseForbidden(t *testing.T) {
	c := fake.NewClientset()
	c.PrependReactor("patch", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(leasesGR, leaseName, errors.New(`cannot create resource "leases"`))
	})

	_, _, err := newLease(c, "pod-b", t0).Acquire(context.Background())

	require.ErrorIs(t, err, kube.ErrForbidden)
	assert.True(t, failure.IsPermanent(err))
	var fe *kube.ForbiddenError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "leases/"+leaseName, fe.Resource)
	assert.Contains(t, fe.Verbs, "create")
}

func TestLeaseRequiresHolder(t *testing.T) {
	l := newLease(fake.NewClientset(), "", t0)
	_, _, err := l.Acquire(context.Background())
	require.Error(t, err)
	assert.True(t, failure.IsPermanent(err))
}

func TestLeaseRelease(t *testing.T) {
	tests := map[string]struct {
		// cancel the run's context before releasing, as a SIGTERM or the
		// run deadline does.
		cancelled bool
		// takenBy makes another run take the Lease over before release.
		takenBy string
		holder  string
	}{
		"after a failed run":           {holder: ""},
		"with the run's ctx cancelled": {cancelled: true, holder: ""},
		"after another run took over":  {takenBy: "pod-c", holder: "pod-c"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientset()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			release, _, err := newLease(c, "pod-b", t0).Acquire(ctx)
			require.NoError(t, err)
			if tc.takenBy != "" {
				le := getLease(t, c)
				le.Spec.HolderIdentity = ptr.To(tc.takenBy)
				_, err := c.CoordinationV1().Leases(operator.Namespace).Update(context.Background(), le, metav1.UpdateOptions{})
				require.NoError(t, err)
			}
			if tc.cancelled {
				cancel()
			}

			err = release(ctx, nil)
			require.NoError(t, err)

			got := getLease(t, c)
			assert.Equal(t, tc.holder, holderIdentity(got))
			// The next run gets the Lease at once, without waiting for
			// expiry.
			if tc.holder == "" {
				_, _, err := newLease(c, "pod-d", t0.Add(time.Minute)).Acquire(context.Background())
				assert.NoError(t, err)
			}
		})
	}
}

func TestLeaseReleaseRetriesConflict(t *testing.T) {
	c := fake.NewClientset()
	release, _, err := newLease(c, "pod-b", t0).Acquire(context.Background())
	require.NoError(t, err)
	var once sync.Once
	c.PrependReactor("update", "leases", func(k8stesting.Action) (handled bool, ret runtime.Object, err error) {
		once.Do(func() { handled, err = true, apierrors.NewConflict(leasesGR, leaseName, errors.New("modified")) })
		return handled, nil, err
	})

	err = release(context.Background(), nil)
	require.NoError(t, err)

	assert.Empty(t, holderIdentity(getLease(t, c)))
}

func TestLeaseFieldManagerFitsAndDiffers(t *testing.T) {
	long := func(suffix string) string {
		b := make([]byte, 200)
		for i := range b {
			b[i] = 'a'
		}
		return string(b) + suffix
	}
	a := kube.FieldManagerOf(&kube.Lease{Holder: long("1")})
	b := kube.FieldManagerOf(&kube.Lease{Holder: long("2")})
	assert.LessOrEqual(t, len(a), 128)
	assert.NotEqual(t, a, b)
	assert.Equal(t, kube.FieldManager+"/pod-x", kube.FieldManagerOf(&kube.Lease{Holder: "pod-x"}))
}

// TestLeaseRecordsTheJob: a run of a Job creates the Lease naming the Job,
// so that the Job's retry pod can take it over when this pod dies holding
// it (OOM, node loss, SIGKILL), without waiting out the run deadline.
func TestLeaseRecordsTheJob(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	first := newLease(c, "job-1-aaaaa", t0)
	first.JobName, first.JobUID = "job-1", "uid-1"
	_, _, err := first.Acquire(ctx) // and dies without releasing
	require.NoError(t, err)
	assert.Equal(t, map[string]string{kube.AnnotationLeaseJobUID: "uid-1", kube.AnnotationLeaseJobName: "job-1"}, getLease(t, c).Annotations)

	other := newLease(c, "job-2-ccccc", t0.Add(time.Minute))
	other.JobName, other.JobUID = "job-2", "uid-2"
	_, _, err = other.Acquire(ctx)
	require.ErrorIs(t, err, kube.ErrLeaseHeld, "another Job's run still waits")

	retry := newLease(c, "job-1-bbbbb", t0.Add(time.Minute))
	retry.JobName, retry.JobUID = "job-1", "uid-1"
	release, _, err := retry.Acquire(ctx)
	require.NoError(t, err, "the same Job's retry pod is not skipped by its dead predecessor")
	assert.Equal(t, "job-1-bbbbb", holderIdentity(getLease(t, c)))
	err = release(ctx, nil)
	require.NoError(t, err)
}
