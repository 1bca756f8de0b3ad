package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/job/operator"
)

// managed is a managedFields entry of manager that owns fields (JSON).
func managed(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
}

// rancherChartSecret is scc-registration as Rancher's chart renders it with
// registration.enabled (rancher/rancher chart/templates/scc-registration.yaml
// at be901b7): Helm's labels and annotations, resource-policy keep, and its
// own keys mode and certificate.
func rancherChartSecret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: operator.SecretName, Namespace: operator.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm", "app": "rancher"},
			Annotations: map[string]string{
				"meta.helm.sh/release-name": "rancher", "meta.helm.sh/release-namespace": "cattle-system",
				"helm.sh/resource-policy": "keep",
			},
			ManagedFields: []metav1.ManagedFieldsEntry{managed("helm", metav1.ManagedFieldsOperationUpdate,
				`{"f:data":{".":{},"f:mode":{},"f:regCode":{},"f:registrationUrl":{},"f:certificate":{}},"f:metadata":{"f:annotations":{}}}`)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"mode": []byte("online"), "regCode": []byte("RANCHER-CODE")},
	}
}

func TestFindOtherWriter(t *testing.T) {
	engine := managed(kube.FieldManager, metav1.ManagedFieldsOperationApply, `{"f:data":{"f:regCode":{},"f:registrationUrl":{}},"f:type":{}}`)
	tests := map[string]struct {
		secret func() *corev1.Secret
		// want is the writer's Who, "" for none.
		want string
	}{
		"Rancher's chart (Helm release rancher)": {secret: rancherChartSecret, want: `Helm release "rancher" (namespace cattle-system)`},
		"only Helm's label": {secret: func() *corev1.Secret {
			s := operatorSecret(testValues())
			s.Labels["app.kubernetes.io/managed-by"] = "Helm"
			return s
		}, want: "Helm"},
		"a GitOps controller owns data keys": {secret: func() *corev1.Secret {
			s := operatorSecret(testValues())
			s.ManagedFields = []metav1.ManagedFieldsEntry{engine, managed("argocd-controller", metav1.ManagedFieldsOperationApply, `{"f:data":{"f:regCode":{}}}`)}
			return s
		}, want: `field manager "argocd-controller"`},
		"the engine's own Secret, adopted by the operator": {secret: func() *corev1.Secret {
			s := operatorSecret(testValues())
			s.ManagedFields = []metav1.ManagedFieldsEntry{engine,
				managed("operator", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{"f:scc.cattle.io/instance-salt":{}},"f:finalizers":{}}}`)}
			return s
		}},
		// SUSE-Enceladus/cloud-registration-engine k8s.py (main ee5eae9 and
		// 4ee2871): requests' merge-patch of stringData, no fieldManager, so
		// the API server records the User-Agent's product.
		"SUSE's Python engine: taken over, not another tool": {secret: func() *corev1.Secret {
			s := operatorSecret(testValues())
			s.Labels = nil
			s.ManagedFields = []metav1.ManagedFieldsEntry{managed(operator.PythonEngineManager, metav1.ManagedFieldsOperationUpdate,
				`{"f:data":{".":{},"f:instanceData":{},"f:regCode":{},"f:registrationType":{},"f:registrationUrl":{},"f:registrationUrlCert":{}},"f:type":{}}`)}
			return s
		}},
		"a person with kubectl put the code in": {secret: func() *corev1.Secret {
			s := operatorSecret(testValues())
			s.ManagedFields = []metav1.ManagedFieldsEntry{managed("kubectl-create", metav1.ManagedFieldsOperationUpdate, `{"f:data":{"f:regCode":{}}}`)}
			return s
		}},
		"a tool that only annotates": {secret: func() *corev1.Secret {
			s := operatorSecret(testValues())
			s.ManagedFields = []metav1.ManagedFieldsEntry{managed("velero", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:annotations":{"f:backup":{}}}}`)}
			return s
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := operator.FindOtherWriter(tc.secret())
			if tc.want == "" {
				assert.Nil(t, w)
				return
			}
			require.NotNil(t, w)
			assert.Equal(t, tc.want, w.Who)
		})
	}
}

