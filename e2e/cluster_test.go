package e2e

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/sccoperator"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/inclusterdns"
	"github.com/rancher/registration-engine/job/kube"
)

// What manifests/overlays/e2e and the fake cloud fix.
const (
	engineSA        = "registration-engine"
	leaseName       = "registration-engine"
	cronJobName     = "registration-engine"
	updateServer    = "smt-azure.susecloud.net"
	overlayRegCode  = "E2E-REGISTRATION-CODE" // the CronJob's REGISTRATION_CODE
	directRegCode   = "E2E-DIRECT-CODE"       // what the tests' own runs pass
	jobNameLabel    = "batch.kubernetes.io/job-name"
	clusterDeadline = 2 * time.Minute
)

// corednsFixture is what kubeadm and kind put into kube-system: the coredns
// ConfigMap with a Corefile that reloads itself, and the coredns Deployment
// (no controller runs it; the tests read its generation and template).
var corednsFixture = corednsObjects(fakecloud.KubeadmCorefile)

// aksCorednsFixture is AKS's kube-system: its Corefile, which imports
// coredns-custom's keys (create coredns-custom beside it), and the same
// Deployment.
var aksCorednsFixture = corednsObjects(fakecloud.AKSCorefile)

// corednsObjects are the coredns ConfigMap with corefile and CoreDNS's
// Deployment.
func corednsObjects(corefile string) string {
	return `
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
` + indent(corefile, "    ") + `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system}
spec:
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      containers: [{name: coredns, image: registry.k8s.io/coredns/coredns:v1.12.1}]
`
}

// indent prefixes every line of s with prefix, for a YAML block scalar.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+prefix) + "\n"
}

// clusterEnv is the shared plane with manifests/overlays/e2e applied.
type clusterEnv struct {
	p       *controlplane.Plane
	admin   kubernetes.Interface
	overlay []byte // the rendered overlay, for copies of its objects
	// corefile is the Corefile of corednsFixture, as the API server stores it.
	corefile string
	// admission, when set, changes a pod's environment before the process
	// kubelet runs it, as a mutating webhook would have.
	admission func(ctx context.Context, pod *corev1.Pod, env []string) ([]string, error)
	// dns is the cluster's DNS, a real CoreDNS serving kube-system's
	// CoreDNS ConfigMaps: the engine's handover wait asks it as it would
	// in a pod (HANDOVER_DNS_SERVER).
	dns *sccoperator.ClusterDNS
}

func setupCluster(t *testing.T) *clusterEnv {
	p := controlplane.Shared(t)
	start := time.Now()
	overlay := p.Kustomize(t, filepath.Join("..", "manifests", "overlays", "e2e"))
	p.Apply(t, overlay)
	p.Apply(t, []byte(corednsFixture))
	e := &clusterEnv{p: p, admin: p.AdminClient(t), overlay: overlay}
	e.dns = sccoperator.StartClusterDNS(t, e.admin, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cm, err := e.admin.CoreV1().ConfigMaps("kube-system").Get(ctx, inclusterdns.CoreDNSConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	e.corefile = cm.Data[inclusterdns.CorefileKey]
	t.Logf("applied manifests/overlays/e2e and the CoreDNS fixture in %.1fs", time.Since(start).Seconds())
	return e
}

// TestCluster runs the engine binary against a real kube-apiserver and
// kube-controller-manager with manifests/overlays/e2e applied, always as the
// engine's ServiceAccount, so the Role in manifests/base decides what it may
// do, exactly as in a cluster.
//
// Two tracks run side by side. The scheduled-run track waits for the
// controller-manager to fire a per-minute CronJob (up to a minute) in a
// namespace of its own; everything that shares cattle-scc-system's one
// Secret and one Lease (both fixed by the Role's resourceNames) runs one
// case after another in the other track.
func TestCluster(t *testing.T) {
	e := setupCluster(t)
	t.Run("scheduled Job of a per-minute CronJob", func(t *testing.T) {
		t.Parallel()
		e.testScheduledRun(t)
	})
	t.Run("cattle-scc-system", func(t *testing.T) {
		t.Parallel()
		// One healthy cloud for the direct runs: the fake IMDS signs the same
		// document for a nonce for ten minutes, so runs against it agree.
		c := startCloud(t)
		t.Run("first run writes the Secret as the ServiceAccount", func(t *testing.T) { e.testFirstRun(t, c) })
		t.Run("second run writes nothing", func(t *testing.T) { e.testSecondRun(t, c) })
		t.Run("operator labels and keys survive", func(t *testing.T) { e.testOperatorMetadataSurvives(t, c) })
		t.Run("no code configured keeps the Secret's code", func(t *testing.T) { e.testNoCodeKeepsCode(t, c) })
		t.Run("first install without a code", func(t *testing.T) { e.testFirstInstallWithoutCode(t, c) })
		t.Run("two runs at once", func(t *testing.T) { e.testTwoRuns(t) })
		t.Run("stale Lease is taken over", func(t *testing.T) { e.testStaleLease(t, c) })
		t.Run("rejected token", func(t *testing.T) { e.testRejectedToken(t, c) })
		t.Run("CoreDNS Corefile", func(t *testing.T) { e.testCorefile(t, c) })
		t.Run("CoreDNS coredns-custom", func(t *testing.T) { e.testCorednsCustom(t, c) })
		t.Run("manual Job from the CronJob", func(t *testing.T) { e.testManualJob(t, c) })
		t.Run("permanent failure fails the Job", func(t *testing.T) { e.testPermanentFailureJob(t) })
	})
}

// ---- the cases --------------------------------------------------------

// testFirstRun: the engine, as its ServiceAccount under the Role of
// manifests/base, creates the operator's Secret with the five keys.
func (e *clusterEnv) testFirstRun(t *testing.T, c cloud) {
	ctx := testContext(t)
	e.deleteSecret(ctx, t)
	res := e.runAs(ctx, t, c, e.token(t), "run-first")
	require.Equal(t, job.ExitOK, res.code, res.String())
	assert.Equal(t, job.OutcomeRegistered, summary(t, res.stderr)["outcome"])

	s := e.secret(ctx, t)
	assertRegistration(t, s, directRegCode)
	assert.Len(t, s.Data, 5, "exactly the five keys of the operator's contract")
	assert.Equal(t, corev1.SecretTypeOpaque, s.Type)
	assert.NotContains(t, s.Labels, "app.kubernetes.io/managed-by", "the operator refuses a Secret that names a manager")
	t.Logf("proved: the engine, authenticated by a TokenRequest token of %s/%s through KUBERNETES_TOKEN and KUBERNETES_CA_CERT, created %s with its five keys under the least-privilege Role (in %s)",
		kube.Namespace, engineSA, kube.SecretName, res.took.Round(time.Millisecond))
}

// testSecondRun: a run that finds the same values writes nothing, so the
// operator does not re-register.
func (e *clusterEnv) testSecondRun(t *testing.T, c cloud) {
	ctx := testContext(t)
	if e.secretVersion(ctx, t) == "" { // run alone: the first run's write
		first := e.runAs(ctx, t, c, e.token(t), "run-first")
		require.Equal(t, job.ExitOK, first.code, first.String())
	}
	before := e.secret(ctx, t)
	res := e.runAs(ctx, t, c, e.token(t), "run-second")
	require.Equal(t, job.ExitOK, res.code, res.String())
	s := summary(t, res.stderr)
	assert.Equal(t, job.OutcomeUnchanged, s["outcome"])
	assert.Equal(t, false, s["changed"])
	after := e.secret(ctx, t)
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "an unchanged run must not write: the operator re-registers on every change")
	t.Logf("proved: a second run with the same findings left %s at resourceVersion %s (outcome %q)", kube.SecretName, after.ResourceVersion, s["outcome"])
}

// testOperatorMetadataSurvives: our server-side apply over a Secret the
// operator already labelled changes our keys only.
func (e *clusterEnv) testOperatorMetadataSurvives(t *testing.T, c cloud) {
	ctx := testContext(t)
	e.deleteSecret(ctx, t)
	labels := map[string]string{
		"app.kubernetes.io/managed-by": "rancher-scc-operator",
		"scc.cattle.io/managed-by":     "rancher-scc-operator",
		"scc.cattle.io/instance-salt":  "a1b2c3d4e5",
	}
	annotations := map[string]string{"scc.cattle.io/last-processed": "2025-01-01T00:00:00Z"}
	_, err := e.admin.CoreV1().Secrets(kube.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kube.SecretName, Labels: labels, Annotations: annotations},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			"operatorKey":               []byte("kept"),
			kube.KeyRegistrationURL:     []byte("https://old-server.example"),
			kube.KeyRegistrationType:    []byte("offline"),
			kube.KeyRegCode:             []byte("OLD-CODE"),
			kube.KeyInstanceData:        []byte("old"),
			kube.KeyRegistrationURLCert: []byte("old"),
		},
	}, metav1.CreateOptions{FieldManager: "rancher-scc-operator"})
	require.NoError(t, err)

	res := e.runAs(ctx, t, c, e.token(t), "run-operator")
	require.Equal(t, job.ExitOK, res.code, res.String())
	assert.Equal(t, job.OutcomeRegistered, summary(t, res.stderr)["outcome"])

	s := e.secret(ctx, t)
	assertRegistration(t, s, directRegCode)
	assert.Equal(t, "kept", string(s.Data["operatorKey"]), "another manager's data key")
	for k, v := range labels {
		assert.Equal(t, v, s.Labels[k], "label %s", k)
	}
	for k, v := range annotations {
		assert.Equal(t, v, s.Annotations[k], "annotation %s", k)
	}
	t.Logf("proved: server-side apply over the operator's Secret set our five keys and kept its labels %v, its annotation and its own data key", slices.Sorted(maps.Keys(labels)))
}

