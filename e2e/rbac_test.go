package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/e2e/sccoperator"
	"github.com/rancher/registration-engine/job/operator"
)

// manifestsBase is the kustomization whose RBAC is under test.
var manifestsBase = filepath.Join("..", "manifests", "base")

// rbacFixture is what a cluster holds besides the engine's manifests: the
// namespace Rancher creates, Secrets the engine must not reach (one in its
// namespace, one of the same name in another), and CoreDNS's objects in
// kube-system next to one it must not reach.
var rbacFixture = `
apiVersion: v1
kind: Namespace
metadata: {name: cattle-scc-system}
---
apiVersion: v1
kind: Secret
metadata: {name: someone-elses, namespace: cattle-scc-system}
stringData: {password: not-yours}
---
apiVersion: v1
kind: Secret
metadata: {name: scc-registration, namespace: default}
stringData: {regCode: not-yours}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kube-proxy, namespace: kube-system}
data: {config.conf: "mode: iptables"}
---` + harness.CorednsFixture + `---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: scc-controllers, namespace: kube-system}
spec: {holderIdentity: rancher-scc-operator-0, leaseDurationSeconds: 45}
`

// registrationCRD stands in for the CRD rancher/scc-operator installs, with
// one Registration, so the read-only ClusterRole can be tried for real.
var registrationCRD = sccoperator.StandInCRD("scc.cattle.io", "v1", "Registration", true)

const registrationObj = `
apiVersion: scc.cattle.io/v1
kind: Registration
metadata: {name: scc-registration-0123abcd}
`

func registrationPath(name string) string { return "/apis/scc.cattle.io/v1/registrations/" + name }

func eventPath(ns string) string { return "/apis/events.k8s.io/v1/namespaces/" + ns + "/events" }

func eventBody(ns string) string {
	return `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"manual-1.187c2e4f0a1b2c3d","namespace":"` + ns +
		`"},"eventTime":"2026-11-30T12:00:00.000000Z","reportingController":"registration-engine","reportingInstance":"manual-1-abcde",` +
		`"action":"Register","reason":"Registered","type":"Normal","note":"wrote","regarding":{"apiVersion":"batch/v1","kind":"Job","namespace":"` + ns + `","name":"manual-1"}}`
}

const (
	applyType = "application/apply-patch+yaml"
	mergeType = "application/merge-patch+json"
	jsonType  = "application/json"
	// apply carries fieldManager, which server-side apply requires.
	apply = "?fieldManager=registration-engine&force=true"
)

func secretPath(ns, name string) string { return "/api/v1/namespaces/" + ns + "/secrets/" + name }
func leasePath(ns, name string) string {
	return "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases/" + name
}
func configMapPath(ns, name string) string { return "/api/v1/namespaces/" + ns + "/configmaps/" + name }
func deploymentPath(ns, name string) string {
	return "/apis/apps/v1/namespaces/" + ns + "/deployments/" + name
}

func secretApply(ns, name string) string {
	return `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"` + name + `","namespace":"` + ns +
		`"},"type":"Opaque","data":{"registrationType":"b25saW5l"}}`
}

func leaseApply(ns, name string) string {
	return `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"` + name + `","namespace":"` + ns +
		`"},"spec":{"holderIdentity":"run-1","leaseDurationSeconds":60}}`
}

