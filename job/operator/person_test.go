package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/job/operator"
)

// rancherPageSecret is scc-registration as Rancher's registration page
// creates it (rancher/dashboard pkg/rancher-prime/pages/
// registration.composable.ts createSecret at 17ad8a6): no labels, type
// left to the API server's default (Opaque), data regCode and
// registrationType=online, created through Steve, whose client-go
// User-Agent makes the API server record the field manager "rancher".
func rancherPageSecret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: operator.SecretName, Namespace: operator.Namespace,
			ManagedFields: []metav1.ManagedFieldsEntry{managed(operator.RancherManager, metav1.ManagedFieldsOperationUpdate,
				`{"f:data":{".":{},"f:regCode":{},"f:registrationType":{}},"f:type":{}}`)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"regCode": []byte("PERSONS-OWN-CODE"), "registrationType": []byte("online")},
	}
}

// TestSecretStoreLeavesAPersonsRegistration: the engine never takes the
// place of a person who registers through Rancher's registration page.
// Their Secret is never written, whatever the engine's code; a Secret the
// engine left and someone deleted since is not recreated by the run that
// finds it gone (the page creates its own moments after its delete), which
// fails transient so that the Job's retry decides; a run after one that did
// not leave it (a first install, the hand-back after the person's Secret
// was deleted, that retry) creates it as always.
func TestSecretStoreLeavesAPersonsRegistration(t *testing.T) {
	left := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		secret  *corev1.Secret // nil: absent
		left    *time.Time
		wantErr error // nil: written
	}{
		"the page's Secret, after a successful run": {secret: rancherPageSecret(), left: &left, wantErr: operator.ErrSecretOtherWriter},
		"the page's Secret, during first contact":   {secret: rancherPageSecret(), wantErr: operator.ErrSecretOtherWriter},
		"deleted since the last successful run":     {left: &left, wantErr: operator.ErrSecretDeleted},
		// A first install, or the hand-back: the run that found the
		// person's Secret failed, so the run after its delete writes.
		"absent, the last run did not leave it": {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := fake.NewClientset()
			if tc.secret != nil {
				c = fake.NewClientset(tc.secret)
			}
			v := testValues()
			v.Left = tc.left
			changed, err := newStore(c, &testkit.Sleeps{}).Write(ctx, v)
			if tc.wantErr == nil {
				require.NoError(t, err)
				assert.True(t, changed)
				assertData(t, testValues(), getSecret(t, c))
				return
			}
			require.ErrorIs(t, err, tc.wantErr)
			// The person's Secret is a decision for a person (exit 2); a
			// deletion is not, and the Job's retry, seconds later, decides.
			assert.Equal(t, tc.secret != nil, failure.IsPermanent(err))
			assert.Equal(t, []string{"get"}, kubetest.Verbs(c, "secrets"), "read once, never written, never retried within the run")
			if tc.secret != nil {
				assert.Equal(t, "PERSONS-OWN-CODE", string(getSecret(t, c).Data["regCode"]), "the person's code stays")
			}
		})
	}
}

// TestPersonVerdict: the verdict on the page's Secret says what happened
// before its first "; " (status's line) and how to hand registration back.
func TestPersonVerdict(t *testing.T) {
	w := operator.FindOtherWriter(rancherPageSecret())
	require.NotNil(t, w)
	assert.True(t, w.Person)
	v := w.Verdict(operator.Namespace, operator.SecretName)
	what, next, ok := strings.Cut(v, "; ")
	require.True(t, ok, v)
	assert.Equal(t, `cattle-scc-system/scc-registration was registered by a person through Rancher's registration page with their own code (managedFields: "rancher" (Update) owns data keys regCode, registrationType), so the PAYG registration is not applied`, what)
	assert.Contains(t, next, "to hand registration back to the engine (Azure Marketplace PAYG), delete the Secret (kubectl -n cattle-scc-system delete secret scc-registration;")
	assert.Contains(t, next, "then run the engine (kubectl -n cattle-scc-system create job --from=cronjob/registration-engine registration-engine-manual)")
}