// A Secret Rancher's chart owns is never written: the run stops before any
// write with a permanent error naming the release and the choice, and
// Check (before CoreDNS is edited) says the same when it reads.
func TestSecretStoreRefusesAnotherWriter(t *testing.T) {
	ctx := context.Background()
	// What each says, the release, the annotation that shows it and the
	// choices (helm upgrade, delete, helm uninstall) among it: the golden
	// file.
	msgs := testkit.NewMessages(t)
	c := fake.NewClientset(rancherChartSecret())
	_, err := newStore(c, &testkit.Sleeps{}).Write(ctx, testValues())
	require.ErrorIs(t, err, operator.ErrSecretOtherWriter)
	assert.True(t, failure.IsPermanent(err))
	msgs.Add("Write", err)
	assert.Equal(t, []string{"get"}, kubetest.Verbs(c, "secrets"), "read once, never written, never retried")
	assert.Equal(t, "RANCHER-CODE", string(getSecret(t, c).Data["regCode"]))

	noCode := testValues()
	noCode.RegCode = ""
	err = newStore(c, &testkit.Sleeps{}).Check(ctx, noCode)
	require.ErrorIs(t, err, operator.ErrSecretOtherWriter, "Check names the other writer, not a missing code")
	assert.True(t, failure.IsPermanent(err))
	msgs.Add("Check", err)
}

// TestOtherWriterVerdictPastesSafely: the Secret's Helm annotations are
// text the engine's own token may patch, and the verdict's commands reach
// an admin (Event, log, Lease record, status) who pastes them with their
// credentials. Pasted into a shell, each command runs helm or kubectl
// once, as written, and nothing else; a release or namespace that Helm
// would not take is named, never put into a command.
func TestOtherWriterVerdictPastesSafely(t *testing.T) {
	const payload = "touch " + testkit.PasteMarker
	tests := map[string]struct {
		release, namespace string
		// wantHelm is the helm call the pasted upgrade makes; "" when the
		// verdict must name the value instead, with named.
		wantHelm, named string
	}{
		"Rancher's chart": {release: "rancher", namespace: "cattle-system",
			wantHelm: "helm upgrade rancher rancher-latest/rancher -n cattle-system --reuse-values --set registration.enabled=false"},
		"command substitution in the release":   {release: "rancher$(" + payload + ")", namespace: "cattle-system", named: "release"},
		"a semicolon in the release":            {release: "rancher; " + payload + "; #", namespace: "cattle-system", named: "release"},
		"backquotes in the release":             {release: "`" + payload + "`", namespace: "cattle-system", named: "release"},
		"a newline in the release":              {release: "rancher\n" + payload, namespace: "cattle-system", named: "release"},
		"a release name too long for Helm":      {release: strings.Repeat("r", 54), namespace: "cattle-system", named: "release"},
		"command substitution in the namespace": {release: "rancher", namespace: "cattle-system$(" + payload + ")", named: "namespace"},
		"a semicolon in the namespace":          {release: "rancher", namespace: "x;" + payload, named: "namespace"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := rancherChartSecret()
			s.Annotations["meta.helm.sh/release-name"], s.Annotations["meta.helm.sh/release-namespace"] = tc.release, tc.namespace
			w := operator.FindOtherWriter(s)
			require.NotNil(t, w)
			v := w.Verdict(operator.Namespace, operator.SecretName)

			start := strings.Index(v, "helm upgrade ")
			end := strings.Index(v, " --set registration.enabled=false")
			require.True(t, start >= 0 && end > start, v)
			upgrade := strings.Replace(v[start:end], "<its chart>", "rancher-latest/rancher", 1) + " --set registration.enabled=false"
			calls := testkit.Paste(t, upgrade)
			if tc.wantHelm != "" {
				assert.Equal(t, []string{tc.wantHelm}, calls)
			} else {
				assert.Empty(t, calls, "no helm command built from the hostile %s", tc.named)
				assert.Contains(t, v, fmt.Sprintf("names a %s that is not a valid %s name: %q", tc.named, tc.named, map[string]string{"release": tc.release, "namespace": tc.namespace}[tc.named]))
			}

			start = strings.Index(v, "kubectl -n ")
			end = strings.Index(v, "; its helm.sh/resource-policy keep")
			require.True(t, start >= 0 && end > start, v)
			assert.Equal(t, []string{"kubectl -n cattle-scc-system delete secret scc-registration"}, testkit.Paste(t, v[start:end]))
		})
	}
}
