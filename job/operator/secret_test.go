package operator_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/redact"
)

var secretsGR = schema.GroupResource{Resource: "secrets"}

// operatorSecret is the Secret after rancher/scc-operator adopted it: its
// labels, salt and annotation, written by its own Update.
func operatorSecret(r operator.Values) *corev1.Secret {
	data := map[string][]byte{}
	for k, v := range r.Data() {
		data[k] = []byte(v)
	}
	data["operatorNote"] = []byte("kept")
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: operator.SecretName, Namespace: operator.Namespace,
			Labels: map[string]string{
				"app.kubernetes.io/managed-by":      "rancher-scc-operator",
				"scc.cattle.io/managed-by":          "rancher-scc-operator_secret-broker",
				"scc.cattle.io/instance-salt":       "s4lt",
				"scc.cattle.io/related-name-suffix": "abc123",
				"scc.cattle.io/scc-hash":            "0123456789abcdef",
			},
			Annotations: map[string]string{"scc.cattle.io/last-processed": "2026-11-30T00:00:00Z"},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
}

func newStore(c *fake.Clientset, s *testkit.Sleeps) *operator.SecretStore {
	return &operator.SecretStore{Secrets: kubetest.Typed(c), Namespace: operator.Namespace, Name: operator.SecretName, Sleep: s.Sleep}
}

func getSecret(t *testing.T, c *fake.Clientset) *corev1.Secret {
	t.Helper()
	got, err := c.CoreV1().Secrets(operator.Namespace).Get(context.Background(), operator.SecretName, metav1.GetOptions{})
	require.NoError(t, err)
	return got
}

func assertData(t *testing.T, want operator.Values, got *corev1.Secret) {
	t.Helper()
	for k, v := range want.Data() {
		assert.Equal(t, v, string(got.Data[k]), "key %s", k)
	}
	assert.Equal(t, corev1.SecretTypeOpaque, got.Type)
}

