package kube_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/providers/failure"
)

func recreateRegistration() kube.Registration {
	return kube.Registration{URL: "https://smt-azure.susecloud.net", RegCode: "CODE-1", InstanceData: "<document>{}</document>", CertPEM: []byte("PEM")}
}

// failedSecret is scc-registration as the operator leaves it: adopted, with
// its finalizer.
func failedSecret(r kube.Registration) *corev1.Secret {
	s := operatorSecret(r)
	s.UID, s.ResourceVersion = "uid-1", "41"
	s.Finalizers = []string{"wrangler.cattle.io/prime-registration-secrets-remove"}
	return s
}

func countVerb(c *fake.Clientset, verb string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == "secrets" {
			n++
		}
	}
	return n
}

// TestSecretRecreate: the Secret the report was read from is deleted (and
// only that one), and once gone written afresh with the run's values; a
// changed Secret is never deleted; one the finalizer holds is never written
// over.
func TestSecretRecreate(t *testing.T) {
	ctx := context.Background()

	t.Run("deleted, gone, written afresh without the operator's labels", func(t *testing.T) {
		r := recreateRegistration()
		c := fake.NewClientset(failedSecret(r))
		st := newStore(c, &testkit.Sleeps{})
		res, err := st.Recreate(ctx, r, "uid-1", "41", time.Second)
		require.NoError(t, err)
		assert.True(t, res.Deleted)
		assert.Equal(t, 1, countVerb(c, "delete"))
		got := getSecret(t, c)
		assert.Equal(t, "CODE-1", string(got.Data[kube.KeyRegCode]))
		assert.NotContains(t, got.Labels, kube.LabelSalt, "a new Secret: the operator salts it afresh, so a new Registration")
		assert.NotContains(t, got.Labels, "app.kubernetes.io/managed-by")
	})

	t.Run("no code configured: the deleted Secret's code is written again", func(t *testing.T) {
		r := recreateRegistration()
		c := fake.NewClientset(failedSecret(r))
		noCode := r
		noCode.RegCode = ""
		_, err := newStore(c, &testkit.Sleeps{}).Recreate(ctx, noCode, "uid-1", "41", time.Second)
		require.NoError(t, err)
		assert.Equal(t, "CODE-1", string(getSecret(t, c).Data[kube.KeyRegCode]))
	})

	t.Run("changed since read: nothing deleted", func(t *testing.T) {
		r := recreateRegistration()
		c := fake.NewClientset(failedSecret(r))
		_, err := newStore(c, &testkit.Sleeps{}).Recreate(ctx, r, "uid-1", "40", time.Second)
		require.ErrorIs(t, err, kube.ErrSecretChanged)
		assert.False(t, failure.IsPermanent(err), "the next run reads afresh")
		assert.Equal(t, 0, countVerb(c, "delete"))
		assert.Equal(t, "uid-1", string(getSecret(t, c).UID))
	})

	t.Run("the delete's precondition failing is a change, not an error to retry", func(t *testing.T) {
		r := recreateRegistration()
		c := fake.NewClientset(failedSecret(r))
		c.PrependReactor("delete", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
			d := a.(k8stesting.DeleteAction)
			assert.Equal(t, types.UID("uid-1"), *d.GetDeleteOptions().Preconditions.UID)
			assert.Equal(t, "41", *d.GetDeleteOptions().Preconditions.ResourceVersion)
			return true, nil, apierrors.NewConflict(secretsGR, kube.SecretName, errors.New("Precondition failed: UID in precondition: uid-1, UID in object meta: uid-9"))
		})
		_, err := newStore(c, &testkit.Sleeps{}).Recreate(ctx, r, "uid-1", "41", time.Second)
		require.ErrorIs(t, err, kube.ErrSecretChanged)
	})

	t.Run("held by the finalizer: ErrSecretTerminating, never written over, and the next Write refuses too", func(t *testing.T) {
		r := recreateRegistration()
		c := fake.NewClientset(failedSecret(r))
		c.PrependReactor("delete", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			s := failedSecret(r)
			s.DeletionTimestamp = ptr.To(metav1.NewTime(time.Now()))
			require.NoError(t, c.Tracker().Update(corev1.SchemeGroupVersion.WithResource("secrets"), s, kube.Namespace))
			return true, nil, nil
		})
		st := newStore(c, &testkit.Sleeps{})
		st.PollInterval = 10 * time.Millisecond
		_, err := st.Recreate(ctx, r, "uid-1", "41", 100*time.Millisecond)
		require.ErrorIs(t, err, kube.ErrSecretTerminating)
		assert.True(t, failure.IsPermanent(err))
		assert.Contains(t, err.Error(), "wrangler.cattle.io/prime-registration-secrets-remove", "says what holds it")
		assert.Equal(t, 0, countVerb(c, "patch"), "never written over")

		other := r
		other.RegCode = "CODE-2"
		_, err = st.Write(ctx, other)
		require.ErrorIs(t, err, kube.ErrSecretTerminating, "a later run says so too")
		assert.Equal(t, 0, countVerb(c, "patch"))
	})
}

