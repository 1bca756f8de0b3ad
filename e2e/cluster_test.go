package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/retry"
)

// clusterEnv is the harness's cluster, with TestCluster's cases as its
// methods.
type clusterEnv struct{ *harness.Cluster }

func setupCluster(t *testing.T) *clusterEnv { return &clusterEnv{harness.SetupCluster(t)} }

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
		c := harness.StartCloud(t)
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
		t.Run("a setting the run refuses fails its Job with an Event", func(t *testing.T) { e.testStartFailure(t, c) })
	})
}

// ---- the cases --------------------------------------------------------

// testFirstRun: the engine, as its ServiceAccount under the Role of
// manifests/base, creates the operator's Secret with the five keys.
func (e *clusterEnv) testFirstRun(t *testing.T, c harness.Cloud) {
	ctx := harness.Context(t)
	e.DeleteSecret(ctx, t)
	res := e.RunAs(ctx, t, c, e.Token(t), "run-first")
	require.Equal(t, job.ExitOK, res.Code, res.String())
	assert.Equal(t, job.OutcomeRegistered, summary(t, res.Stderr)["outcome"])

	s := e.Secret(ctx, t)
	harness.AssertRegistration(t, s, harness.DirectRegCode)
	assert.Len(t, s.Data, 5, "exactly the five keys of the operator's contract")
	assert.Equal(t, corev1.SecretTypeOpaque, s.Type)
	assert.NotContains(t, s.Labels, "app.kubernetes.io/managed-by", "the operator refuses a Secret that names a manager")
	t.Logf("proved: the engine, authenticated by a TokenRequest token of %s/%s through KUBERNETES_TOKEN and KUBERNETES_CA_CERT, created %s with its five keys under the least-privilege Role (in %s)",
		operator.Namespace, harness.EngineSA, operator.SecretName, res.Took.Round(time.Millisecond))
}

// testSecondRun: a run that finds the same values writes nothing, so the
// operator does not re-register.
func (e *clusterEnv) testSecondRun(t *testing.T, c harness.Cloud) {
	ctx := harness.Context(t)
	if e.SecretVersion(ctx, t) == "" { // run alone: the first run's write
		first := e.RunAs(ctx, t, c, e.Token(t), "run-first")
		require.Equal(t, job.ExitOK, first.Code, first.String())
	}
	before := e.Secret(ctx, t)
	res := e.RunAs(ctx, t, c, e.Token(t), "run-second")
	require.Equal(t, job.ExitOK, res.Code, res.String())
	s := summary(t, res.Stderr)
	assert.Equal(t, job.OutcomeUnchanged, s["outcome"])
	assert.Equal(t, false, s["changed"])
	after := e.Secret(ctx, t)
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "an unchanged run must not write: the operator re-registers on every change")
	t.Logf("proved: a second run with the same findings left %s at resourceVersion %s (outcome %q)", operator.SecretName, after.ResourceVersion, s["outcome"])
}