func TestSecretStoreWrite(t *testing.T) {
	old := testValues()
	next := old
	next.RegCode = "NEW-CODE"
	next.CertPEM = []byte("-----BEGIN CERTIFICATE-----\nMIIBrotated\n-----END CERTIFICATE-----\n")

	tests := map[string]struct {
		// existing is created before the run by manager (a POST or an
		// Update, as kubectl, the Python engine or the operator do).
		existing *corev1.Secret
		manager  string
		write    operator.Values
		changed  bool
		actions  []string
		check    func(t *testing.T, got *corev1.Secret)
	}{
		"absent: created by apply": {
			write:   old,
			changed: true,
			actions: []string{"get", kubetest.ApplyVerb},
			check: func(t *testing.T, got *corev1.Secret) {
				assert.Empty(t, got.Labels, "we set no labels, least of all managed-by")
				assert.Empty(t, got.Annotations)
				require.Len(t, got.ManagedFields, 1)
				assert.Equal(t, kube.FieldManager, got.ManagedFields[0].Manager)
				assert.Equal(t, metav1.ManagedFieldsOperationApply, got.ManagedFields[0].Operation)
			},
		},
		"unchanged: one GET, no write": {
			existing: operatorSecret(old),
			manager:  "rancher-scc-operator",
			write:    old,
			changed:  false,
			actions:  []string{"get"},
		},
		"changed: only our keys, the operator's labels, salt and keys stay": {
			existing: operatorSecret(old),
			manager:  "rancher-scc-operator",
			write:    next,
			changed:  true,
			actions:  []string{"get", kubetest.ApplyVerb},
			check: func(t *testing.T, got *corev1.Secret) {
				want := operatorSecret(old)
				assert.Equal(t, want.Labels, got.Labels)
				assert.Equal(t, want.Annotations, got.Annotations)
				assert.Equal(t, "kept", string(got.Data["operatorNote"]))
				managers := map[string]bool{}
				for _, mf := range got.ManagedFields {
					managers[mf.Manager] = true
				}
				assert.True(t, managers["rancher-scc-operator"], "the operator still owns its labels")
				assert.True(t, managers[kube.FieldManager])
			},
		},
		"created earlier by kubectl with a POST: taken over, extra keys stay": {
			existing: func() *corev1.Secret {
				s := operatorSecret(old)
				s.Labels, s.Annotations = nil, nil
				return s
			}(),
			manager: "kubectl-create",
			write:   next,
			changed: true,
			actions: []string{"get", kubetest.ApplyVerb},
			check: func(t *testing.T, got *corev1.Secret) {
				assert.Equal(t, "kept", string(got.Data["operatorNote"]))
				assert.Empty(t, got.Labels)
			},
		},
		"one key missing: written": {
			existing: func() *corev1.Secret {
				s := operatorSecret(old)
				delete(s.Data, operator.KeyInstanceData)
				return s
			}(),
			manager: "rancher-scc-operator",
			write:   old,
			changed: true,
			actions: []string{"get", kubetest.ApplyVerb},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := fake.NewClientset()
			if tc.existing != nil {
				_, err := c.CoreV1().Secrets(operator.Namespace).Create(ctx, tc.existing, metav1.CreateOptions{FieldManager: tc.manager})
				require.NoError(t, err)
				c.ClearActions()
			}
			s := &testkit.Sleeps{}

			changed, err := newStore(c, s).Write(ctx, tc.write)

			require.NoError(t, err)
			assert.Equal(t, tc.changed, changed)
			assert.Equal(t, tc.actions, kubetest.Verbs(c, "secrets"))
			assert.Empty(t, s.All(), "no retries")
			got := getSecret(t, c)
			assertData(t, tc.write, got)
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

// A second run with the same registration writes nothing, whatever the first
// one created.
func TestSecretStoreSecondRunIsNoop(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	store := newStore(c, &testkit.Sleeps{})
	changed, err := store.Write(ctx, testValues())
	require.NoError(t, err)
	require.True(t, changed)
	c.ClearActions()

	changed, err = store.Write(ctx, testValues())
	require.NoError(t, err)
	assert.False(t, changed)
	assert.Equal(t, []string{"get"}, kubetest.Verbs(c, "secrets"))
}

func TestSecretStoreRetries(t *testing.T) {
	conflict := apierrors.NewConflict(secretsGR, operator.SecretName, errors.New("the object has been modified"))
	throttled := apierrors.NewTooManyRequests("slow down", 1)
	unavailable := apierrors.NewServiceUnavailable("etcd leader changed")
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	forbidden := apierrors.NewForbidden(secretsGR, operator.SecretName, errors.New(`User "system:serviceaccount:cattle-scc-system:registration-engine" cannot get resource "secrets"`))
	unauthorized := apierrors.NewUnauthorized("token expired")

	tests := map[string]struct {
		verb     string  // the request that fails
		failures []error // returned in order; nil entries and the rest pass through
		always   error   // returned for every request when set
		check    func(t *testing.T, err error)
		sleeps   []time.Duration
		requests int // requests of verb
	}{
		"409 then success": {
			verb: "patch", failures: []error{conflict},
			sleeps: []time.Duration{time.Second}, requests: 2,
		},
		"503 then network error then success": {
			verb: "get", failures: []error{unavailable, refused},
			sleeps: []time.Duration{time.Second, 2 * time.Second}, requests: 3,
		},
		"429 storm: bounded, gives up transient": {
			verb: "get", always: throttled,
			sleeps: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}, requests: 5,
			check: func(t *testing.T, err error) {
				assert.ErrorIs(t, err, kube.ErrRetriesExhausted)
				assert.True(t, apierrors.IsTooManyRequests(err))
				assert.False(t, failure.IsPermanent(err))
			},
		},
		"403 on get: no retry, permanent, names verbs and resource": {
			verb: "get", always: forbidden, requests: 1,
			check: func(t *testing.T, err error) {
				assert.True(t, failure.IsPermanent(err))
				assert.ErrorIs(t, err, kube.ErrForbidden)
				assert.True(t, apierrors.IsForbidden(err))
				var fe *kube.ForbiddenError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, []string{"get", "create", "patch"}, fe.Verbs)
				assert.Equal(t, "secrets/"+operator.SecretName, fe.Resource)
				assert.Equal(t, operator.Namespace, fe.Namespace)
			},
		},
		"403 on apply: no retry, permanent": {
			verb: "patch", always: forbidden, requests: 1,
			check: func(t *testing.T, err error) {
				assert.True(t, failure.IsPermanent(err))
				assert.ErrorIs(t, err, kube.ErrForbidden)
			},
		},
		"401: no retry, token expired, not permanent": {
			verb: "get", always: unauthorized, requests: 1,
			check: func(t *testing.T, err error) {
				assert.ErrorIs(t, err, kube.ErrUnauthorized)
				assert.False(t, failure.IsPermanent(err), "a new pod gets a fresh token")
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientset()
			var mu sync.Mutex
			calls := 0
			c.PrependReactor(tc.verb, "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				defer mu.Unlock()
				calls++
				if tc.always != nil {
					return true, nil, tc.always
				}
				if calls <= len(tc.failures) && tc.failures[calls-1] != nil {
					return true, nil, tc.failures[calls-1]
				}
				return false, nil, nil
			})
			s := &testkit.Sleeps{}

			changed, err := newStore(c, s).Write(context.Background(), testValues())

			assert.Equal(t, tc.sleeps, s.All())
			assert.Equal(t, tc.requests, calls)
			if tc.check != nil {
				require.Error(t, err)
				assert.False(t, changed)
				tc.check(t, err)
				return
			}
			require.NoError(t, err)
			assert.True(t, changed)
			assertData(t, testValues(), getSecret(t, c))
		})
	}
}

