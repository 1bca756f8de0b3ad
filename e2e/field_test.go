package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rancher/registration-engine/job/incluster/coredns"

	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
)

// TestSecretWriters: the engine meets a scc-registration someone else
// wrote. Another tool's (Rancher's chart) stops the run with a verdict and
// is never written; SUSE's Python engine's is taken over by server-side
// apply without a conflict; a person's, through Rancher's registration
// page, is never written nor pre-empted.
func TestSecretWriters(t *testing.T) {
	e := setupCluster(t)
	c := harness.StartCloud(t)
	t.Run("Rancher's chart owns the Secret", func(t *testing.T) { e.testRancherChartSecret(t, c) })
	t.Run("SUSE's Python engine wrote the Secret", func(t *testing.T) { e.testPythonEngineSecret(t, c) })
	t.Run("SUSE's Python engine's coredns-custom key", func(t *testing.T) { e.testPythonEngineCoreDNSKey(t, c) })
	t.Run("a person registers through Rancher's registration page", func(t *testing.T) { e.testRancherPage(t, c) })
	t.Run("the page's create between a run's read and its write", e.testRancherPageRace)
}

// testPythonEngineCoreDNSKey: coredns-custom key registration.override as
// SUSE's Python engine writes it (coredns.py at commit
// 4ee2871ddedbeea6f1a2a636ccffabb1d02672af: _hosts_block, INDENT four
// spaces, no ttl, merge-patched by the requests library). One run of the
// engine, as its ServiceAccount under the admission policy, moves the entry
// into its own key and removes that one; the same token may not remove any
// other key, nor that key once it holds more than the Python engine's block.
func (e *clusterEnv) testPythonEngineCoreDNSKey(t *testing.T, c harness.Cloud) {
	ctx := harness.Context(t)
	e.UseAKSLayout(ctx, t)
	cfg := rest.CopyConfig(e.Plane.Admin)
	cfg.UserAgent = pythonEngineUA
	py, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	cms := e.Admin.CoreV1().ConfigMaps("kube-system")
	putKey := func(v string) {
		t.Helper()
		b, err := json.Marshal(map[string]any{"data": map[string]string{coredns.PythonEngineKey: v}})
		require.NoError(t, err)
		_, err = py.CoreV1().ConfigMaps("kube-system").Patch(ctx, coredns.CustomConfigMap, types.MergePatchType, b, metav1.PatchOptions{})
		require.NoError(t, err)
	}
	as := e.Plane.ClientAs(t, e.Token(t))
	refused := func(what, body string) string {
		t.Helper()
		// The policy is enforced once the API server's informer has it:
		// until a dry run is refused.
		path := configMapPath("kube-system", coredns.CustomConfigMap)
		require.Eventually(t, func() bool {
			code, _ := request(t, as, http.MethodPatch, path+"?dryRun=All", mergeType, body)
			return code == http.StatusUnprocessableEntity
		}, 30*time.Second, 200*time.Millisecond, "%s: the admission policy never refused it (dry run)", what)
		before, err := cms.Get(ctx, coredns.CustomConfigMap, metav1.GetOptions{})
		require.NoError(t, err)
		code, resp := request(t, as, http.MethodPatch, configMapPath("kube-system", coredns.CustomConfigMap), mergeType, body)
		assert.Equal(t, http.StatusUnprocessableEntity, code, "%s must be refused: %s", what, resp)
		after, err := cms.Get(ctx, coredns.CustomConfigMap, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "%s: nothing written", what)
		return resp
	}
	ours := "hosts {\n    127.0.0.4 " + harness.UpdateServer + "\n    fallthrough\n}\n"

	// The same token, by hand: no other key may go, and the Python engine's
	// only in its exact shape.
	body := func(data map[string]any) string {
		b, err := json.Marshal(map[string]any{"data": data})
		require.NoError(t, err)
		return string(b)
	}
	refused("removing the cluster's own key", body(map[string]any{"log.override": nil, coredns.DefaultHostsKey: ours}))
	putKey("hosts {\n    10.0.0.5 db.corp.internal\n    127.0.0.4 " + harness.UpdateServer + "\n    fallthrough\n}\n")
	refused("removing registration.override holding a foreign entry", body(map[string]any{coredns.PythonEngineKey: nil, coredns.DefaultHostsKey: ours}))
	putKey("hosts {\n    127.0.0.4 " + harness.UpdateServer + "\n    fallthrough\n}\n")
	refused("removing registration.override without writing the engine's key", body(map[string]any{coredns.PythonEngineKey: nil}))

	res := e.RunAs(ctx, t, c, e.Token(t), "run-after-python-dns", "IN_CLUSTER_DNS=true")
	require.Equal(t, job.ExitOK, res.Code, res.String())
	require.NotNil(t, logLine(t, res.Stderr, "took over SUSE's Python engine's coredns-custom key: its entries replaced by the engine's, the key removed"), res.Stderr)
	custom, err := cms.Get(ctx, coredns.CustomConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, custom.Data, coredns.PythonEngineKey)
	assert.Contains(t, custom.Data[coredns.DefaultHostsKey], harness.UpdateServer)
	assert.Equal(t, "log\n", custom.Data["log.override"], "the cluster's own key stays")
	if t.Failed() {
		return
	}
	t.Logf("proved: coredns-custom key %s as SUSE's Python engine writes it was taken over by one run under the admission policy (exit 0, one entry, the engine's %s; log.override kept); the same token was refused removing another key, that key holding a foreign entry, or that key without writing its own",
		coredns.PythonEngineKey, coredns.DefaultHostsKey)
}

