package e2e

import (
	"context"
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"github.com/rancher/registration-engine/job/operator"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/e2e/sccoperator"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/kube"
)

// TestMoveFromPythonEngine: a cluster SUSE's Python engine registered
// (SUSE-Enceladus/cloud-registration-engine at commit
// 4ee2871ddedbeea6f1a2a636ccffabb1d02672af: src/registration_engine/
// coredns.py writes the key registration.override in kube-system/
// coredns-custom, _hosts_block with INDENT four spaces and no ttl, by
// merge-patch; k8s.py writes scc-registration by POST, then merge-patch, of
// stringData with registrationUrl https://<fqdn> and no labels; both with
// the requests library, so the API server records the field manager
// python-requests), with the real rancher/scc-operator registered from it.
// Then one Job of this engine, under the admission policy: one CoreDNS
// entry, the engine's; the Python key gone; the name resolving; the Secret
// the engine's, taken over without a conflict; the operator's Registration
// active, with at most one registration afresh.
func TestMoveFromPythonEngine(t *testing.T) {
	o := setupOperator(t)
	ctx := harness.Context(t)
	o.UseAKSLayout(ctx, t)
	o.DNS.Forget()
	o.forceDeleteSecret(ctx, t)
	t.Cleanup(func() { o.forceDeleteSecret(context.Background(), t) })
	o.resetUpdateServers()

	cfg := rest.CopyConfig(o.Plane.Admin)
	cfg.UserAgent = pythonEngineUA
	py, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	// The Python engine's CoreDNS entry for the update server it chose.
	ip := netip.MustParseAddr("127.0.0.4") // the first fake update server, which the region servers hand out
	block := "hosts {\n    " + ip.String() + " " + harness.UpdateServer + "\n    fallthrough\n}\n"
	patch, err := json.Marshal(map[string]any{"data": map[string]string{coredns.PythonEngineKey: block}})
	require.NoError(t, err)
	_, err = py.CoreV1().ConfigMaps("kube-system").Patch(ctx, coredns.CustomConfigMap, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	// coredns.py then restarts CoreDNS, which serves the key at once; only
	// then does k8s.py write the Secret. Without this the operator could ask
	// before the cluster's DNS (its sync delay) had the entry, fail the
	// Registration for good, and the test would prove nothing.
	o.DNS.Forget()
	require.NotEmpty(t, o.DNS.Lookup(ctx, harness.UpdateServer), "CoreDNS answers the name from the Python engine's key")

	// Its Secret, as k8s.py at 4ee2871 writes it.
	stringData := map[string]string{
		"registrationType": "online", "registrationUrl": "https://" + harness.UpdateServer, "regCode": harness.OverlayRegCode,
		"instanceData": "<document>python</document>", "registrationUrlCert": string(o.fc.Updates[0].CertPEM),
	}
	_, err = py.CoreV1().Secrets(operator.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: operator.SecretName}, Type: corev1.SecretTypeOpaque, StringData: stringData,
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The operator registers from the Python engine's Secret first (its
	// CRD exists once it runs, so the recorder starts after it). Once it
	// has stopped (cleanups run last first), its Registration goes too: its
	// finalizer would hold the next test's deletion of the CRD.
	t.Cleanup(func() { sccoperator.Forget(t, o.Plane) })
	sccoperator.Run(t, o.Plane, sccoperator.Options{Binary: sccoperator.Binary(t, sccoperator.CommitRMT), ProxyURL: o.proxy.URL})
	rec, err := sccoperator.Record(ctx, o.Plane.Admin)
	require.NoError(t, err)
	t.Cleanup(rec.Stop)
	before := waitActive(ctx, t, o, rec)
	announcesBefore := announces(o)

	runs := o.StartKubelet(ctx, t, operator.Namespace, o.c)
	pr, done := o.runJob(ctx, t, runs, "after-python")
	require.Equal(t, batchv1.JobComplete, controlplane.FinishedCondition(done).Type, pr.Res.String())
	sum := summary(t, pr.Res.Stderr)
	assert.Equal(t, job.ExitOK, pr.Res.Code)
	assert.Equal(t, operator.StateActive, sum["operator"], pr.Res.Stderr)
	require.NotNil(t, logLine(t, pr.Res.Stderr, "took over SUSE's Python engine's coredns-custom key: its entries replaced by the engine's, the key removed"), pr.Res.Stderr)

	custom, err := o.Admin.CoreV1().ConfigMaps("kube-system").Get(ctx, coredns.CustomConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, custom.Data, coredns.PythonEngineKey, "the Python engine's key is gone")
	assert.Contains(t, custom.Data[coredns.DefaultHostsKey], harness.UpdateServer, "one entry, the engine's")
	assert.Equal(t, "log\n", custom.Data["log.override"], "the cluster's own key stays")
	assert.NotEmpty(t, o.DNS.Lookup(ctx, harness.UpdateServer), "CoreDNS answers the name from the engine's key")

	s := o.Secret(ctx, t)
	owners := managers(t, s)
	assert.ElementsMatch(t, operator.ValueKeys(), owners[kube.FieldManager], "the engine owns the five keys")
	t.Logf("keys still co-owned by %s (same value): %v", operator.PythonEngineManager, owners[operator.PythonEngineManager])
	after, err := sccoperator.NameForSecret(s)
	require.NoError(t, err)
	last := rec.States(after)
	require.NotEmpty(t, last)
	assert.True(t, last[len(last)-1].Done(), "active: %s", last[len(last)-1])
	fresh := announces(o) - announcesBefore
	assert.LessOrEqual(t, fresh, 1, "at most one registration afresh")
	if t.Failed() {
		return
	}
	t.Logf("proved: after SUSE's Python engine (4ee2871: coredns-custom key %s, Secret by python-requests) and the real operator's Registration %s, one Job took both over: the key removed in the engine's one admitted edit, %s holding the one entry, CoreDNS answering, the Secret's five keys the engine's; Registration %s active with %d registration(s) afresh (in %s)",
		coredns.PythonEngineKey, before, coredns.DefaultHostsKey, after, fresh, pr.Res.Took.Round(time.Millisecond))
}

// waitActive waits until the operator's Registration for the current
// Secret is Done and returns its name.
func waitActive(ctx context.Context, t *testing.T, o *operatorEnv, rec *sccoperator.Recorder) string {
	t.Helper()
	var name string
	require.Eventually(t, func() bool {
		s, err := o.Admin.CoreV1().Secrets(operator.Namespace).Get(ctx, operator.SecretName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		if name, err = sccoperator.NameForSecret(s); err != nil {
			return false
		}
		st := rec.States(name)
		return len(st) > 0 && st[len(st)-1].Done()
	}, 90*time.Second, 200*time.Millisecond, "the operator registers from the Python engine's Secret")
	return name
}

// announces counts the systems announced to the fake update servers.
func announces(o *operatorEnv) int {
	n := 0
	for _, r := range o.fc.SCCRequests() {
		if r.Method == "POST" && r.Path == "/connect/subscriptions/systems" {
			n++
		}
	}
	return n
}
