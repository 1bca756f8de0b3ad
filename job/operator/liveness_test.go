package operator_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/job/operator"
)

// TestOperatorLeaseCheck: "running" is a held Lease renewed within the
// smaller of its duration and 30 s, and seen renewed again: an operator
// stopped a moment ago without releasing its Lease looks fresh, but its
// renewTime no longer moves.
func TestOperatorLeaseCheck(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, renewed time.Time, secs int32) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: operator.LeaseName, Namespace: operator.LeaseNamespace},
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
	}{
		"renewed 2 s ago, and again":                                    {lease: lease("scc-operator-7d9", now.Add(-2*time.Second), 45), renews: true, running: true},
		"renewed 2 s ago, then never again (stopped without releasing)": {lease: lease("scc-operator-7d9", now.Add(-2*time.Second), 45)},
		"renewed 40 s ago: within its 45 s, beyond the 30 s window":     {lease: lease("scc-operator-7d9", now.Add(-40*time.Second), 45), renews: true},
		"CATTLE_DEV_MODE's 45 h does not hide a dead operator":          {lease: lease("scc-operator-7d9", now.Add(-time.Hour), 45*3600), renews: true},
		"a short lease duration is the window":                          {lease: lease("scc-operator-7d9", now.Add(-12*time.Second), 10), renews: true},
		"released by a graceful stop":                                   {lease: lease("", now.Add(-5*time.Minute), 1)},
		"absent":                                                        {},
	}
	// Each says who held the Lease and when it was last renewed.
	msgs := testkit.NewMessages(t)
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
			o := &operator.LeaderLease{Leases: kubetest.Typed(c), Clock: clocktesting.NewFakePassiveClock(now), Observe: 200 * time.Millisecond, Interval: 10 * time.Millisecond}
			_, err := o.Check(context.Background())
			if tc.running {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, operator.ErrOperatorNotRunning)
			msgs.Add(name, err)
		})
	}
}
