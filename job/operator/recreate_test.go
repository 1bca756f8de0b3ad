package operator_test

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/operator"
)

func recreateRegistration() operator.Values {
	return operator.Values{URL: "https://smt-azure.susecloud.net", RegCode: "CODE-1", InstanceData: "<document>{}</document>", CertPEM: []byte("PEM")}
}

// failedSecret is scc-registration as the operator leaves it: adopted, with
// its finalizer.
func failedSecret(r operator.Values) *corev1.Secret {
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
	// What a refused recreate says is what the admin reads: compared whole
	// with testdata/messages/TestSecretRecreate.txt, the deletion's age
	// (wall clock) read as <age>.
	msgs := testkit.NewMessages(t)
	msgs.Varying = true
	add := func(name string, err error) {
		msgs.Add(name, errors.New(secretAge.ReplaceAllString(err.Error(), "(<age> ago)")))
	}

	t.Run("deleted, gone, written afresh without the operator's labels", func(t *testing.T) {
		r := recreateRegistration()
		c := fake.NewClientset(failedSecret(r))
		st := newStore(c, &testkit.Sleeps{})
		res, err := st.Recreate(ctx, r, "uid-1", "41", time.Second)
		require.NoError(t, err)
		assert.True(t, res.Deleted)
		assert.Equal(t, 1, countVerb(c, "delete"))
		got := getSecret(t, c)
		assert.Equal(t, "CODE-1", string(got.Data[operator.KeyRegCode]))
		assert.NotContains(t, got.Labels, operator.LabelSalt, "a new Secret: the operator salts it afresh, so a new Registration")
		assert.NotContains(t, got.Labels, "app.kubernetes.io/managed-by")
	})

	t.Run("no code configured: the deleted Secret's code is written again", func(t *testing.T) {
		r := recreateRegistration()
		c := fake.NewClientset(failedSecret(r))
		noCode := r
		noCode.RegCode = ""
		_, err := newStore(c, &testkit.Sleeps{}).Recreate(ctx, noCode, "uid-1", "41", time.Second)
		require.NoError(t, err)
		assert.Equal(t, "CODE-1", string(getSecret(t, c).Data[operator.KeyRegCode]))
	})

	t.Run("changed since read: nothing deleted", func(t *testing.T) {
		r := recreateRegistration()
		c := fake.NewClientset(failedSecret(r))
		_, err := newStore(c, &testkit.Sleeps{}).Recreate(ctx, r, "uid-1", "40", time.Second)
		require.ErrorIs(t, err, operator.ErrSecretChanged)
		add("changed since read", err)
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
			return true, nil, apierrors.NewConflict(secretsGR, operator.SecretName, errors.New("Precondition failed: UID in precondition: uid-1, UID in object meta: uid-9"))
		})
		_, err := newStore(c, &testkit.Sleeps{}).Recreate(ctx, r, "uid-1", "41", time.Second)
		require.ErrorIs(t, err, operator.ErrSecretChanged)
	})

	t.Run("held by the finalizer: ErrSecretTerminating, never written over, and the next Write refuses too", func(t *testing.T) {
		r := recreateRegistration()
		c := heldByFinalizer(t, r)
		st := newStore(c, &testkit.Sleeps{})
		st.PollInterval = 10 * time.Millisecond
		_, err := st.Recreate(ctx, r, "uid-1", "41", 100*time.Millisecond)
		require.ErrorIs(t, err, operator.ErrSecretTerminating)
		assert.True(t, failure.IsPermanent(err))
		add("held by the finalizer", err)
		assert.Equal(t, 0, countVerb(c, "patch"), "never written over")

		other := r
		other.RegCode = "CODE-2"
		_, err = st.Write(ctx, other)
		require.ErrorIs(t, err, operator.ErrSecretTerminating, "a later run says so too")
		add("held by the finalizer, a later Write", err)
		assert.Equal(t, 0, countVerb(c, "patch"))
	})

	t.Run("a drain during the finalizer wait is the run's end, not the finalizer's", func(t *testing.T) {
		r := recreateRegistration()
		c := heldByFinalizer(t, r)
		st := newStore(c, &testkit.Sleeps{})
		st.PollInterval = 10 * time.Millisecond
		drained := errors.New("terminated by signal")
		dctx, cancel := context.WithCancelCause(ctx)
		time.AfterFunc(50*time.Millisecond, func() { cancel(drained) })
		_, err := st.Recreate(dctx, r, "uid-1", "41", time.Hour)
		require.ErrorIs(t, err, drained, "the run's own end, which main maps to 143")
		assert.NotErrorIs(t, err, operator.ErrSecretTerminating, "not blamed on the finalizer")
		assert.False(t, failure.IsPermanent(err), "a drained run's Job retries")
		assert.Equal(t, 0, countVerb(c, "patch"), "never written over")
	})
}

// secretAge is how long ago a Secret's deletion began, as a refusal says.
var secretAge = regexp.MustCompile(`\([0-9a-zµ.]+ ago\)`)

// heldByFinalizer is a clientset whose scc-registration, once deleted,
// stays Terminating behind the operator's finalizer.
func heldByFinalizer(t *testing.T, r operator.Values) *fake.Clientset {
	c := fake.NewClientset(failedSecret(r))
	c.PrependReactor("delete", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		s := failedSecret(r)
		s.DeletionTimestamp = ptr.To(metav1.NewTime(time.Now()))
		require.NoError(t, c.Tracker().Update(corev1.SchemeGroupVersion.WithResource("secrets"), s, operator.Namespace))
		return true, nil, nil
	})
	return c
}