// testOperatorMetadataSurvives: our server-side apply over a Secret the
// operator already labelled changes our keys only.
func (e *clusterEnv) testOperatorMetadataSurvives(t *testing.T, c harness.Cloud) {
	ctx := harness.Context(t)
	e.DeleteSecret(ctx, t)
	labels := map[string]string{
		"app.kubernetes.io/managed-by": "rancher-scc-operator",
		"scc.cattle.io/managed-by":     "rancher-scc-operator",
		"scc.cattle.io/instance-salt":  "a1b2c3d4e5",
	}
	annotations := map[string]string{"scc.cattle.io/last-processed": "2025-01-01T00:00:00Z"}
	_, err := e.Admin.CoreV1().Secrets(operator.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: operator.SecretName, Labels: labels, Annotations: annotations},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			"operatorKey":                   []byte("kept"),
			operator.KeyRegistrationURL:     []byte("https://old-server.example"),
			operator.KeyRegistrationType:    []byte("offline"),
			operator.KeyRegCode:             []byte("OLD-CODE"),
			operator.KeyInstanceData:        []byte("old"),
			operator.KeyRegistrationURLCert: []byte("old"),
		},
	}, metav1.CreateOptions{FieldManager: "rancher-scc-operator"})
	require.NoError(t, err)

	res := e.RunAs(ctx, t, c, e.Token(t), "run-operator")
	require.Equal(t, job.ExitOK, res.Code, res.String())
	assert.Equal(t, job.OutcomeRegistered, summary(t, res.Stderr)["outcome"])

	s := e.Secret(ctx, t)
	harness.AssertRegistration(t, s, harness.DirectRegCode)
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
func (e *clusterEnv) testNoCodeKeepsCode(t *testing.T, c harness.Cloud) {
	const operatorCode = "OPERATOR-SET-CODE"
	tests := map[string]struct {
		// adopt runs after a run with a code created the Secret.
		adopt func(ctx context.Context, t *testing.T)
		code  string // the regCode that must survive
	}{
		"written by an earlier run of the engine": {
			code:  harness.DirectRegCode,
			adopt: func(context.Context, *testing.T) {},
		},
		"adopted by the operator": {
			code: operatorCode,
			adopt: func(ctx context.Context, t *testing.T) {
				// What rancher/scc-operator does on adoption, as its own
				// manager: labels, a finalizer, and here a new code.
				patch := `{"metadata":{"labels":{"scc.cattle.io/managed-by":"rancher-scc-operator","scc.cattle.io/instance-salt":"a1b2c3d4e5"},` +
					`"finalizers":["scc.cattle.io/registration-secret"]},"data":{"regCode":"` + base64.StdEncoding.EncodeToString([]byte(operatorCode)) + `"}}`
				_, err := e.Admin.CoreV1().Secrets(operator.Namespace).Patch(ctx, operator.SecretName, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "rancher-scc-operator"})
				require.NoError(t, err)
				t.Cleanup(func() { e.dropFinalizers(t) })
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := harness.Context(t)
			e.DeleteSecret(ctx, t)
			first := e.RunAs(ctx, t, c, e.Token(t), "run-with-code")
			require.Equal(t, job.ExitOK, first.Code, first.String())
			tc.adopt(ctx, t)
			// A key this engine owns goes stale, so the run must apply.
			_, err := e.Admin.CoreV1().Secrets(operator.Namespace).Patch(ctx, operator.SecretName, types.MergePatchType,
				[]byte(`{"data":{"instanceData":"c3RhbGU="}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"})
			require.NoError(t, err)
			before := e.Secret(ctx, t)

			res := e.RunAs(ctx, t, c, e.Token(t), "run-no-code", noRegCode)
			require.Equal(t, job.ExitOK, res.Code, res.String())
			assert.Equal(t, job.OutcomeRegistered, summary(t, res.Stderr)["outcome"], "the stale key was written")

			after := e.Secret(ctx, t)
			harness.AssertRegistration(t, after, tc.code)
			assert.Equal(t, before.Labels, after.Labels, "another manager's labels")
			assert.Equal(t, before.Finalizers, after.Finalizers, "another manager's finalizers")
			t.Logf("proved: a run with no registration code configured rewrote instanceData and kept regCode %q (%s), labels %v, finalizers %v",
				tc.code, name, slices.Sorted(maps.Keys(after.Labels)), after.Finalizers)
		})
	}
}

// testFirstInstallWithoutCode: with no code configured and no Secret, the
// run ends waiting for one: exit 0 (a cluster installed before its code is
// known is not a failing Job every run), outcome waiting-for-code in its
// summary and on the Lease's run record, a Warning Event
// RegistrationCodeMissing on its Job saying how to set the code; it writes
// no Secret and leaves CoreDNS as it was, though IN_CLUSTER_DNS is on.
func (e *clusterEnv) testFirstInstallWithoutCode(t *testing.T, c harness.Cloud) {
	ctx := harness.Context(t)
	e.DeleteSecret(ctx, t)
	e.ResetCoreDNS(ctx, t)
	cms := e.Admin.CoreV1().ConfigMaps("kube-system")
	before, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	const jobName, jobUID = "registration-engine-run-nocode", "6a0e3c3e-0000-4000-8000-00000000c0de"
	res := e.RunAs(ctx, t, c, e.Token(t), "run-first-no-code", noRegCode, "IN_CLUSTER_DNS=true", "JOB_NAME="+jobName, "JOB_UID="+jobUID)
	assert.Equal(t, job.ExitOK, res.Code, res.String())
	s := summary(t, res.Stderr)
	assert.Equal(t, job.OutcomeWaitingForCode, s["outcome"])
	assert.Empty(t, e.SecretVersion(ctx, t), "no Secret written")
	after, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "CoreDNS is not edited for a run that cannot write")
	assert.Nil(t, logLine(t, res.Stderr, handedOverMsg), "no handover waited for")

	le, err := e.Admin.CoordinationV1().Leases(operator.Namespace).Get(ctx, kube.LeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	rec, ok, err := retry.Parse(le.Annotations[kube.AnnotationLastRun])
	require.NoError(t, err)
	require.True(t, ok, "the run is recorded on the Lease")
	assert.Equal(t, retry.OutcomeWaitingForCode, rec.Outcome)
	assert.Zero(t, rec.ConsecutiveFailures, "waiting is no failure")

	evs, err := e.Admin.EventsV1().Events(operator.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + jobName})
	require.NoError(t, err)
	var note string
	for _, ev := range evs.Items {
		if ev.Reason == kube.ReasonCodeMissing {
			assert.Equal(t, corev1.EventTypeWarning, ev.Type)
			note = ev.Note
		}
	}
	require.NotEmpty(t, note, "a RegistrationCodeMissing Event on the Job: %v", evs.Items)
	assert.Contains(t, note, "no registration code yet")
	assert.Contains(t, note, "registrationCode=<code>", "the Event says how to set the code")
	t.Logf("proved: a first install with no registration code exits %d (outcome %s, recorded on the Lease) after %s, writes no Secret, leaves kube-system/coredns at resourceVersion %s, and its Job's Event %s says %q",
		res.Code, rec.Outcome, res.Took.Round(time.Millisecond), after.ResourceVersion, kube.ReasonCodeMissing, note)
}

// dropFinalizers removes the finalizers a test put on the Secret, so that
// the next test can delete it.
func (e *clusterEnv) dropFinalizers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := e.Admin.CoreV1().Secrets(operator.Namespace).Patch(ctx, operator.SecretName, types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	assert.True(t, err == nil || apierrors.IsNotFound(err), "drop finalizers: %v", err)
}

// testTwoRuns: of two runs at once, the one that finds the Lease held exits
// 0 as skipped naming the holder, and the Secret is written once.
func (e *clusterEnv) testTwoRuns(t *testing.T) {
	ctx := harness.Context(t)
	// A slow IMDS holds run A in phases 1 and 2 for seconds, with the
	// Lease taken.
	c := harness.StartCloud(t, "slow-imds")
	e.DeleteSecret(ctx, t)
	secrets := e.Admin.CoreV1().Secrets(operator.Namespace)
	sel := fields.OneTermEqualSelector("metadata.name", operator.SecretName).String()
	list, err := secrets.List(ctx, metav1.ListOptions{FieldSelector: sel})
	require.NoError(t, err)
	w, err := secrets.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()

	token := e.Token(t)
	waitA, err := harness.StartEngine(ctx, e.RunEnv(t, c, token, "run-a"))
	require.NoError(t, err)
	var resA harness.Result
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
		l, err := e.Admin.CoordinationV1().Leases(operator.Namespace).Get(ctx, harness.LeaseName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "run-a", err
	})
	require.NoError(t, err)
	resB := e.RunAs(ctx, t, c, token, "run-b")
	<-doneA
	require.Equal(t, job.ExitOK, resA.Code, "run A: %s", resA)
	require.Equal(t, job.ExitOK, resB.Code, "run B: %s", resB)
	assert.Equal(t, job.OutcomeRegistered, summary(t, resA.Stderr)["outcome"], "run A")
	assert.Equal(t, job.OutcomeSkipped, summary(t, resB.Stderr)["outcome"], "run B")
	skip := logLine(t, resB.Stderr, "another run holds the lease; skipping this run")
	require.NotNil(t, skip, resB.Stderr)
	assert.Contains(t, skip["reason"], "held by run-a", "B's log names the holder")

	final := e.Secret(ctx, t)
	writes := harness.CountWrites(ctx, t, w, final.ResourceVersion)
	assert.Equal(t, 1, writes, "exactly one run wrote the Secret")
	t.Logf("proved: while run A held the Lease (A took %s), run B exited 0 as %q in %s, logging %q; the Secret was written %d time(s)",
		resA.Took.Round(time.Millisecond), job.OutcomeSkipped, resB.Took.Round(time.Millisecond), skip["reason"], writes)
}

// testStaleLease: a Lease left by a run that died is taken over once it has
// expired, and released at the end.
func (e *clusterEnv) testStaleLease(t *testing.T, c harness.Cloud) {
	ctx := harness.Context(t)
	e.PutLease(ctx, t, "crashed-run", time.Now().Add(-time.Hour), 60)

	res := e.RunAs(ctx, t, c, e.Token(t), "run-after-crash")
	require.Equal(t, job.ExitOK, res.Code, res.String())
	assert.NotEqual(t, job.OutcomeSkipped, summary(t, res.Stderr)["outcome"])
	took := logLine(t, res.Stderr, "took over an expired lease")
	require.NotNil(t, took, res.Stderr)
	assert.Equal(t, "crashed-run", took["previousHolder"])

	l, err := e.Admin.CoordinationV1().Leases(operator.Namespace).Get(ctx, harness.LeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, l.Spec.HolderIdentity, "released at the end of the run")
	require.NotNil(t, l.Spec.LeaseTransitions)
	assert.Equal(t, int32(1), *l.Spec.LeaseTransitions)
	t.Logf("proved: a Lease left by crashed-run (renewed 1 h ago, 60 s duration) was taken over, the run finished %q and released it",
		summary(t, res.Stderr)["outcome"])
}

// testRejectedToken: a token the API server rejects (401) fails the run as
// transient (exit 1: the Job's next pod gets a fresh token) with a message
// that says why, and writes nothing.
func (e *clusterEnv) testRejectedToken(t *testing.T, c harness.Cloud) {
	tests := map[string]struct {
		token func(t *testing.T) string
	}{
		"garbage": {token: func(*testing.T) string { return "not-a-token" }},
		"of a deleted ServiceAccount": {token: func(t *testing.T) string {
			ctx := harness.Context(t)
			sas := e.Admin.CoreV1().ServiceAccounts(operator.Namespace)
			sa, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{GenerateName: "revoked-"}}, metav1.CreateOptions{})
			require.NoError(t, err)
			name := sa.Name
			token := e.Plane.ServiceAccountToken(t, operator.Namespace, name)
			require.NoError(t, sas.Delete(ctx, name, metav1.DeleteOptions{}))
			// The authenticator learns of the deletion from its cache.
			as := kubernetes.NewForConfigOrDie(e.Plane.ClientAs(t, token))
			require.NoError(t, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err := as.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
				return apierrors.IsUnauthorized(err), nil
			}), "the token of a deleted ServiceAccount is still accepted")
			return token
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := harness.Context(t)
			before := e.SecretVersion(ctx, t)
			res := e.RunAs(ctx, t, c, tc.token(t), "run-rejected")
			assert.Equal(t, job.ExitTransient, res.Code, "a 401 is transient: the Job's next pod gets a fresh token\n%s", res)
			s := summary(t, res.Stderr)
			assert.Equal(t, "lease", s["failedPhase"], "the first request, the Lease, is refused")
			assert.Contains(t, s["error"], kube.ErrUnauthorized.Error())
			assert.Equal(t, before, e.SecretVersion(ctx, t), "nothing written")
			t.Logf("proved: token %s: the engine exits %d (transient) and says %q", name, res.Code, kube.ErrUnauthorized)
		})
	}
}

// testCorefile: without coredns-custom the hosts entry goes into the
// Corefile of kube-system/coredns, once.
func (e *clusterEnv) testCorefile(t *testing.T, c harness.Cloud) {
	ctx := harness.Context(t)
	e.ResetCoreDNS(ctx, t)
	before := e.readDNS(ctx, t, coredns.ConfigMap)

	first, addr := e.dnsRun(ctx, t, c, "run-dns-1")
	after := e.readDNS(ctx, t, coredns.ConfigMap)
	block := "    hosts {\n        " + addr + " " + harness.UpdateServer + "\n        ttl 15\n        no_reverse\n        fallthrough\n    }\n"
	assert.Equal(t, strings.Replace(e.Corefile, ".:53 {\n", ".:53 {\n"+block, 1), after.cm.Data[coredns.CorefileKey],
		"the hosts block goes first into the root server block; every other line stays")
	assert.Equal(t, before.dep.Generation, after.dep.Generation, "the Corefile has reload: no restart")
	handed := logLine(t, first.Stderr, handedOverMsg)
	require.NotNil(t, handed, "the Secret is written only after the name resolved through the cluster's DNS:\n%s", first.Stderr)
	assert.Equal(t, "kube-system/coredns", handed["coredns"])
	assert.NotContains(t, first.Stderr, "cannot list CoreDNS's replicas", "the Role lets the engine list kube-dns's EndpointSlices")

	again := e.secondRunChangesNothing(ctx, t, c, "run-dns-2", addr, after)
	t.Logf("proved: kube-system/coredns got \"%s %s\" in its root block's hosts block (Deployment generation %d untouched); a second run changed nothing",
		addr, harness.UpdateServer, again.dep.Generation)
}

// testCorednsCustom: with coredns-custom (AKS: its Corefile imports the
// keys) the hosts block goes under our key there, and CoreDNS's Deployment
// is left alone: the real CoreDNS behind e.dns loads the key, so the run's
// handover wait passes, and the Role grants nothing on the Deployment.
func (e *clusterEnv) testCorednsCustom(t *testing.T, c harness.Cloud) {
	ctx := harness.Context(t)
	e.UseAKSLayout(ctx, t)
	corefile := e.readDNS(ctx, t, coredns.ConfigMap)

	_, addr := e.dnsRun(ctx, t, c, "run-aks-1")
	after := e.readDNS(ctx, t, coredns.CustomConfigMap)
	assert.Equal(t, "hosts {\n    "+addr+" "+harness.UpdateServer+"\n    ttl 15\n    no_reverse\n    fallthrough\n}\n", after.cm.Data[coredns.DefaultHostsKey])
	assert.Equal(t, "log\n", after.cm.Data["log.override"], "other keys stay")
	assert.Equal(t, corefile.dep.Generation, after.dep.Generation, "no restart: reload loads coredns-custom")
	assert.Equal(t, corefile.dep.Spec.Template.Annotations, after.dep.Spec.Template.Annotations)

	again := e.secondRunChangesNothing(ctx, t, c, "run-aks-2", addr, after)
	assert.Equal(t, corefile.cm.ResourceVersion, e.readDNS(ctx, t, coredns.ConfigMap).cm.ResourceVersion,
		"with coredns-custom present the Corefile is never edited (AKS reverts it)")
	t.Logf("proved: with coredns-custom present, key %s holds the hosts block for %s and the Deployment was not touched (generation %d → %d); a second run changed nothing",
		coredns.DefaultHostsKey, addr, corefile.dep.Generation, again.dep.Generation)
}

// dnsObjects are what a run with in-cluster DNS may change: the CoreDNS
// ConfigMap it edits (the Corefile's or coredns-custom) and CoreDNS's
// Deployment, which it must never restart.
type dnsObjects struct {
	cm  *corev1.ConfigMap
	dep *appsv1.Deployment
}

// readDNS reads kube-system's ConfigMap cm and CoreDNS's Deployment.
func (e *clusterEnv) readDNS(ctx context.Context, t *testing.T, cm string) dnsObjects {
	t.Helper()
	c, err := e.Admin.CoreV1().ConfigMaps("kube-system").Get(ctx, cm, metav1.GetOptions{})
	require.NoError(t, err)
	d, err := e.Admin.AppsV1().Deployments("kube-system").Get(ctx, coredns.Deployment, metav1.GetOptions{})
	require.NoError(t, err)
	return dnsObjects{cm: c, dep: d}
}

// dnsRun runs the engine as pod name with in-cluster DNS on, requires
// that it registered, and returns its result and the address its race
// chose.
func (e *clusterEnv) dnsRun(ctx context.Context, t *testing.T, c harness.Cloud, name string) (harness.Result, string) {
	t.Helper()
	res := e.RunAs(ctx, t, c, e.Token(t), name, "IN_CLUSTER_DNS=true")
	require.Equal(t, job.ExitOK, res.Code, res.String())
	addr, _ := summary(t, res.Stderr)["address"].(string)
	require.NotEmpty(t, addr, res.Stderr)
	return res, addr
}

// secondRunChangesNothing runs the engine again as pod name: the race
// chooses addr again, and the run leaves the ConfigMap and CoreDNS's
// Deployment as the first run left them (after). It returns them as read.
func (e *clusterEnv) secondRunChangesNothing(ctx context.Context, t *testing.T, c harness.Cloud, name, addr string, after dnsObjects) dnsObjects {
	t.Helper()
	_, got := e.dnsRun(ctx, t, c, name)
	require.Equal(t, addr, got, "the race chose the same address")
	again := e.readDNS(ctx, t, after.cm.Name)
	assert.Equal(t, after.cm.ResourceVersion, again.cm.ResourceVersion, "second run: %s untouched", after.cm.Name)
	assert.Equal(t, after.dep.Generation, again.dep.Generation, "second run: no restart")
	assert.Equal(t, after.dep.Spec.Template.Annotations, again.dep.Spec.Template.Annotations)
	return again
}

// testManualJob: a Job made by `kubectl create job --from=cronjob/…` runs
// at once, without the startup sleep, and registers.
func (e *clusterEnv) testManualJob(t *testing.T, c harness.Cloud) {
	ctx := harness.Context(t)
	e.DeleteSecret(ctx, t)
	runs := e.StartKubelet(ctx, t, operator.Namespace, c)
	const name = "manual-1"
	e.Plane.Kubectl(t, "-n", operator.Namespace, "create", "job", "--from=cronjob/"+harness.CronJobName, name)
	t.Cleanup(func() { e.DeleteJob(t, operator.Namespace, name) })
	j, err := e.Admin.BatchV1().Jobs(operator.Namespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "manual", j.Annotations["cronjob.kubernetes.io/instantiate"])
	owner := metav1.GetControllerOf(j)
	require.NotNil(t, owner)
	assert.Equal(t, "CronJob", owner.Kind)
	assert.Equal(t, harness.CronJobName, owner.Name)

	pr := e.completedRun(ctx, t, runs, name)
	harness.AssertRegistration(t, e.Secret(ctx, t), harness.OverlayRegCode)
	start := logLine(t, pr.Res.Stderr, "starting without a startup sleep")
	require.NotNil(t, start, pr.Res.Stderr)
	assert.Equal(t, false, start["scheduled"])
	assert.Nil(t, logLine(t, pr.Res.Stderr, scheduledSleepMsg))
	assert.Equal(t, job.OutcomeRegistered, summary(t, pr.Res.Stderr)["outcome"])
	t.Logf("proved: `kubectl create job --from=cronjob/%s %s` ran pod %s without a startup sleep, the Job completed and the Secret carries the CronJob's registration code (pod ran %s)",
		harness.CronJobName, name, pr.Pod, pr.Res.Took.Round(time.Millisecond))
}

// testStartFailure: a Job whose settings the engine refuses (a negative
// RUN_DEADLINE, here) leaves what a run that started would: its last log
// line is the JSON summary (failedPhase load-config, exit 2, the problem),
// the Job fails at once through its podFailurePolicy, and a Warning Event
// on the Job names the setting, with the registration code redacted.
// Nothing else is asked of the API server: the Secret stays as it was.
func (e *clusterEnv) testStartFailure(t *testing.T, c harness.Cloud) {
	ctx := harness.Context(t)
	before := e.SecretVersion(ctx, t)
	runs := e.StartKubelet(ctx, t, operator.Namespace, c)
	cj, err := e.Admin.BatchV1().CronJobs(operator.Namespace).Get(ctx, harness.CronJobName, metav1.GetOptions{})
	require.NoError(t, err)
	const name = "bad-setting"
	spec := cj.Spec.JobTemplate.Spec.DeepCopy()
	controlplane.SetEnv(&spec.Template.Spec.Containers[0], map[string]string{"RUN_DEADLINE": "-5m"})
	_, err = e.Admin.BatchV1().Jobs(operator.Namespace).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: *spec}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { e.DeleteJob(t, operator.Namespace, name) })

	done := controlplane.WaitJobFinished(ctx, t, e.Admin, operator.Namespace, name)
	cond := controlplane.FinishedCondition(done)
	pr := runs.ForJob(t, name)
	require.Len(t, pr, 1, "one pod: a retry cannot help")
	require.Equal(t, batchv1.JobFailed, cond.Type, pr[0].Res.String())
	assert.Equal(t, "PodFailurePolicy", cond.Reason)
	assert.Equal(t, job.ExitPermanent, pr[0].Res.Code)
	sum := summary(t, pr[0].Res.Stderr)
	assert.Equal(t, job.PhaseStart, sum["failedPhase"])
	assert.Contains(t, sum["error"], `RUN_DEADLINE="-5m"`)
	ev := controlplane.JobEvent(ctx, t, e.Admin, operator.Namespace, name, kube.ReportingController)
	assert.Equal(t, "Warning", ev.Type)
	assert.Equal(t, kube.ReasonFailed, ev.Reason)
	assert.Contains(t, ev.Note, "phase load-config failed (exit code 2)")
	assert.Contains(t, ev.Note, `RUN_DEADLINE=`)
	assert.NotContains(t, ev.Note+pr[0].Res.Stderr, harness.OverlayRegCode, "the registration code is never quoted")
	assert.Equal(t, before, e.SecretVersion(ctx, t), "the Secret is untouched")
	t.Logf("proved: a Job with RUN_DEADLINE=-5m failed at once (%s, exit %d); its last log line is the JSON summary (failedPhase %v) and its Event %s %s says %q",
		cond.Reason, pr[0].Res.Code, sum["failedPhase"], ev.Type, ev.Reason, ev.Note)
}

// completedRun waits for Job name in cattle-scc-system to finish, requires
// that it completed with exactly one pod, and returns that pod's run.
func (e *clusterEnv) completedRun(ctx context.Context, t *testing.T, runs *harness.PodRuns, name string) harness.PodRun {
	t.Helper()
	done := controlplane.WaitJobFinished(ctx, t, e.Admin, operator.Namespace, name)
	cond := controlplane.FinishedCondition(done)
	require.NotNil(t, cond)
	pr := runs.ForJob(t, name)
	require.Len(t, pr, 1, "one pod")
	require.Equal(t, batchv1.JobComplete, cond.Type, "%s: %s\n%s", cond.Reason, cond.Message, pr[0].Res)
	return pr[0]
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
	ns := e.Namespace(ctx, t, "scc-tick-")
	objs := e.OverlayObjects(t)
	sa, role, rb, cj := objs.SA, objs.Role, objs.RoleBinding, objs.CronJob
	for _, o := range []metav1.Object{sa, role, rb, cj} {
		o.SetNamespace(ns)
	}
	for i := range rb.Subjects {
		rb.Subjects[i].Namespace = ns
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
	_, err := e.Admin.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = e.Admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = e.Admin.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{})
	require.NoError(t, err)

	c := harness.StartCloud(t)
	runs := e.StartKubelet(ctx, t, ns, c)
	created := time.Now()
	_, err = e.Admin.BatchV1().CronJobs(ns).Create(ctx, cj, metav1.CreateOptions{})
	require.NoError(t, err)

	// The controller fires at the next full minute.
	var scheduled *batchv1.Job
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 75*time.Second, true, func(ctx context.Context) (bool, error) {
		jobs, err := e.Admin.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(jobs.Items) == 0 {
			return false, err
		}
		scheduled = &jobs.Items[0]
		return true, nil
	}), "the controller-manager created no Job within 75 s")
	fired := time.Since(created)
	// One scheduled run is enough; the next minute must not start another.
	_, err = e.Admin.BatchV1().CronJobs(ns).Patch(ctx, tickName, types.MergePatchType,
		[]byte(`{"spec":{"suspend":true}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Regexp(t, `^`+tickName+`-[0-9]+$`, scheduled.Name, "the CronJob controller's naming, which ScheduledRun relies on")
	assert.NotContains(t, scheduled.Annotations, "cronjob.kubernetes.io/instantiate")

	done := controlplane.WaitJobFinished(ctx, t, e.Admin, ns, scheduled.Name)
	cond := controlplane.FinishedCondition(done)
	require.NotNil(t, cond)
	pr := runs.ForJob(t, scheduled.Name)
	require.Len(t, pr, 1, "one pod")
	require.Equal(t, batchv1.JobComplete, cond.Type, "%s: %s\n%s", cond.Reason, cond.Message, pr[0].Res)
	sleep := logLine(t, pr[0].Res.Stderr, scheduledSleepMsg)
	require.NotNil(t, sleep, "the scheduled run takes the startup sleep:\n%s", pr[0].Res.Stderr)
	assert.Equal(t, "2s", sleep["sleepMax"])
	sleepText, _ := sleep["sleep"].(string)
	slept, err := time.ParseDuration(sleepText)
	require.NoError(t, err, "the sleep is logged as a duration: %v", sleep["sleep"])
	assert.Less(t, slept, 2*time.Second)
	assert.Equal(t, job.OutcomeRegistered, summary(t, pr[0].Res.Stderr)["outcome"])
	s, err := e.Admin.CoreV1().Secrets(ns).Get(ctx, operator.SecretName, metav1.GetOptions{})
	require.NoError(t, err)
	harness.AssertRegistration(t, s, harness.OverlayRegCode)
	t.Logf("proved: the controller-manager created Job %s %s after the CronJob, its pod took the startup sleep (%s of at most 2s) and the Job completed",
		scheduled.Name, fired.Round(time.Second), slept.Round(time.Millisecond))
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