func TestSecretStoreBackoffSettings(t *testing.T) {
	c := fake.NewClientset()
	c.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("boom"))
	})
	s := &testkit.Sleeps{}
	store := newStore(c, s)
	store.RetryMax, store.RetryBackoff = 4, 3

	_, err := store.Write(context.Background(), testValues())

	require.ErrorIs(t, err, kube.ErrRetriesExhausted)
	assert.Equal(t, []time.Duration{time.Second, 3 * time.Second, 9 * time.Second}, s.All())
}

// A run cancelled (SIGTERM, deadline) while backing off stops at once.
func TestSecretStoreCancelledWhileBackingOff(t *testing.T) {
	c := fake.NewClientset()
	c.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewTooManyRequests("slow down", 1)
	})
	ctx, cancel := context.WithCancel(context.Background())
	store := newStore(c, nil)
	store.Sleep = func(context.Context, time.Duration) error { cancel(); return context.Canceled }

	_, err := store.Write(ctx, testValues())

	require.ErrorIs(t, err, context.Canceled)
	assert.Len(t, kubetest.Verbs(c, "secrets"), 1)
}

func TestSecretStoreWrongType(t *testing.T) {
	ctx := context.Background()
	existing := operatorSecret(testValues())
	existing.Type = corev1.SecretTypeTLS
	c := fake.NewClientset(existing)

	_, err := newStore(c, &testkit.Sleeps{}).Write(ctx, testValues())

	require.ErrorIs(t, err, operator.ErrSecretType)
	assert.True(t, failure.IsPermanent(err))
	assert.Equal(t, []string{"get"}, kubetest.Verbs(c, "secrets"), "nothing written")
}