// testRancherChartSecret: scc-registration as Rancher's chart creates it
// with registration.enabled (rancher/rancher chart/templates/
// scc-registration.yaml at be901b7: Helm's labels and annotations,
// resource-policy keep, keys mode, regCode, registrationUrl, certificate),
// written by Helm's field manager.
func (e *clusterEnv) testRancherChartSecret(t *testing.T, c harness.Cloud) {
	ctx := harness.Context(t)
	e.DeleteSecret(ctx, t)
	t.Cleanup(func() { e.DeleteSecret(context.Background(), t) })
	_, err := e.Admin.CoreV1().Secrets(operator.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:   operator.SecretName,
			Labels: map[string]string{"app": "rancher", "app.kubernetes.io/managed-by": "Helm"},
			Annotations: map[string]string{"meta.helm.sh/release-name": "rancher", "meta.helm.sh/release-namespace": "cattle-system",
				"helm.sh/resource-policy": "keep"},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"mode": []byte("online"), "regCode": []byte("RANCHER-CODE"), "registrationUrl": []byte(""), "certificate": []byte("")},
	}, metav1.CreateOptions{FieldManager: "helm"})
	require.NoError(t, err)
	before := e.SecretVersion(ctx, t)

	res := e.RunAs(ctx, t, c, e.Token(t), "run-rancher-chart")
	require.Equal(t, job.ExitPermanent, res.Code, res.String())
	s := summary(t, res.Stderr)
	assert.Equal(t, "write-secret", s["failedPhase"])
	errText, _ := s["error"].(string)
	assert.Contains(t, errText, `another tool writes the registration secret: cattle-scc-system/scc-registration is written by Helm release "rancher" (namespace cattle-system)`)
	assert.Contains(t, errText, "--set registration.enabled=false")
	assert.Equal(t, before, e.SecretVersion(ctx, t), "the engine never writes a Secret another tool owns")
	assert.Equal(t, "RANCHER-CODE", string(e.Secret(ctx, t).Data["regCode"]))

	st := harness.RunEngine(t, ctx, []string{"KUBECONFIG=" + e.Plane.AdminKubeconfig, "HOME=" + t.TempDir()}, "status")
	verdict, _, _ := strings.Cut(st.Stdout, "\n")
	assert.Equal(t, 2, st.Code, st.String())
	assert.True(t, strings.HasPrefix(verdict, `Not registered: cattle-scc-system/scc-registration is written by Helm release "rancher" (namespace cattle-system)`), verdict)
	if t.Failed() {
		return
	}
	t.Logf("proved: a scc-registration Rancher's chart owns (Helm release rancher) stops the run: exit %d, nothing written (resourceVersion %s kept), error %q", res.Code, before, errText)
	t.Logf("proved: status on it: %s", verdict)
}