// TestEngineRBAC proves, with real requests as the ServiceAccount of
// manifests/base (a TokenRequest token, not `auth can-i`, which answers
// "yes" for a named create that a POST can never use), that its Roles are
// sufficient for what the engine does and refuse everything else:
// server-side apply creates the Secret and the Lease by name, a POST-create
// is refused, no other Secret, Lease or namespace is reachable, no verb the
// engine never calls is granted (update on the Secret and the ConfigMaps,
// anything on CoreDNS's Deployment), the Secret's delete is guarded by its
// preconditions, and in kube-system only a read of CoreDNS's two
// ConfigMaps, a patch of AKS's coredns-custom (base is AKS's layout: the
// Corefile of coredns is only read), a list of EndpointSlices and a read
// of the operator's Lease are reachable.
func TestEngineRBAC(t *testing.T) {
	p := controlplane.Shared(t)
	admin := p.AdminClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The plane is the package's: earlier tests (TestCluster, TestOperator)
	// leave the Secret, with the operator's finalizer, its Registrations and
	// the Lease behind, and the creation below needs them absent.
	sccoperator.Forget(t, p)
	err := admin.CoordinationV1().Leases(operator.Namespace).Delete(ctx, harness.LeaseName, metav1.DeleteOptions{})
	require.True(t, err == nil || apierrors.IsNotFound(err), "delete the Lease: %v", err)

	p.Apply(t, []byte(rbacFixture))
	p.Apply(t, []byte(registrationCRD))
	p.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/registrations.scc.cattle.io")
	p.Apply(t, []byte(registrationObj))
	// base alone is AKS's CoreDNS layout: the Corefile layout's grant, which
	// overlays/e2e (applied by earlier tests) adds, must not be there.
	err = admin.RbacV1().RoleBindings("kube-system").Delete(ctx, "registration-engine-corefile", metav1.DeleteOptions{})
	require.True(t, err == nil || apierrors.IsNotFound(err), "delete the Corefile layout's RoleBinding: %v", err)
	// AKS's coredns-custom, for this test only: later tests expect the
	// Corefile layout.
	_, err = admin.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns-custom"}, Data: map[string]string{"log.override": "log\n"},
	}, metav1.CreateOptions{})
	require.True(t, err == nil || apierrors.IsAlreadyExists(err), "create coredns-custom: %v", err)
	t.Cleanup(func() {
		_ = admin.CoreV1().ConfigMaps("kube-system").Delete(context.Background(), "coredns-custom", metav1.DeleteOptions{})
	})
	p.Apply(t, p.Kustomize(t, manifestsBase))
	as := p.ClientAs(t, p.ServiceAccountToken(t, operator.Namespace, harness.EngineSA))

	review, err := kubernetes.NewForConfigOrDie(as).AuthenticationV1().SelfSubjectReviews().
		Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, "system:serviceaccount:cattle-scc-system:registration-engine", review.Status.UserInfo.Username)

	// Creation comes first and in order: everything below needs the objects.
	code, body := request(t, as, http.MethodPatch, secretPath(operator.Namespace, operator.SecretName)+apply, applyType, secretApply(operator.Namespace, operator.SecretName))
	require.Equal(t, http.StatusCreated, code, "server-side apply must create the absent Secret: %s", body)
	code, body = request(t, as, http.MethodPatch, leasePath(operator.Namespace, harness.LeaseName)+apply, applyType, leaseApply(operator.Namespace, harness.LeaseName))
	require.Equal(t, http.StatusCreated, code, "server-side apply must create the absent Lease: %s", body)
	created, err := admin.CoreV1().Secrets(operator.Namespace).Get(ctx, operator.SecretName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "online", string(created.Data["registrationType"]))

	// asRead returns the object as the SA would PUT it back after a get.
	asRead := func(path string) func(t *testing.T) string {
		return func(t *testing.T) string {
			code, body := request(t, as, http.MethodGet, path, "", "")
			require.Equal(t, http.StatusOK, code, body)
			return body
		}
	}

	tests := map[string]struct {
		method, path, contentType, body string
		bodyFrom                        func(t *testing.T) string
		want                            int
	}{
		"get the Secret": {
			method: http.MethodGet, path: secretPath(operator.Namespace, operator.SecretName), want: http.StatusOK,
		},
		"server-side apply the existing Secret": {
			method: http.MethodPatch, path: secretPath(operator.Namespace, operator.SecretName) + apply, contentType: applyType,
			body: secretApply(operator.Namespace, operator.SecretName), want: http.StatusOK,
		},
		"merge-patch the Secret's data": {
			method: http.MethodPatch, path: secretPath(operator.Namespace, operator.SecretName), contentType: mergeType,
			body: `{"data":{"regCode":"Y29kZQ=="}}`, want: http.StatusOK,
		},
		"update the Secret is refused": {
			// The engine only ever applies the Secret.
			method: http.MethodPut, path: secretPath(operator.Namespace, operator.SecretName), contentType: jsonType,
			bodyFrom: asRead(secretPath(operator.Namespace, operator.SecretName)), want: http.StatusForbidden,
		},
		"POST-create the Secret is refused": {
			// Refused, not 409 AlreadyExists: the rule's resourceNames
			// never match a POST, which carries no name in its URL.
			method: http.MethodPost, path: "/api/v1/namespaces/" + operator.Namespace + "/secrets", contentType: jsonType,
			body: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"scc-registration"}}`, want: http.StatusForbidden,
		},
		"delete the Secret is allowed (the engine guards it with preconditions)": {
			// Allowed (the recovery of a Failed Registration); the engine
			// sends the UID it read, so a stale one is a conflict, not a
			// deleted Secret.
			method: http.MethodDelete, path: secretPath(operator.Namespace, operator.SecretName), contentType: jsonType,
			body: `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}`, want: http.StatusConflict,
		},
		"delete another Secret is refused": {
			method: http.MethodDelete, path: secretPath(operator.Namespace, "someone-elses"), want: http.StatusForbidden,
		},
		"get the operator's Lease": {
			// Is rancher/scc-operator running? Asked before a recovery deletes.
			method: http.MethodGet, path: leasePath(operator.LeaseNamespace, operator.LeaseName), want: http.StatusOK,
		},
		"update the operator's Lease is refused": {
			method: http.MethodPut, path: leasePath(operator.LeaseNamespace, operator.LeaseName), contentType: jsonType,
			bodyFrom: asRead(leasePath(operator.LeaseNamespace, operator.LeaseName)), want: http.StatusForbidden,
		},
		"get another kube-system Lease is refused": {
			method: http.MethodGet, path: leasePath("kube-system", "kube-controller-manager"), want: http.StatusForbidden,
		},
		"get another Secret is refused": {
			method: http.MethodGet, path: secretPath(operator.Namespace, "someone-elses"), want: http.StatusForbidden,
		},
		"merge-patch another Secret is refused": {
			method: http.MethodPatch, path: secretPath(operator.Namespace, "someone-elses"), contentType: mergeType,
			body: `{"data":{"password":"b3duZWQ="}}`, want: http.StatusForbidden,
		},
		"server-side apply another Secret is refused": {
			method: http.MethodPatch, path: secretPath(operator.Namespace, "scc-registration-2") + apply, contentType: applyType,
			body: secretApply(operator.Namespace, "scc-registration-2"), want: http.StatusForbidden,
		},
		"list Secrets is refused": {
			method: http.MethodGet, path: "/api/v1/namespaces/" + operator.Namespace + "/secrets", want: http.StatusForbidden,
		},
		"watch Secrets is refused": {
			method: http.MethodGet, path: "/api/v1/namespaces/" + operator.Namespace + "/secrets?watch=true&timeoutSeconds=1",
			want: http.StatusForbidden,
		},
		"get the Lease": {
			method: http.MethodGet, path: leasePath(operator.Namespace, harness.LeaseName), want: http.StatusOK,
		},
		"server-side apply the existing Lease": {
			method: http.MethodPatch, path: leasePath(operator.Namespace, harness.LeaseName) + apply, contentType: applyType,
			body: leaseApply(operator.Namespace, harness.LeaseName), want: http.StatusOK,
		},
		"update the Lease": {
			method: http.MethodPut, path: leasePath(operator.Namespace, harness.LeaseName), contentType: jsonType,
			bodyFrom: asRead(leasePath(operator.Namespace, harness.LeaseName)), want: http.StatusOK,
		},
		"POST-create the Lease is refused": {
			method: http.MethodPost, path: "/apis/coordination.k8s.io/v1/namespaces/" + operator.Namespace + "/leases",
			contentType: jsonType, body: leaseApply(operator.Namespace, harness.LeaseName), want: http.StatusForbidden,
		},
		"server-side apply another Lease is refused": {
			method: http.MethodPatch, path: leasePath(operator.Namespace, "other-lock") + apply, contentType: applyType,
			body: leaseApply(operator.Namespace, "other-lock"), want: http.StatusForbidden,
		},
		"get the same-named Secret in default is refused": {
			method: http.MethodGet, path: secretPath("default", operator.SecretName), want: http.StatusForbidden,
		},
		"server-side apply the Secret in default is refused": {
			method: http.MethodPatch, path: secretPath("default", operator.SecretName) + apply, contentType: applyType,
			body: secretApply("default", operator.SecretName), want: http.StatusForbidden,
		},
		"server-side apply the Lease in default is refused": {
			method: http.MethodPatch, path: leasePath("default", harness.LeaseName) + apply, contentType: applyType,
			body: leaseApply("default", harness.LeaseName), want: http.StatusForbidden,
		},
		"list pods in default is refused": {
			method: http.MethodGet, path: "/api/v1/namespaces/default/pods", want: http.StatusForbidden,
		},
		"get the CoreDNS ConfigMap": {
			method: http.MethodGet, path: configMapPath("kube-system", "coredns"), want: http.StatusOK,
		},
		"merge-patch the CoreDNS ConfigMap is refused": {
			// AKS's layout (base): coredns is only read; its patch is
			// base/corefile-layout's, and the admission policy limits it to
			// the engine's hosts entries (TestCoreDNSAdmissionPolicy).
			method: http.MethodPatch, path: configMapPath("kube-system", "coredns"), contentType: mergeType,
			body: `{"data":{"Corefile":".:53 {\n    forward . 203.0.113.53\n}\n"}}`, want: http.StatusForbidden,
		},
		"get coredns-custom": {
			method: http.MethodGet, path: configMapPath("kube-system", "coredns-custom"), want: http.StatusOK,
		},
		// A public address: manifests/base's policy, applied above, admits no
		// loopback entry (only overlays/e2e's does), and the API server may
		// still hold the overlay's policy for a moment after the apply.
		"merge-patch coredns-custom with the engine's block": {
			method: http.MethodPatch, path: configMapPath("kube-system", "coredns-custom"), contentType: mergeType,
			body: `{"data":{"registration-engine.override":"hosts {\n    20.38.0.87 smt-azure.susecloud.net\n    no_reverse\n    fallthrough\n}\n"}}`, want: http.StatusOK,
		},
		"update coredns-custom is refused": {
			method: http.MethodPut, path: configMapPath("kube-system", "coredns-custom"), contentType: jsonType,
			bodyFrom: asRead(configMapPath("kube-system", "coredns-custom")), want: http.StatusForbidden,
		},
		"delete coredns-custom is refused": {
			method: http.MethodDelete, path: configMapPath("kube-system", "coredns-custom"), want: http.StatusForbidden,
		},
		"update the CoreDNS ConfigMap is refused": {
			// The engine merge-patches one key with a resourceVersion.
			method: http.MethodPut, path: configMapPath("kube-system", "coredns"), contentType: jsonType,
			bodyFrom: asRead(configMapPath("kube-system", "coredns")), want: http.StatusForbidden,
		},
		"patch the CoreDNS Deployment's template is refused": {
			// Rolling CoreDNS could start another image in kube-system; the
			// reload plugin loads the engine's change instead.
			method: http.MethodPatch, path: deploymentPath("kube-system", "coredns"), contentType: mergeType,
			body: `{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-01-01T00:00:00Z"}}}}}`,
			want: http.StatusForbidden,
		},
		"get the CoreDNS Deployment is refused": {
			method: http.MethodGet, path: deploymentPath("kube-system", "coredns"), want: http.StatusForbidden,
		},
		"delete the CoreDNS ConfigMap is refused": {
			method: http.MethodDelete, path: configMapPath("kube-system", "coredns"), want: http.StatusForbidden,
		},
		"get another kube-system ConfigMap is refused": {
			method: http.MethodGet, path: configMapPath("kube-system", "kube-proxy"), want: http.StatusForbidden,
		},
		"POST-create a kube-system ConfigMap is refused": {
			method: http.MethodPost, path: "/api/v1/namespaces/kube-system/configmaps", contentType: jsonType,
			body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"coredns-custom"}}`, want: http.StatusForbidden,
		},
		"list kube-system Secrets is refused": {
			method: http.MethodGet, path: "/api/v1/namespaces/kube-system/secrets", want: http.StatusForbidden,
		},
		"list kube-dns's EndpointSlices": {
			// The CoreDNS pods the handover asks one by one.
			method: http.MethodGet, path: "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dkube-dns",
			want: http.StatusOK,
		},
		"watch kube-system's EndpointSlices is refused": {
			method: http.MethodGet, path: "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices?watch=true", want: http.StatusForbidden,
		},
		"list EndpointSlices in default is refused": {
			method: http.MethodGet, path: "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", want: http.StatusForbidden,
		},
		"get the operator's Registration": {
			method: http.MethodGet, path: registrationPath("scc-registration-0123abcd"), want: http.StatusOK,
		},
		"discover the operator's API group": {
			method: http.MethodGet, path: "/apis/scc.cattle.io/v1", want: http.StatusOK,
		},
		"list Registrations is refused": {
			method: http.MethodGet, path: "/apis/scc.cattle.io/v1/registrations", want: http.StatusForbidden,
		},
		"patch a Registration is refused": {
			method: http.MethodPatch, path: registrationPath("scc-registration-0123abcd"), contentType: mergeType,
			body: `{"spec":{"syncNow":true}}`, want: http.StatusForbidden,
		},
		"delete a Registration is refused": {
			method: http.MethodDelete, path: registrationPath("scc-registration-0123abcd"), want: http.StatusForbidden,
		},
		"create an Event on the Job": {
			method: http.MethodPost, path: eventPath(operator.Namespace), contentType: jsonType, body: eventBody(operator.Namespace), want: http.StatusCreated,
		},
		"create an Event in default is refused": {
			method: http.MethodPost, path: eventPath("default"), contentType: jsonType, body: eventBody("default"), want: http.StatusForbidden,
		},
		"list Events is refused": {
			method: http.MethodGet, path: eventPath(operator.Namespace), want: http.StatusForbidden,
		},
		"create a core/v1 Event is refused": {
			method: http.MethodPost, path: "/api/v1/namespaces/" + operator.Namespace + "/events", contentType: jsonType,
			body: `{"apiVersion":"v1","kind":"Event","metadata":{"generateName":"x."},"involvedObject":{"kind":"Job","name":"manual-1","namespace":"` + operator.Namespace + `"},"reason":"Registered"}`,
			want: http.StatusForbidden,
		},
		"list namespaces is refused": {
			method: http.MethodGet, path: "/api/v1/namespaces", want: http.StatusForbidden,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			body := tc.body
			if tc.bodyFrom != nil {
				body = tc.bodyFrom(t)
			}
			code, resp := request(t, as, tc.method, tc.path, tc.contentType, body)
			assert.Equal(t, tc.want, code, "%s %s: %s", tc.method, tc.path, resp)
			if tc.want == http.StatusForbidden {
				var status metav1.Status
				require.NoError(t, json.Unmarshal([]byte(resp), &status), resp)
				assert.Equal(t, metav1.StatusReasonForbidden, status.Reason)
			}
		})
	}

	other, err := admin.CoreV1().Secrets(operator.Namespace).Get(ctx, "someone-elses", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "not-yours", string(other.Data["password"]), "a refused patch must not have changed another Secret")
}

// request sends one raw request authenticated by cfg and returns the status
// code and the (size-limited) body.
func request(t *testing.T, cfg *rest.Config, method, path, contentType, body string) (int, string) {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, cfg.Host+path, rd)
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