// A run with no registration code configured never blanks the code the
// Secret holds, whoever wrote it (also this engine's own earlier apply,
// which server-side apply would delete if the field were simply left out),
// and a first install with no code anywhere writes nothing.
func TestSecretStoreWithoutRegCode(t *testing.T) {
	configured := testValues()
	none := configured
	none.RegCode = ""
	rotated := none
	rotated.CertPEM = []byte("-----BEGIN CERTIFICATE-----\nMIIBrotated\n-----END CERTIFICATE-----\n")

	tests := map[string]struct {
		// before runs first, as this engine with a code (empty: no run).
		before   *operator.Values
		existing *corev1.Secret // created before the run by "rancher-scc-operator"
		write    operator.Values
		changed  bool
		actions  []string
		wantErr  error // nil: the Secret must keep configured.RegCode
	}{
		"operator's code, nothing else differs: kept, no write": {
			existing: operatorSecret(configured),
			write:    none,
			actions:  []string{"get"},
		},
		"operator's code, the certificate changed: kept, the rest written": {
			existing: operatorSecret(configured),
			write:    rotated,
			changed:  true,
			actions:  []string{"get", kubetest.ApplyVerb},
		},
		"our own earlier apply's code, the certificate changed: kept": {
			before:  &configured,
			write:   rotated,
			changed: true,
			actions: []string{"get", kubetest.ApplyVerb},
		},
		"first install, no code anywhere: permanent, nothing written": {
			write:   none,
			actions: []string{"get"},
			wantErr: operator.ErrNoRegCode,
		},
		"Secret with an empty code: permanent, nothing written": {
			existing: func() *corev1.Secret {
				s := operatorSecret(configured)
				s.Data[operator.KeyRegCode] = nil
				return s
			}(),
			write:   none,
			actions: []string{"get"},
			wantErr: operator.ErrNoRegCode,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := fake.NewClientset()
			if tc.existing != nil {
				_, err := c.CoreV1().Secrets(operator.Namespace).Create(ctx, tc.existing, metav1.CreateOptions{FieldManager: "rancher-scc-operator"})
				require.NoError(t, err)
			}
			store := newStore(c, &testkit.Sleeps{})
			store.Redact = redact.New()
			if tc.before != nil {
				_, err := store.Write(ctx, *tc.before)
				require.NoError(t, err)
			}
			before, _ := c.CoreV1().Secrets(operator.Namespace).Get(ctx, operator.SecretName, metav1.GetOptions{})
			c.ClearActions()

			// Check, which runs before CoreDNS is edited, says what Write
			// will say about the code, from one read.
			checkErr := store.Check(ctx, tc.write)
			if tc.wantErr != nil {
				require.ErrorIs(t, checkErr, tc.wantErr)
				assert.True(t, failure.IsPermanent(checkErr))
			} else {
				require.NoError(t, checkErr)
			}
			assert.Equal(t, []string{"get"}, kubetest.Verbs(c, "secrets"), "Check reads the Secret once")
			c.ClearActions()

			changed, err := store.Write(ctx, tc.write)

			assert.Equal(t, tc.actions, kubetest.Verbs(c, "secrets"))
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.True(t, failure.IsPermanent(err))
				assert.False(t, changed)
				after, _ := c.CoreV1().Secrets(operator.Namespace).Get(ctx, operator.SecretName, metav1.GetOptions{})
				assert.Equal(t, before, after, "nothing written")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.changed, changed)
			got := getSecret(t, c)
			assert.Equal(t, configured.RegCode, string(got.Data[operator.KeyRegCode]), "the registration code must survive a run that has none")
			assert.Equal(t, "refused: "+redact.Redacted, store.Redact.String("refused: "+configured.RegCode), "the kept code is redacted like a configured one")
			assert.Equal(t, string(tc.write.CertPEM), string(got.Data[operator.KeyRegistrationURLCert]))
			if tc.existing != nil {
				assert.Equal(t, tc.existing.Labels, got.Labels)
			}
		})
	}
}

// TestSecretStoreCheck: with a code configured Check sends nothing; a read
// it is refused fails it permanently, naming what the Role must allow.
func TestSecretStoreCheck(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	require.NoError(t, newStore(c, &testkit.Sleeps{}).Check(ctx, testValues()))
	assert.Empty(t, kubetest.Verbs(c, "secrets"), "a configured code needs no read")

	c.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("secrets"), operator.SecretName, errors.New("RBAC"))
	})
	none := testValues()
	none.RegCode = ""
	err := newStore(c, &testkit.Sleeps{}).Check(ctx, none)
	require.ErrorIs(t, err, kube.ErrForbidden)
	assert.True(t, failure.IsPermanent(err))
	var forbidden *kube.ForbiddenError
	require.ErrorAs(t, err, &forbidden)
	assert.Equal(t, []string{"get"}, forbidden.Verbs, "Check only reads")
	assert.Equal(t, "secrets/"+operator.SecretName, forbidden.Resource)
	assert.Equal(t, operator.Namespace, forbidden.Namespace)
}