// pythonEngineUA is the User-Agent of SUSE's Python engine: it talks to the
// API server with the requests library (SUSE-Enceladus/cloud-registration-
// engine src/registration_engine/k8s.py, main ee5eae9 and 4ee2871), so the
// API server records the field manager "python-requests".
const pythonEngineUA = "python-requests/2.32.3"

// putPythonEngineSecret writes scc-registration as SUSE's Python engine
// does (k8s.py update_registration_data): POST with stringData and no
// labels when absent, then a merge-patch of stringData on a later cycle;
// registrationUrl as main (ee5eae9) writes it, https://<chosen IP>.
func putPythonEngineSecret(ctx context.Context, t *testing.T, e *clusterEnv, url, regCode string) {
	t.Helper()
	cfg := rest.CopyConfig(e.Plane.Admin)
	cfg.UserAgent = pythonEngineUA
	py, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	stringData := map[string]string{
		"registrationType": "online", "registrationUrl": url, "regCode": regCode,
		"instanceData": "<document>python</document>", "registrationUrlCert": "-----BEGIN CERTIFICATE-----\nold\n-----END CERTIFICATE-----\n",
	}
	_, err = py.CoreV1().Secrets(operator.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: operator.SecretName}, Type: corev1.SecretTypeOpaque, StringData: stringData,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	patch, err := json.Marshal(map[string]any{"stringData": stringData})
	require.NoError(t, err)
	_, err = py.CoreV1().Secrets(operator.Namespace).Patch(ctx, operator.SecretName, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

// managers maps each field manager of s to the data keys it owns.
func managers(t *testing.T, s *corev1.Secret) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, m := range s.ManagedFields {
		var f struct {
			Data map[string]json.RawMessage `json:"f:data"`
		}
		require.NoError(t, json.Unmarshal(m.FieldsV1.GetRawBytes(), &f))
		keys := []string{}
		for k := range f.Data {
			if name, ok := strings.CutPrefix(k, "f:"); ok {
				keys = append(keys, name)
			}
		}
		out[m.Manager] = append(out[m.Manager], keys...)
	}
	return out
}

// testPythonEngineSecret: the Python engine's Secret (bare-IP URL, every
// key owned by "python-requests") is not another tool's: one run takes
// every key over by server-side apply, without a conflict.
func (e *clusterEnv) testPythonEngineSecret(t *testing.T, c harness.Cloud) {
	ctx := harness.Context(t)
	e.DeleteSecret(ctx, t)
	t.Cleanup(func() { e.DeleteSecret(context.Background(), t) })
	putPythonEngineSecret(ctx, t, e, "https://127.0.0.4", harness.DirectRegCode)
	require.Contains(t, managers(t, e.Secret(ctx, t)), operator.PythonEngineManager, "the API server records the Python engine as python-requests")

	res := e.RunAs(ctx, t, c, e.Token(t), "run-after-python")
	require.Equal(t, job.ExitOK, res.Code, res.String())
	assert.Equal(t, job.OutcomeRegistered, summary(t, res.Stderr)["outcome"])
	s := e.Secret(ctx, t)
	harness.AssertRegistration(t, s, harness.DirectRegCode)
	assert.Equal(t, "https://smt-azure.susecloud.net", string(s.Data[operator.KeyRegistrationURL]), "the bare IP gives way to the name")
	owners := managers(t, s)
	assert.ElementsMatch(t, operator.ValueKeys(), owners[kube.FieldManager], "the engine owns the five keys")
	// A key whose value the apply left as it was stays shared with its
	// earlier manager (server-side apply's co-ownership), which is no
	// conflict: python-requests is not another tool, and the engine's
	// next apply needs no force for it.
	t.Logf("keys still co-owned by %s (same value): %v", operator.PythonEngineManager, owners[operator.PythonEngineManager])
	if t.Failed() {
		return
	}
	t.Logf("proved: a scc-registration SUSE's Python engine wrote (field manager %s, registrationUrl https://<ip>) was taken over by one run in %s: exit 0, the five keys now the engine's (those it left unchanged shared with python-requests), no conflict",
		operator.PythonEngineManager, res.Took.Round(time.Millisecond))
}