// noRegCode is the environment of a run with no registration code
// configured: the later, empty REGISTRATION_CODE wins over runEnv's.
const noRegCode = "REGISTRATION_CODE="

// testNoCodeKeepsCode: a run with no registration code configured leaves a
// non-empty regCode alone, both when this engine applied it (server-side
// apply deletes a field its manager applied before and now omits) and when
// the operator adopted the Secret, whose labels and finalizer stay.
func (e *clusterEnv) testNoCodeKeepsCode(t *testing.T, c cloud) {
	const operatorCode = "OPERATOR-SET-CODE"
	tests := map[string]struct {
		// adopt runs after a run with a code created the Secret.
		adopt func(ctx context.Context, t *testing.T)
		code  string // the regCode that must survive
	}{
		"written by an earlier run of the engine": {
			code:  directRegCode,
			adopt: func(context.Context, *testing.T) {},
		},
		"adopted by the operator": {
			code: operatorCode,
			adopt: func(ctx context.Context, t *testing.T) {
				// What rancher/scc-operator does on adoption, as its own
				// manager: labels, a finalizer, and here a new code.
				patch := `{"metadata":{"labels":{"scc.cattle.io/managed-by":"rancher-scc-operator","scc.cattle.io/instance-salt":"a1b2c3d4e5"},` +
					`"finalizers":["scc.cattle.io/registration-secret"]},"data":{"regCode":"` + base64.StdEncoding.EncodeToString([]byte(operatorCode)) + `"}}`
				_, err := e.admin.CoreV1().Secrets(kube.Namespace).Patch(ctx, kube.SecretName, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "rancher-scc-operator"})
				require.NoError(t, err)
				t.Cleanup(func() { e.dropFinalizers(t) })
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			e.deleteSecret(ctx, t)
			first := e.runAs(ctx, t, c, e.token(t), "run-with-code")
			require.Equal(t, job.ExitOK, first.code, first.String())
			tc.adopt(ctx, t)
			// A key this engine owns goes stale, so the run must apply.
			_, err := e.admin.CoreV1().Secrets(kube.Namespace).Patch(ctx, kube.SecretName, types.MergePatchType,
				[]byte(`{"data":{"instanceData":"c3RhbGU="}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"})
			require.NoError(t, err)
			before := e.secret(ctx, t)

			res := e.runAs(ctx, t, c, e.token(t), "run-no-code", noRegCode)
			require.Equal(t, job.ExitOK, res.code, res.String())
			assert.Equal(t, job.OutcomeRegistered, summary(t, res.stderr)["outcome"], "the stale key was written")

			after := e.secret(ctx, t)
			assertRegistration(t, after, tc.code)
			assert.Equal(t, before.Labels, after.Labels, "another manager's labels")
			assert.Equal(t, before.Finalizers, after.Finalizers, "another manager's finalizers")
			t.Logf("proved: a run with no registration code configured rewrote instanceData and kept regCode %q (%s), labels %v, finalizers %v",
				tc.code, name, slices.Sorted(maps.Keys(after.Labels)), after.Finalizers)
		})
	}
}

// testFirstInstallWithoutCode: with no code configured and no Secret, the
// run fails permanently (exit 2), says where the code comes from, writes
// no Secret and leaves CoreDNS as it was, though IN_CLUSTER_DNS is on.
func (e *clusterEnv) testFirstInstallWithoutCode(t *testing.T, c cloud) {
	ctx := testContext(t)
	e.deleteSecret(ctx, t)
	e.resetCoreDNS(ctx, t)
	cms := e.admin.CoreV1().ConfigMaps("kube-system")
	before, err := cms.Get(ctx, inclusterdns.CoreDNSConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	res := e.runAs(ctx, t, c, e.token(t), "run-first-no-code", noRegCode, "IN_CLUSTER_DNS=true")
	assert.Equal(t, job.ExitPermanent, res.code, res.String())
	s := summary(t, res.stderr)
	assert.Equal(t, "write-secret", s["failedPhase"])
	msg, _ := s["error"].(string)
	assert.Contains(t, msg, kube.ErrNoRegCode.Error())
	for _, where := range []string{"REGISTRATION_CODE", "REG_CODE", "REGCODE", "registration-code"} {
		assert.Contains(t, msg, where, "the error says where the code must come from")
	}
	assert.Empty(t, e.secretVersion(ctx, t), "no Secret written")
	after, err := cms.Get(ctx, inclusterdns.CoreDNSConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "CoreDNS is not edited for a run that cannot write")
	assert.Nil(t, logLine(t, res.stderr, handedOverMsg), "no handover waited for")
	t.Logf("proved: a first install with no registration code exits %d after %s, writes no Secret, leaves kube-system/coredns at resourceVersion %s, and says %q",
		res.code, res.took.Round(time.Millisecond), after.ResourceVersion, msg)
}

// dropFinalizers removes the finalizers a test put on the Secret, so that
// the next test can delete it.
func (e *clusterEnv) dropFinalizers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := e.admin.CoreV1().Secrets(kube.Namespace).Patch(ctx, kube.SecretName, types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	assert.True(t, err == nil || apierrors.IsNotFound(err), "drop finalizers: %v", err)
}

// testTwoRuns: of two runs at once, the one that finds the Lease held exits
// 0 as skipped naming the holder, and the Secret is written once.
func (e *clusterEnv) testTwoRuns(t *testing.T) {
	ctx := testContext(t)
	// A slow IMDS holds run A in phases 1 and 2 for seconds, with the
	// Lease taken.
	c := startCloud(t, "slow-imds")
	e.deleteSecret(ctx, t)
	secrets := e.admin.CoreV1().Secrets(kube.Namespace)
	sel := fields.OneTermEqualSelector("metadata.name", kube.SecretName).String()
	list, err := secrets.List(ctx, metav1.ListOptions{FieldSelector: sel})
	require.NoError(t, err)
	w, err := secrets.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()

	token := e.token(t)
	waitA, err := startEngine(ctx, e.runEnv(t, c, token, "run-a"))
	require.NoError(t, err)
	var resA result
	doneA := make(chan struct{})
	go func() {
		defer close(doneA)
		resA, _ = waitA()
	}()

	// B starts only once the API server shows A holding the Lease.
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case <-doneA:
			return false, errors.New("run A finished before it was seen holding the Lease")
		default:
		}
		l, err := e.admin.CoordinationV1().Leases(kube.Namespace).Get(ctx, leaseName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "run-a", err
	})
	require.NoError(t, err)
	resB := e.runAs(ctx, t, c, token, "run-b")
	<-doneA
	require.Equal(t, job.ExitOK, resA.code, "run A: %s", resA)
	require.Equal(t, job.ExitOK, resB.code, "run B: %s", resB)
	assert.Equal(t, job.OutcomeRegistered, summary(t, resA.stderr)["outcome"], "run A")
	assert.Equal(t, job.OutcomeSkipped, summary(t, resB.stderr)["outcome"], "run B")
	skip := logLine(t, resB.stderr, "another run holds the lease; skipping this run")
	require.NotNil(t, skip, resB.stderr)
	assert.Contains(t, skip["reason"], "held by run-a", "B's log names the holder")

	final := e.secret(ctx, t)
	writes := countWrites(ctx, t, w, final.ResourceVersion)
	assert.Equal(t, 1, writes, "exactly one run wrote the Secret")
	t.Logf("proved: while run A held the Lease (A took %s), run B exited 0 as %q in %s, logging %q; the Secret was written %d time(s)",
		resA.took.Round(time.Millisecond), job.OutcomeSkipped, resB.took.Round(time.Millisecond), skip["reason"], writes)
}

// testStaleLease: a Lease left by a run that died is taken over once it has
// expired, and released at the end.
func (e *clusterEnv) testStaleLease(t *testing.T, c cloud) {
	ctx := testContext(t)
	e.putLease(ctx, t, "crashed-run", time.Now().Add(-time.Hour), 60)

	res := e.runAs(ctx, t, c, e.token(t), "run-after-crash")
	require.Equal(t, job.ExitOK, res.code, res.String())
	assert.NotEqual(t, job.OutcomeSkipped, summary(t, res.stderr)["outcome"])
	took := logLine(t, res.stderr, "took over an expired lease")
	require.NotNil(t, took, res.stderr)
	assert.Equal(t, "crashed-run", took["previousHolder"])

	l, err := e.admin.CoordinationV1().Leases(kube.Namespace).Get(ctx, leaseName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, l.Spec.HolderIdentity, "released at the end of the run")
	require.NotNil(t, l.Spec.LeaseTransitions)
	assert.Equal(t, int32(1), *l.Spec.LeaseTransitions)
	t.Logf("proved: a Lease left by crashed-run (renewed 1 h ago, 60 s duration) was taken over, the run finished %q and released it",
		summary(t, res.stderr)["outcome"])
}

// testRejectedToken: a token the API server rejects (401) fails the run as
// transient (exit 1: the Job's next pod gets a fresh token) with a message
// that says why, and writes nothing.
func (e *clusterEnv) testRejectedToken(t *testing.T, c cloud) {
	tests := map[string]struct {
		token func(t *testing.T) string
	}{
		"garbage": {token: func(*testing.T) string { return "not-a-token" }},
		"of a deleted ServiceAccount": {token: func(t *testing.T) string {
			ctx := testContext(t)
			sas := e.admin.CoreV1().ServiceAccounts(kube.Namespace)
			sa, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{GenerateName: "revoked-"}}, metav1.CreateOptions{})
			require.NoError(t, err)
			name := sa.Name
			token := e.p.ServiceAccountToken(t, kube.Namespace, name)
			require.NoError(t, sas.Delete(ctx, name, metav1.DeleteOptions{}))
			// The authenticator learns of the deletion from its cache.
			as := kubernetes.NewForConfigOrDie(e.p.ClientAs(t, token))
			require.NoError(t, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err := as.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
				return apierrors.IsUnauthorized(err), nil
			}), "the token of a deleted ServiceAccount is still accepted")
			return token
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			before := e.secretVersion(ctx, t)
			res := e.runAs(ctx, t, c, tc.token(t), "run-rejected")
			assert.Equal(t, job.ExitTransient, res.code, "a 401 is transient: the Job's next pod gets a fresh token\n%s", res)
			s := summary(t, res.stderr)
			assert.Equal(t, "lease", s["failedPhase"], "the first request, the Lease, is refused")
			assert.Contains(t, s["error"], kube.ErrUnauthorized.Error())
			assert.Equal(t, before, e.secretVersion(ctx, t), "nothing written")
			t.Logf("proved: token %s: the engine exits %d (transient) and says %q", name, res.code, kube.ErrUnauthorized)
		})
	}
}

// testCorefile: without coredns-custom the hosts entry goes into the
// Corefile of kube-system/coredns, once.
func (e *clusterEnv) testCorefile(t *testing.T, c cloud) {
	ctx := testContext(t)
	e.resetCoreDNS(ctx, t)
	cms := e.admin.CoreV1().ConfigMaps("kube-system")
	deps := e.admin.AppsV1().Deployments("kube-system")
	dep0, err := deps.Get(ctx, inclusterdns.CoreDNSDeployment, metav1.GetOptions{})
	require.NoError(t, err)

	first := e.runAs(ctx, t, c, e.token(t), "run-dns-1", "IN_CLUSTER_DNS=true")
	require.Equal(t, job.ExitOK, first.code, first.String())
	addr, _ := summary(t, first.stderr)["address"].(string)
	require.NotEmpty(t, addr, first.stderr)
	cm1, err := cms.Get(ctx, inclusterdns.CoreDNSConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	block := "    hosts {\n        " + addr + " " + updateServer + "\n        ttl 15\n        fallthrough\n    }\n"
	assert.Equal(t, strings.Replace(e.corefile, ".:53 {\n", ".:53 {\n"+block, 1), cm1.Data[inclusterdns.CorefileKey],
		"the hosts block goes first into the root server block; every other line stays")
	dep1, err := deps.Get(ctx, inclusterdns.CoreDNSDeployment, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, dep0.Generation, dep1.Generation, "the Corefile has reload: no restart")
	handed := logLine(t, first.stderr, handedOverMsg)
	require.NotNil(t, handed, "the Secret is written only after the name resolved through the cluster's DNS:\n%s", first.stderr)
	assert.Equal(t, "kube-system/coredns", handed["coredns"])
	assert.NotContains(t, first.stderr, "cannot list CoreDNS's replicas", "the Role lets the engine list kube-dns's EndpointSlices")

	second := e.runAs(ctx, t, c, e.token(t), "run-dns-2", "IN_CLUSTER_DNS=true")
	require.Equal(t, job.ExitOK, second.code, second.String())
	require.Equal(t, addr, summary(t, second.stderr)["address"], "the race chose the same address")
	cm2, err := cms.Get(ctx, inclusterdns.CoreDNSConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	dep2, err := deps.Get(ctx, inclusterdns.CoreDNSDeployment, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, cm1.ResourceVersion, cm2.ResourceVersion, "second run: Corefile untouched")
	assert.Equal(t, dep1.Generation, dep2.Generation, "second run: no restart")
	assert.Equal(t, dep1.Spec.Template.Annotations, dep2.Spec.Template.Annotations)
	t.Logf("proved: kube-system/coredns got \"%s %s\" in its root block's hosts block (Deployment generation %d untouched); a second run changed nothing",
		addr, updateServer, dep2.Generation)
}

// testCorednsCustom: with coredns-custom (AKS: its Corefile imports the
// keys) the hosts block goes under our key there, and CoreDNS's Deployment
// is left alone: the real CoreDNS behind e.dns loads the key, so the run's
// handover wait passes, and the Role grants nothing on the Deployment.
func (e *clusterEnv) testCorednsCustom(t *testing.T, c cloud) {
	ctx := testContext(t)
	e.resetCoreDNS(ctx, t)
	cms := e.admin.CoreV1().ConfigMaps("kube-system")
	deps := e.admin.AppsV1().Deployments("kube-system")
	core, err := cms.Get(ctx, inclusterdns.CoreDNSConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	core.Data[inclusterdns.CorefileKey] = fakecloud.AKSCorefile
	_, err = cms.Update(ctx, core, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: inclusterdns.CoreDNSCustom},
		Data:       map[string]string{"log.override": "log\n"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { e.resetCoreDNS(context.Background(), t) })
	core0, err := cms.Get(ctx, inclusterdns.CoreDNSConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	dep0, err := deps.Get(ctx, inclusterdns.CoreDNSDeployment, metav1.GetOptions{})
	require.NoError(t, err)

	first := e.runAs(ctx, t, c, e.token(t), "run-aks-1", "IN_CLUSTER_DNS=true")
	require.Equal(t, job.ExitOK, first.code, first.String())
	addr, _ := summary(t, first.stderr)["address"].(string)
	require.NotEmpty(t, addr, first.stderr)
	custom1, err := cms.Get(ctx, inclusterdns.CoreDNSCustom, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "hosts {\n    "+addr+" "+updateServer+"\n    ttl 15\n    fallthrough\n}\n", custom1.Data[inclusterdns.DefaultHostsKey])
	assert.Equal(t, "log\n", custom1.Data["log.override"], "other keys stay")
	dep1, err := deps.Get(ctx, inclusterdns.CoreDNSDeployment, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, dep0.Generation, dep1.Generation, "no restart: reload loads coredns-custom")
	assert.Equal(t, dep0.Spec.Template.Annotations, dep1.Spec.Template.Annotations)

	second := e.runAs(ctx, t, c, e.token(t), "run-aks-2", "IN_CLUSTER_DNS=true")
	require.Equal(t, job.ExitOK, second.code, second.String())
	require.Equal(t, addr, summary(t, second.stderr)["address"], "the race chose the same address")
	custom2, err := cms.Get(ctx, inclusterdns.CoreDNSCustom, metav1.GetOptions{})
	require.NoError(t, err)
	dep2, err := deps.Get(ctx, inclusterdns.CoreDNSDeployment, metav1.GetOptions{})
	require.NoError(t, err)
	core2, err := cms.Get(ctx, inclusterdns.CoreDNSConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, custom1.ResourceVersion, custom2.ResourceVersion, "second run: coredns-custom untouched")
	assert.Equal(t, dep1.Generation, dep2.Generation, "second run: no restart")
	assert.Equal(t, dep1.Spec.Template.Annotations, dep2.Spec.Template.Annotations)
	assert.Equal(t, core0.ResourceVersion, core2.ResourceVersion, "with coredns-custom present the Corefile is never edited (AKS reverts it)")
	t.Logf("proved: with coredns-custom present, key %s holds the hosts block for %s and the Deployment was not touched (generation %d → %d); a second run changed nothing",
		inclusterdns.DefaultHostsKey, addr, dep0.Generation, dep2.Generation)
}

// testManualJob: a Job made by `kubectl create job --from=cronjob/…` runs
// at once, without the startup sleep, and registers.
func (e *clusterEnv) testManualJob(t *testing.T, c cloud) {
	ctx := testContext(t)
	e.deleteSecret(ctx, t)
	runs := e.startKubelet(ctx, t, kube.Namespace, c)
	const name = "manual-1"
	e.p.Kubectl(t, "-n", kube.Namespace, "create", "job", "--from=cronjob/"+cronJobName, name)
	t.Cleanup(func() { e.deleteJob(t, kube.Namespace, name) })
	j, err := e.admin.BatchV1().Jobs(kube.Namespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "manual", j.Annotations["cronjob.kubernetes.io/instantiate"])
	owner := metav1.GetControllerOf(j)
	require.NotNil(t, owner)
	assert.Equal(t, "CronJob", owner.Kind)
	assert.Equal(t, cronJobName, owner.Name)

	pr := e.completedRun(ctx, t, runs, name)
	assertRegistration(t, e.secret(ctx, t), overlayRegCode)
	start := logLine(t, pr.res.stderr, "starting without a startup sleep")
	require.NotNil(t, start, pr.res.stderr)
	assert.Equal(t, false, start["scheduled"])
	assert.Nil(t, logLine(t, pr.res.stderr, scheduledSleepMsg))
	assert.Equal(t, job.OutcomeRegistered, summary(t, pr.res.stderr)["outcome"])
	t.Logf("proved: `kubectl create job --from=cronjob/%s %s` ran pod %s without a startup sleep, the Job completed and the Secret carries the CronJob's registration code (pod ran %s)",
		cronJobName, name, pr.pod, pr.res.took.Round(time.Millisecond))
}

// completedRun waits for Job name in cattle-scc-system to finish, requires
// that it completed with exactly one pod, and returns that pod's run.
func (e *clusterEnv) completedRun(ctx context.Context, t *testing.T, runs *podRuns, name string) podRun {
	t.Helper()
	done := controlplane.WaitJobFinished(ctx, t, e.admin, kube.Namespace, name)
	cond := controlplane.FinishedCondition(done)
	require.NotNil(t, cond)
	pr := runs.forJob(t, name)
	require.Len(t, pr, 1, "one pod")
	require.Equal(t, batchv1.JobComplete, cond.Type, "%s: %s\n%s", cond.Reason, cond.Message, pr[0].res)
	return pr[0]
}

// testPermanentFailureJob: exit 2 fails the Job through the CronJob's
// podFailurePolicy, without a second pod.
func (e *clusterEnv) testPermanentFailureJob(t *testing.T) {
	ctx := testContext(t)
	c := startCloud(t, "wrong-plan")
	before := e.secretVersion(ctx, t)
	runs := e.startKubelet(ctx, t, kube.Namespace, c)
	const name = "manual-wrong-plan"
	e.p.Kubectl(t, "-n", kube.Namespace, "create", "job", "--from=cronjob/"+cronJobName, name)
	t.Cleanup(func() { e.deleteJob(t, kube.Namespace, name) })

	done := controlplane.WaitJobFinished(ctx, t, e.admin, kube.Namespace, name)
	cond := controlplane.FinishedCondition(done)
	require.NotNil(t, cond)
	assert.Equal(t, batchv1.JobFailed, cond.Type)
	assert.Equal(t, batchv1.JobReasonPodFailurePolicy, cond.Reason, cond.Message)
	assert.Equal(t, int32(1), done.Status.Failed)
	pods, err := e.admin.CoreV1().Pods(kube.Namespace).List(ctx, metav1.ListOptions{LabelSelector: jobNameLabel + "=" + name})
	require.NoError(t, err)
	assert.Len(t, pods.Items, 1, "no second pod: the FailJob rule stops the retries")
	pr := runs.forJob(t, name)
	require.Len(t, pr, 1)
	assert.Equal(t, job.ExitPermanent, pr[0].res.code, pr[0].res.String())
	assert.Equal(t, "prove", summary(t, pr[0].res.stderr)["failedPhase"])
	assert.Equal(t, before, e.secretVersion(ctx, t), "a failed run writes nothing")
	t.Logf("proved: a Marketplace plan mismatch exits %d and the Job fails through its podFailurePolicy (%s: %s) after exactly one pod",
		pr[0].res.code, cond.Reason, cond.Message)
}

// handedOverMsg is the engine's log line when the handover wait saw the
// name resolve and the pinned certificate answer.
const handedOverMsg = "update server reachable through the cluster: handing over"

const scheduledSleepMsg = "scheduled run: sleeping before the first request so that clusters spread their load"

// testScheduledRun copies the e2e CronJob, its ServiceAccount and Role into
// a namespace of its own (so the wait for the next minute overlaps the
// other cases instead of queueing for cattle-scc-system's Lease), makes it
// fire every minute, and lets the controller-manager start it.
func (e *clusterEnv) testScheduledRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const tickName = "registration-engine-tick"
	ns, err := e.admin.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "scc-tick-"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = e.admin.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	objs := e.overlayObjects(t)
	sa, role, rb, cj := objs.sa, objs.role, objs.roleBinding, objs.cronJob
	for _, o := range []metav1.Object{sa, role, rb, cj} {
		o.SetNamespace(ns.Name)
	}
	for i := range rb.Subjects {
		rb.Subjects[i].Namespace = ns.Name
	}
	cj.Name = tickName
	cj.Spec.Schedule = "* * * * *"
	cj.Spec.Suspend = ptr.To(false)
	controlplane.SetEnv(&cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0], map[string]string{
		"CRONJOB_NAME":      tickName,
		"STARTUP_SLEEP_MAX": "2s",
		// kube-system's CoreDNS belongs to the other track.
		"IN_CLUSTER_DNS": "false",
	})
	_, err = e.admin.CoreV1().ServiceAccounts(ns.Name).Create(ctx, sa, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = e.admin.RbacV1().Roles(ns.Name).Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = e.admin.RbacV1().RoleBindings(ns.Name).Create(ctx, rb, metav1.CreateOptions{})
	require.NoError(t, err)

	c := startCloud(t)
	runs := e.startKubelet(ctx, t, ns.Name, c)
	created := time.Now()
	_, err = e.admin.BatchV1().CronJobs(ns.Name).Create(ctx, cj, metav1.CreateOptions{})
	require.NoError(t, err)

	// The controller fires at the next full minute.
	var scheduled *batchv1.Job
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 75*time.Second, true, func(ctx context.Context) (bool, error) {
		jobs, err := e.admin.BatchV1().Jobs(ns.Name).List(ctx, metav1.ListOptions{})
		if err != nil || len(jobs.Items) == 0 {
			return false, err
		}
		scheduled = &jobs.Items[0]
		return true, nil
	}), "the controller-manager created no Job within 75 s")
	fired := time.Since(created)
	// One scheduled run is enough; the next minute must not start another.
	_, err = e.admin.BatchV1().CronJobs(ns.Name).Patch(ctx, tickName, types.MergePatchType,
		[]byte(`{"spec":{"suspend":true}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Regexp(t, `^`+tickName+`-[0-9]+$`, scheduled.Name, "the CronJob controller's naming, which ScheduledRun relies on")
	assert.NotContains(t, scheduled.Annotations, "cronjob.kubernetes.io/instantiate")

	done := controlplane.WaitJobFinished(ctx, t, e.admin, ns.Name, scheduled.Name)
	cond := controlplane.FinishedCondition(done)
	require.NotNil(t, cond)
	pr := runs.forJob(t, scheduled.Name)
	require.Len(t, pr, 1, "one pod")
	require.Equal(t, batchv1.JobComplete, cond.Type, "%s: %s\n%s", cond.Reason, cond.Message, pr[0].res)
	sleep := logLine(t, pr[0].res.stderr, scheduledSleepMsg)
	require.NotNil(t, sleep, "the scheduled run takes the startup sleep:\n%s", pr[0].res.stderr)
	assert.Equal(t, "2s", sleep["sleepMax"])
	sleepText, _ := sleep["sleep"].(string)
	slept, err := time.ParseDuration(sleepText)
	require.NoError(t, err, "the sleep is logged as a duration: %v", sleep["sleep"])
	assert.Less(t, slept, 2*time.Second)
	assert.Equal(t, job.OutcomeRegistered, summary(t, pr[0].res.stderr)["outcome"])
	s, err := e.admin.CoreV1().Secrets(ns.Name).Get(ctx, kube.SecretName, metav1.GetOptions{})
	require.NoError(t, err)
	assertRegistration(t, s, overlayRegCode)
	t.Logf("proved: the controller-manager created Job %s %s after the CronJob, its pod took the startup sleep (%s of at most 2s) and the Job completed",
		scheduled.Name, fired.Round(time.Second), slept.Round(time.Millisecond))
}

// ---- running the engine ----------------------------------------------

// token mints a TokenRequest token for the engine's ServiceAccount.
func (e *clusterEnv) token(t *testing.T) string {
	return e.p.ServiceAccountToken(t, kube.Namespace, engineSA)
}

// runEnv is the environment of a run the test starts itself: the fake
// cloud's, plus what a pod of the engine's ServiceAccount would have (the API
// server's address, its token in a file, its CA), the Lease holder, and no
// CoreDNS step unless extra turns it on. Later entries win.
func (e *clusterEnv) runEnv(t *testing.T, c cloud, token, podName string, extra ...string) []string {
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token), 0o600))
	env := append(slices.Clone(c.Env),
		"REGISTRATION_CODE="+directRegCode,
		"KUBERNETES_SERVICE_HOST="+e.p.Host,
		"KUBERNETES_SERVICE_PORT="+e.p.Port,
		"KUBERNETES_TOKEN="+tokenFile,
		"KUBERNETES_CA_CERT="+e.p.CAFile,
		"POD_NAME="+podName,
		"IN_CLUSTER_DNS=false",
		// A process has no cluster DNS: the handover wait asks e.dns.
		"HANDOVER_DNS_SERVER="+e.dns.Addr,
	)
	return append(env, extra...)
}

func (e *clusterEnv) runAs(ctx context.Context, t *testing.T, c cloud, token, podName string, extra ...string) result {
	return runEngine(t, ctx, e.runEnv(t, c, token, podName, extra...))
}

// ---- the process kubelet ----------------------------------------------

// kubeletRedirects are the variables the process kubelet takes from the fake
// cloud instead of from the pod. A host process has no volumes, so every
// file the pod spec mounts (the federated token, the CA bundle, the attested
// document's roots, the region-server configuration with its certificate
// directory, DMI) is replaced by the fake cloud's own file; and the fake
// cloud listens on random loopback ports no manifest can name. Everything
// else comes from the pod as the API server built it: the Workload Identity
// IDs, the extension and the plan (which must equal the fake cloud's, see
// kubeletMustMatch), the registration code, the names from the downward API,
// the startup sleep and the CoreDNS switch.
var kubeletRedirects = []string{
	// Endpoints.
	"AZURE_IMDS_ENDPOINT", "GCP_METADATA_ENDPOINTS", "AWS_IMDS_ENDPOINTS", "AZURE_AUTHORITY_HOST",
	"ARM_ENDPOINT", "AIA_ALLOWED_HOSTS", "REGION_SERVER_PORT", "UPDATE_SERVER_HTTPS_PORT", "UPDATE_SERVER_HTTP_PORT",
	// The fake cloud's update servers listen on loopback, where a pod's
	// fake (kind) listens on the pod's address and needs no exception.
	"UPDATE_SERVER_ALLOW_LOOPBACK",
	// Files from volumes.
	"AZURE_FEDERATED_TOKEN_FILE", "SSL_CERT_FILE", "ATTESTATION_ROOTS_FILE", "REGIONSRV_CONFIG", "DMI_DIR_PATH",
}

// kubeletMustMatch are set by manifests/overlays/e2e and by the fake cloud
// alike; a difference means the overlay drifted from DefaultAzureConfig.
var kubeletMustMatch = []string{
	"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "EXTENSION_RESOURCE_ID",
	"MARKETPLACE_PUBLISHER_ID", "MARKETPLACE_OFFER_ID", "MARKETPLACE_PLAN_ID",
}

// kubeletIgnores are the fake cloud's settings for runs outside a pod that
// the pod sets for itself.
var kubeletIgnores = []string{"STARTUP_SLEEP_MAX", "VERIFY_RETRY_BACKOFF"}

// workloadIdentityOnly are what the Workload Identity webhook injects into a
// pod labelled for it (the token file, the authority, the IDs). A pod in
// managed-identity mode gets none of them, as on AKS: its AZURE_CLIENT_ID is
// the extension's identity, which the fake IMDS must know.
var workloadIdentityOnly = []string{"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST"}

// kubeletEnv turns a pod's environment into the engine's: podEnv overlaid by
// the fake cloud's kubeletRedirects, plus KUBERNETES_TOKEN (a file holding
// the token the kubelet minted for the pod, where the projected
// ServiceAccount volume would put it) and KUBERNETES_CA_CERT (the plane's
// CA, that volume's ca.crt).
func kubeletEnv(podEnv []string, c cloud, tokenFile, caFile string) ([]string, error) {
	cloudEnv := c.env()
	pod := map[string]string{}
	for _, kv := range podEnv {
		k, v, _ := strings.Cut(kv, "=")
		pod[k] = v
	}
	var errs []error
	for k := range cloudEnv {
		if !slices.Contains(kubeletRedirects, k) && !slices.Contains(kubeletMustMatch, k) && !slices.Contains(kubeletIgnores, k) {
			errs = append(errs, fmt.Errorf("the fake cloud sets %s, which the process kubelet neither redirects nor checks", k))
		}
	}
	managed := pod["AZURE_CREDENTIAL_MODE"] == "managed-identity"
	for _, k := range kubeletMustMatch {
		want := cloudEnv[k]
		if managed && slices.Contains(workloadIdentityOnly, k) {
			want = ""
			if k == "AZURE_CLIENT_ID" {
				want = fakecloud.DefaultAzureConfig().ManagedIdentityClientID
			}
		}
		if pod[k] != want {
			errs = append(errs, fmt.Errorf("%s: the pod has %q, the fake cloud wants %q (align manifests/overlays/e2e/cronjob.yaml or the chart's values)", k, pod[k], want))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	env := slices.Clone(podEnv)
	for _, k := range kubeletRedirects {
		if managed && slices.Contains(workloadIdentityOnly, k) {
			continue
		}
		env = append(env, k+"="+cloudEnv[k])
	}
	return append(env, "KUBERNETES_TOKEN="+tokenFile, "KUBERNETES_CA_CERT="+caFile), nil
}

// podRun is one pod the process kubelet ran.
type podRun struct {
	job, pod string
	res      result
	err      error
}

type podRuns struct {
	mu   sync.Mutex
	runs []podRun
}

// forJob returns the runs of the Job's pods.
func (r *podRuns) forJob(t *testing.T, name string) []podRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []podRun
	for _, p := range r.runs {
		require.NoError(t, p.err, "pod %s", p.pod)
		if p.job == name {
			out = append(out, p)
		}
	}
	return out
}

// startKubelet runs the Jobs' pods of namespace ns as engine processes
// against cloud c until the test ends.
func (e *clusterEnv) startKubelet(ctx context.Context, t *testing.T, ns string, c cloud) *podRuns {
	runs := &podRuns{}
	dir := t.TempDir()
	k := &controlplane.Kubelet{
		Plane: e.p, Namespace: ns, Logf: t.Logf,
		Run: func(ctx context.Context, pod *corev1.Pod, env []string, token string) int {
			pr := podRun{job: pod.Labels[jobNameLabel], pod: pod.Name, res: result{code: -1}}
			defer func() {
				runs.mu.Lock()
				runs.runs = append(runs.runs, pr)
				runs.mu.Unlock()
			}()
			if e.admission != nil {
				if env, pr.err = e.admission(ctx, pod, env); pr.err != nil {
					return 1
				}
			}
			tokenFile := filepath.Join(dir, pod.Name+".token")
			if pr.err = os.WriteFile(tokenFile, []byte(token), 0o600); pr.err != nil {
				return 1
			}
			full, err := kubeletEnv(env, c, tokenFile, e.p.CAFile)
			if pr.err = err; err != nil {
				return 1
			}
			// The pod's resolver would be the cluster's DNS; a process asks e.dns.
			full = append(full, "HANDOVER_DNS_SERVER="+e.dns.Addr)
			wait, err := startEngine(ctx, full, pod.Spec.Containers[0].Args...)
			if pr.err = err; err != nil {
				return 1
			}
			pr.res, pr.err = wait()
			return pr.res.code
		},
	}
	k.Start(ctx)
	t.Cleanup(func() { assert.NoError(t, k.Stop(), "process kubelet") })
	return runs
}

// ---- cluster helpers ---------------------------------------------------

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), clusterDeadline)
	t.Cleanup(cancel)
	return ctx
}