// TestOperatorLeaseCheck: "running" is a held Lease renewed within the
// smaller of its duration and 30 s, and seen renewed again: an operator
// stopped a moment ago without releasing its Lease looks fresh, but its
// renewTime no longer moves.
func TestOperatorLeaseCheck(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, renewed time.Time, secs int32) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: kube.OperatorLeaseName, Namespace: kube.OperatorLeaseNamespace},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(secs),
				RenewTime: ptr.To(metav1.NewMicroTime(renewed)),
			},
		}
	}
	tests := map[string]struct {
		lease   *coordinationv1.Lease
		renews  bool // the holder renews it while Check watches
		running bool
		says    string
	}{
		"renewed 2 s ago, and again": {lease: lease("scc-operator-7d9", now.Add(-2*time.Second), 45), renews: true, running: true},
		"renewed 2 s ago, then never again (stopped without releasing)": {lease: lease("scc-operator-7d9", now.Add(-2*time.Second), 45),
			says: "held by scc-operator-7d9 and last renewed 2s ago, was not renewed again within 200ms"},
		"renewed 40 s ago: within its 45 s, beyond the 30 s window": {lease: lease("scc-operator-7d9", now.Add(-40*time.Second), 45), renews: true, says: "last renewed by scc-operator-7d9 40s ago, more than 30s"},
		"CATTLE_DEV_MODE's 45 h does not hide a dead operator":      {lease: lease("scc-operator-7d9", now.Add(-time.Hour), 45*3600), renews: true, says: "1h0m0s ago"},
		"a short lease duration is the window":                      {lease: lease("scc-operator-7d9", now.Add(-12*time.Second), 10), renews: true, says: "more than 10s"},
		"released by a graceful stop":                               {lease: lease("", now.Add(-5*time.Minute), 1), says: "held by nobody"},
		"absent":                                                    {says: "does not exist"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientset()
			if tc.lease != nil {
				c = fake.NewClientset(tc.lease)
			}
			if tc.renews {
				gets := 0
				c.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
					gets++
					le := tc.lease.DeepCopy()
					le.Spec.RenewTime = ptr.To(metav1.NewMicroTime(le.Spec.RenewTime.Add(time.Duration(gets-1) * 2 * time.Second)))
					return true, le, nil
				})
			}
			o := &kube.OperatorLease{Leases: kubetest.Typed(c), Clock: clocktesting.NewFakePassiveClock(now), Observe: 200 * time.Millisecond, Interval: 10 * time.Millisecond}
			_, err := o.Check(context.Background())
			if tc.running {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, kube.ErrOperatorNotRunning)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}

// TestRecoveryRecordOnTheLease: the record survives on the engine's Lease,
// next to what the Lease itself holds, and can be cleared.
func TestRecoveryRecordOnTheLease(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(heldLease("pod-1", t0))
	l := newLease(c, "pod-1", t0)
	_, ok, err := l.LoadRecovery(ctx)
	require.NoError(t, err)
	assert.False(t, ok)

	rec := kube.RecoveryRecord{Attempts: 2, Time: t0, Cause: "HTTP 503 Service Unavailable", Message: "API error (code: 503)", Outcome: kube.RecoveryFailed, Target: kube.TargetHash("CODE", "https://x")}
	require.NoError(t, l.SaveRecovery(ctx, &rec))
	got, ok, err := l.LoadRecovery(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, rec, got)
	assert.Equal(t, "pod-1", holderIdentity(getLease(t, c)), "the Lease's spec untouched")

	assert.Equal(t, 3, got.Next(rec.Target, rec.Cause))
	assert.Equal(t, 1, got.Next(rec.Target, "connection reset"), "another cause starts afresh")
	assert.Equal(t, 1, got.Next(kube.TargetHash("CODE-2", "https://x"), rec.Cause), "a new code starts afresh")
	got.Attempts = kube.MaxRecoveries
	assert.True(t, got.Exhausted(rec.Target, rec.Cause))
	assert.False(t, got.Exhausted(kube.TargetHash("CODE", "https://y"), rec.Cause), "a new URL starts afresh")

	require.NoError(t, l.SaveRecovery(ctx, nil))
	_, ok, err = l.LoadRecovery(ctx)
	require.NoError(t, err)
	assert.False(t, ok, "cleared")
	assert.NotContains(t, kube.TargetHash("CODE", "https://x"), "CODE")
}