func (e *clusterEnv) secret(ctx context.Context, t *testing.T) *corev1.Secret {
	t.Helper()
	s, err := e.admin.CoreV1().Secrets(kube.Namespace).Get(ctx, kube.SecretName, metav1.GetOptions{})
	require.NoError(t, err)
	return s
}

// secretVersion is the Secret's resourceVersion, "" when there is none.
func (e *clusterEnv) secretVersion(ctx context.Context, t *testing.T) string {
	t.Helper()
	s, err := e.admin.CoreV1().Secrets(kube.Namespace).Get(ctx, kube.SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	require.NoError(t, err)
	return s.ResourceVersion
}

func (e *clusterEnv) deleteSecret(ctx context.Context, t *testing.T) {
	err := e.admin.CoreV1().Secrets(kube.Namespace).Delete(ctx, kube.SecretName, metav1.DeleteOptions{})
	require.True(t, err == nil || apierrors.IsNotFound(err), "delete secret: %v", err)
}

func (e *clusterEnv) deleteLease(t *testing.T) {
	err := e.admin.CoordinationV1().Leases(kube.Namespace).Delete(context.Background(), leaseName, metav1.DeleteOptions{})
	require.True(t, err == nil || apierrors.IsNotFound(err), "delete lease: %v", err)
}

// putLease replaces the engine's Lease with one a run that died left:
// held by holder, acquired and last renewed at renewed, for
// durationSeconds.
func (e *clusterEnv) putLease(ctx context.Context, t *testing.T, holder string, renewed time.Time, durationSeconds int32) {
	t.Helper()
	e.deleteLease(t)
	at := metav1.NewMicroTime(renewed)
	_, err := e.admin.CoordinationV1().Leases(kube.Namespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(durationSeconds),
			AcquireTime: &at, RenewTime: &at,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func (e *clusterEnv) deleteJob(t *testing.T, ns, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := e.admin.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	assert.True(t, err == nil || apierrors.IsNotFound(err), "delete job %s: %v", name, err)
}

// resetCoreDNS puts kube-system back to corednsFixture: no coredns-custom,
// the original Corefile.
func (e *clusterEnv) resetCoreDNS(ctx context.Context, t *testing.T) {
	cms := e.admin.CoreV1().ConfigMaps("kube-system")
	err := cms.Delete(ctx, inclusterdns.CoreDNSCustom, metav1.DeleteOptions{})
	require.True(t, err == nil || apierrors.IsNotFound(err), "delete coredns-custom: %v", err)
	cm, err := cms.Get(ctx, inclusterdns.CoreDNSConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	if cm.Data[inclusterdns.CorefileKey] != e.corefile {
		cm.Data[inclusterdns.CorefileKey] = e.corefile
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

// overlayObjects are the cattle-scc-system objects of the rendered overlay
// that a copy of the CronJob needs.
type overlayObjs struct {
	sa          *corev1.ServiceAccount
	role        *rbacv1.Role
	roleBinding *rbacv1.RoleBinding
	cronJob     *batchv1.CronJob
}

func (e *clusterEnv) overlayObjects(t *testing.T) overlayObjs {
	var o overlayObjs
	for _, doc := range strings.Split(string(e.overlay), "\n---\n") {
		var meta struct {
			metav1.TypeMeta   `json:",inline"`
			metav1.ObjectMeta `json:"metadata"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &meta))
		if meta.Namespace != kube.Namespace {
			continue
		}
		var dst any
		switch meta.Kind {
		case "ServiceAccount":
			o.sa = &corev1.ServiceAccount{}
			dst = o.sa
		case "Role":
			o.role = &rbacv1.Role{}
			dst = o.role
		case "RoleBinding":
			o.roleBinding = &rbacv1.RoleBinding{}
			dst = o.roleBinding
		case "CronJob":
			o.cronJob = &batchv1.CronJob{}
			dst = o.cronJob
		default:
			continue
		}
		require.NoError(t, yaml.UnmarshalStrict([]byte(doc), dst), meta.Kind)
	}
	require.NotNil(t, o.sa)
	require.NotNil(t, o.role)
	require.NotNil(t, o.roleBinding)
	require.NotNil(t, o.cronJob)
	require.Len(t, o.cronJob.Spec.JobTemplate.Spec.Template.Spec.Containers, 1)
	return o
}

// countWrites counts the changes w reports up to and including the one that
// produced resourceVersion final.
func countWrites(ctx context.Context, t *testing.T, w watch.Interface, final string) int {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n := 0
	for {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "watch closed")
			require.NotEqual(t, watch.Error, ev.Type, "%v", ev.Object)
			n++
			if s, ok := ev.Object.(*corev1.Secret); ok && s.ResourceVersion == final {
				return n
			}
		case <-ctx.Done():
			require.FailNow(t, "the watch never showed the Secret's last write")
		}
	}
}

// assertRegistration checks the five keys of the operator's contract.
func assertRegistration(t *testing.T, s *corev1.Secret, regCode string) {
	t.Helper()
	assert.Equal(t, "https://"+updateServer, string(s.Data[kube.KeyRegistrationURL]))
	assert.Equal(t, kube.RegistrationTypeOnline, string(s.Data[kube.KeyRegistrationType]))
	assert.Equal(t, regCode, string(s.Data[kube.KeyRegCode]))
	doc := string(s.Data[kube.KeyInstanceData])
	assert.True(t, strings.HasPrefix(doc, "<document>") && strings.HasSuffix(doc, "</document>"), "instanceData is the <document> of the attested data: %.60q", doc)
	block, _ := pem.Decode(s.Data[kube.KeyRegistrationURLCert])
	require.NotNil(t, block, "registrationUrlCert is PEM")
	assert.Equal(t, "CERTIFICATE", block.Type)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	assert.NoError(t, cert.VerifyHostname(updateServer), "the operator connects to the name in registrationUrl with this certificate")
}

// logLine returns the first JSON log line whose msg is msg, or nil.
func logLine(t *testing.T, stderr, msg string) map[string]any {
	for _, l := range logLines(t, stderr) {
		if l["msg"] == msg {
			return l
		}
	}
	return nil
}

// TestKubeletEnv: the process kubelet gives a workload-identity pod the
// fake cloud's federated token and authority, gives a managed-identity pod
// (the Marketplace default) none of the webhook's variables, and refuses a
// pod whose identity the fake cloud would not know.
func TestKubeletEnv(t *testing.T) {
	c := startCloud(t)
	cloudEnv := c.env()
	azure := fakecloud.DefaultAzureConfig()
	tests := map[string]struct {
		pod map[string]string // beyond the extension and plan
		// wantSet are variables the engine gets from the fake cloud;
		// wantUnset it must not get at all.
		wantSet, wantUnset []string
		wantErr            bool
	}{
		"workload identity: token file and authority from the fake cloud": {
			pod:     map[string]string{"AZURE_CLIENT_ID": azure.ClientID, "AZURE_TENANT_ID": azure.TenantID},
			wantSet: []string{"AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST", "AZURE_IMDS_ENDPOINT", "SSL_CERT_FILE"},
		},
		"managed identity: none of the webhook's variables": {
			pod:       map[string]string{"AZURE_CREDENTIAL_MODE": "managed-identity", "AZURE_CLIENT_ID": azure.ManagedIdentityClientID},
			wantSet:   []string{"AZURE_IMDS_ENDPOINT", "SSL_CERT_FILE"},
			wantUnset: []string{"AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST", "AZURE_TENANT_ID"},
		},
		"managed identity with the workload identity's client ID": {
			pod:     map[string]string{"AZURE_CREDENTIAL_MODE": "managed-identity", "AZURE_CLIENT_ID": azure.ClientID},
			wantErr: true,
		},
		"managed identity with a tenant the webhook would have set": {
			pod:     map[string]string{"AZURE_CREDENTIAL_MODE": "managed-identity", "AZURE_CLIENT_ID": azure.ManagedIdentityClientID, "AZURE_TENANT_ID": azure.TenantID},
			wantErr: true,
		},
		"workload identity with another client ID": {
			pod:     map[string]string{"AZURE_CLIENT_ID": "00000000-0000-0000-0000-000000000000", "AZURE_TENANT_ID": azure.TenantID},
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var podEnv []string
			for _, k := range []string{"EXTENSION_RESOURCE_ID", "MARKETPLACE_PUBLISHER_ID", "MARKETPLACE_OFFER_ID", "MARKETPLACE_PLAN_ID"} {
				podEnv = append(podEnv, k+"="+cloudEnv[k])
			}
			for _, k := range slices.Sorted(maps.Keys(tc.pod)) {
				podEnv = append(podEnv, k+"="+tc.pod[k])
			}
			env, err := kubeletEnv(podEnv, c, "/token", "/ca.crt")
			if tc.wantErr {
				require.Error(t, err)
				assert.Nil(t, env)
				return
			}
			require.NoError(t, err)
			got := cloud{Env: env}.env()
			for _, k := range tc.wantSet {
				assert.Equal(t, cloudEnv[k], got[k], k)
			}
			for _, k := range tc.wantUnset {
				assert.NotContains(t, got, k)
			}
			for k, v := range tc.pod {
				assert.Equal(t, v, got[k], "%s from the pod", k)
			}
			assert.Equal(t, "/token", got["KUBERNETES_TOKEN"])
			assert.Equal(t, "/ca.crt", got["KUBERNETES_CA_CERT"])
		})
	}
}
