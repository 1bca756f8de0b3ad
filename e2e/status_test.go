package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/e2e/sccoperator"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/status"
)

// noOperatorWait keeps a run without an operator from waiting for one:
// after TestOperator its CRD is still served.
const noOperatorWait = "OPERATOR_WAIT=0s"

// statusEnv is the shared plane for the status cases, which run one after
// another in cattle-scc-system: each leaves the cluster in the state a user
// can end up in, runs `registration-engine status` as that user would, and
// asserts the verdict line and the exit code.
type statusEnv struct {
	*clusterEnv
	// adminKubeconfig is a kubeconfig file of the plane's admin, found
	// through KUBECONFIG as on a workstation.
	adminKubeconfig string
	// cloud is the healthy fake cloud; its update servers accept only
	// directRegCode.
	cloud harness.Cloud
}

// statusResult is one run of the status command.
type statusResult struct {
	harness.Result
	verdict string
}

// TestStatus walks a cluster through the states the issue lists, from
// "never run" to registered with the real rancher/scc-operator and back to
// failed, and checks what `registration-engine status` says in each.
func TestStatus(t *testing.T) {
	e := &statusEnv{clusterEnv: setupCluster(t)}
	e.adminKubeconfig = e.kubeconfig(t, "admin", "", e.Plane.AdminKubeconfig)
	// The update servers' SCC API accepts only the CronJob's code, so
	// another one gets the fake's 401 (fakecloud reads FAKECLOUD_REG_CODE).
	t.Setenv("FAKECLOUD_REG_CODE", harness.OverlayRegCode)
	e.cloud = harness.StartCloud(t)
	e.reset(t)
	t.Cleanup(func() { sccoperator.Forget(t, e.Plane) })
	// A user's CronJob is not suspended (a suspended one is itself a
	// finding); this one must not fire during the test, so its schedule is
	// a date far away.
	e.patchCronJob(harness.Context(t), t, `{"spec":{"suspend":false,"schedule":"0 0 1 1 *"}}`)
	t.Cleanup(func() { e.patchCronJob(context.Background(), t, `{"spec":{"suspend":true,"schedule":"0 */18 * * *"}}`) })

	t.Run("never run", func(t *testing.T) {
		res := e.status(t, e.adminKubeconfig)
		e.expect(t, res, job.ExitTransient, regexp.QuoteMeta(`Not registered yet: the engine has not run yet; its CronJob starts the first run on its schedule (schedule "0 0 1 1 *") — to run it now: kubectl -n cattle-scc-system create job --from=cronjob/registration-engine registration-engine-manual-`)+`\d+$`)
	})

	t.Run("last Job failed permanently (wrong plan)", func(t *testing.T) {
		ctx := harness.Context(t)
		runs := e.StartKubelet(ctx, t, operator.Namespace, harness.StartCloud(t, "wrong-plan"))
		const name = "status-wrong-plan"
		e.Plane.Kubectl(t, "-n", operator.Namespace, "create", "job", "--from=cronjob/"+harness.CronJobName, name)
		// Once fixed, the next run is the newest Job; the later cases start
		// from there.
		t.Cleanup(func() { e.DeleteJob(t, operator.Namespace, name) })
		done := controlplane.WaitJobFinished(ctx, t, e.Admin, operator.Namespace, name)
		require.Equal(t, batchv1.JobFailed, controlplane.FinishedCondition(done).Type)
		require.Len(t, runs.ForJob(t, name), 1)
		res := e.status(t, e.adminKubeconfig)
		e.expect(t, res, job.ExitPermanent, `Not registered: the last run, status-wrong-plan, failed at .* with exit code 2.* — a retry cannot succeed: read the cause in kubectl -n cattle-scc-system logs job/status-wrong-plan, fix the configuration, then run the engine: kubectl -n cattle-scc-system create job --from=cronjob/registration-engine registration-engine-manual-\d+$`)
	})

	t.Run("Lease held by a dead run", func(t *testing.T) {
		ctx := harness.Context(t)
		e.PutLease(ctx, t, "registration-engine-manual-7-x2k9p", time.Now(), 600)
		t.Cleanup(func() { e.DeleteLease(t) })
		res := e.status(t, e.adminKubeconfig)
		e.expect(t, res, job.ExitTransient, `Not registered yet: the Lease registration-engine is held by registration-engine-manual-7-x2k9p, a run that is gone, until \S+; runs before then are skipped — run the engine after \S+: kubectl -n cattle-scc-system create job --from=cronjob/registration-engine registration-engine-manual-\d+$`)
	})

	t.Run("no registration code yet", func(t *testing.T) {
		ctx := harness.Context(t)
		e.DeleteSecret(ctx, t)
		run := e.RunAs(ctx, t, e.cloud, e.Token(t), "run-no-code", noRegCode, "IN_CLUSTER_DNS=true", noOperatorWait)
		require.Equal(t, job.ExitOK, run.Code, run.String())
		t.Cleanup(func() { e.DeleteLease(t) })
		res := e.status(t, e.adminKubeconfig)
		e.expect(t, res, job.ExitPermanent, `Not registered: no registration code yet: the engine found none configured and none in scc-registration, and waits for one \(last run at \S+\) — set it: on the Azure Marketplace, az k8s-extension update --resource-group \S+ --cluster-name \S+ --cluster-type managedClusters --name \S+ --configuration-protected-settings registrationCode=<code> --yes; with Helm, helm upgrade <release> <chart> -n cattle-scc-system --reset-then-reuse-values --set registrationCode=<code>; with kustomize, kubectl -n cattle-scc-system create secret generic registration-code --from-literal=regCode=<code>, then run the engine: kubectl -n cattle-scc-system create job --from=cronjob/registration-engine registration-engine-manual-\d+$`)
	})

	t.Run("Secret without a code", func(t *testing.T) {
		ctx := harness.Context(t)
		// The engine never blanks a code: the Secret loses it only when
		// someone removes the key by hand after a run that wrote it.
		run := e.RunAs(ctx, t, e.cloud, e.Token(t), "run-with-code", "IN_CLUSTER_DNS=true", noOperatorWait)
		require.Equal(t, job.ExitOK, run.Code, run.String())
		_, err := e.Admin.CoreV1().Secrets(operator.Namespace).Patch(ctx, operator.SecretName, types.JSONPatchType,
			[]byte(`[{"op":"remove","path":"/data/regCode"}]`), metav1.PatchOptions{})
		require.NoError(t, err)
		res := e.status(t, e.adminKubeconfig)
		e.expect(t, res, job.ExitPermanent, `Not registered: scc-registration has no regCode, so rancher/scc-operator cannot register — put the code in the Secret registration-code \(kubectl -n cattle-scc-system create secret generic registration-code --from-literal=regCode=…\), then run the engine: kubectl -n cattle-scc-system create job --from=cronjob/registration-engine registration-engine-manual-\d+$`)
	})

	t.Run("operator absent", func(t *testing.T) {
		ctx := harness.Context(t)
		e.uninstallOperator(ctx, t)
		run := e.RunAs(ctx, t, e.cloud, e.Token(t), "run-no-operator", "IN_CLUSTER_DNS=true", noOperatorWait)
		require.Equal(t, job.ExitOK, run.Code, run.String())
		res := e.status(t, e.adminKubeconfig)
		e.expect(t, res, job.ExitPermanent, `Not registered: rancher/scc-operator has not adopted scc-registration: the API registrations.scc.cattle.io is not served — install or start rancher/scc-operator \(Rancher Prime 2.12 or later installs it in cattle-scc-system\)$`)
	})

	t.Run("CoreDNS entry missing", func(t *testing.T) {
		ctx := harness.Context(t)
		e.ResetCoreDNS(ctx, t)
		res := e.status(t, e.adminKubeconfig)
		e.expect(t, res, job.ExitPermanent, `Not registered: kube-system/coredns has no hosts entry for smt-azure.susecloud.net, so rancher/scc-operator cannot resolve the update server — run the engine, which writes it: kubectl -n cattle-scc-system create job --from=cronjob/registration-engine registration-engine-manual-\d+$`)
	})

	// The real operator from here on: it reaches the fake update server
	// through the CONNECT proxy, which resolves the name with the cluster's
	// DNS, the real CoreDNS serving the entry the engine wrote.
	bin := sccoperator.Binary(t, sccoperator.CommitRMT)
	httpsPort, err := strconv.Atoi(e.cloud.Value(t, "UPDATE_SERVER_HTTPS_PORT"))
	require.NoError(t, err)
	proxy, err := sccoperator.NewProxy(e.DNS.Route(httpsPort))
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	sccoperator.Run(t, e.Plane, sccoperator.Options{Binary: bin, ProxyURL: proxy.URL})

	t.Run("healthy and active", func(t *testing.T) {
		ctx := harness.Context(t)
		// As a user would: a Job from the CronJob, through the process
		// kubelet; the run waits for the operator and records its Event.
		runs := e.StartKubelet(ctx, t, operator.Namespace, e.cloud)
		const name = "status-healthy"
		e.Plane.Kubectl(t, "-n", operator.Namespace, "create", "job", "--from=cronjob/"+harness.CronJobName, name)
		done := controlplane.WaitJobFinished(ctx, t, e.Admin, operator.Namespace, name)
		pr := runs.ForJob(t, name)
		require.Len(t, pr, 1)
		require.Equal(t, batchv1.JobComplete, controlplane.FinishedCondition(done).Type, "%s", pr[0].Res)
		res := e.waitStatus(t, e.adminKubeconfig, job.ExitOK)
		e.expect(t, res, job.ExitOK, `Registered: active since \S+Z, update server smt-azure.susecloud.net \(\S+\)$`)
		assert.Regexp(t, `instanceData: verified offline: signature OK, signer OK \([a-z0-9.]*metadata\.azure\.com\), chain OK, claims OK`, res.Stdout)
		assert.Contains(t, res.Stdout, "status-healthy (manual): succeeded")
		assert.Contains(t, res.Stdout, "event Normal Registered: ")
		assert.Regexp(t, `SHA-1 ([0-9A-F]{2}:){19}[0-9A-F]{2}\n`, res.Stdout)
		assert.Contains(t, res.Stdout, "processed the Secret's current values")
		assert.NotContains(t, res.Stdout, harness.OverlayRegCode, "the code is never shown")
		t.Logf("status output, healthy:\n%s", res.Stdout)
		json := e.status(t, e.adminKubeconfig, "-o", "json")
		assert.Equal(t, job.ExitOK, json.Code)
		assert.Contains(t, json.Stdout, `"state": "registered"`)
		assert.Contains(t, json.Stdout, `"state": "active"`)
	})

	t.Run("CoreDNS entry pointing elsewhere", func(t *testing.T) {
		ctx := harness.Context(t)
		// Someone edits the hosts line after the healthy run; the address
		// is loopback so that nothing is ever sent off the machine.
		const elsewhere = "127.0.0.99"
		cms := e.Admin.CoreV1().ConfigMaps("kube-system")
		cm, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
		require.NoError(t, err)
		before := cm.Data[coredns.CorefileKey]
		require.NotEmpty(t, coredns.HostsAddresses(before, harness.UpdateServer), "the healthy run wrote the entry")
		line := regexp.MustCompile(`(?m)^(\s*)\S+ ` + regexp.QuoteMeta(harness.UpdateServer) + `$`)
		cm.Data[coredns.CorefileKey] = line.ReplaceAllString(before, "${1}"+elsewhere+" "+harness.UpdateServer)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx := context.Background()
			cm, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
			require.NoError(t, err)
			cm.Data[coredns.CorefileKey] = before
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			require.NoError(t, err)
		})
		res := e.status(t, e.adminKubeconfig)
		e.expect(t, res, job.ExitPermanent, `Registered, action needed: kube-system/coredns maps smt-azure\.susecloud\.net to 127\.0\.0\.99, but the last run reached the update server at [0-9a-f:.]+ — run the engine, which rewrites the entry: kubectl -n cattle-scc-system create job --from=cronjob/registration-engine registration-engine-manual-\d+$`)
		assert.Regexp(t, `smt-azure\.susecloud\.net → 127\.0\.0\.99; last run status-healthy reached [0-9a-f:.]+\n`, res.Stdout)
		json := e.status(t, e.adminKubeconfig, "-o", "json")
		assert.Equal(t, job.ExitPermanent, json.Code)
		assert.Regexp(t, `"lastRunAddress": "[0-9a-f:.]+"`, json.Stdout)
	})

	t.Run("a user without access to kube-system", func(t *testing.T) {
		kc := e.kubeconfig(t, "reader", e.readOnlyUser(t), "")
		res := e.status(t, kc)
		e.expect(t, res, job.ExitPermanent, `Unknown: cannot read rancher/scc-operator's Registration scc-registration-[0-9a-f]{32}: forbidden — run status with credentials that may get registrations.scc.cattle.io$`)
		for _, refused := range []string{
			"cannot read kube-system/configmaps/coredns: forbidden",
			"cannot read kube-system/leases/scc-controllers: forbidden",
		} {
			assert.Contains(t, res.Stdout, refused)
		}
		assert.NotContains(t, res.Stdout, "no hosts entry", "a refused read is not a missing entry")
		assert.Contains(t, res.Stdout, "processed the Secret's current values", "what the Secret shows is still read")
	})

	t.Run("the chart's read-only status account", func(t *testing.T) {
		// The account the chart's NOTES run status under in the cluster
		// (templates/status-rbac.yaml, as helm renders it): everything
		// status reads, nothing it does not.
		ctx := harness.Context(t)
		out, err := testkit.Command(ctx, testkit.Helm(t), "template", "registration-engine", filepath.Join("..", "manifests", "chart", "registration-engine"),
			"--namespace", operator.Namespace, "--values", filepath.Join("..", "manifests", "testdata", "chart", "minimal.yaml"),
			"--show-only", "templates/status-rbac.yaml")
		require.NoError(t, err)
		e.Plane.Apply(t, out)
		t.Cleanup(func() {
			_, _ = e.Plane.RunKubectl(context.Background(), out, "delete", "-f", "-", "--ignore-not-found")
		})
		kc := e.kubeconfig(t, "status", e.Plane.ServiceAccountToken(t, operator.Namespace, "registration-engine-status"), "")
		admin := e.status(t, e.adminKubeconfig)
		res := e.status(t, kc)
		assert.Equal(t, admin.verdict, res.verdict, "%s", res.Result)
		assert.Equal(t, admin.Code, res.Code)
		assert.NotContains(t, res.Stdout, "Unreadable", "every read status needs is granted")
		t.Logf("proved: under the chart's read-only account registration-engine-status, status gives the admin's verdict (exit %d, %q) with nothing unreadable", res.Code, res.verdict)
	})

	t.Run("certificate near expiry", func(t *testing.T) {
		ctx := harness.Context(t)
		t.Setenv("FAKECLOUD_UPDATE_CERT_VALIDITY", "144h")
		short := harness.StartCloud(t)
		run := e.RunAs(ctx, t, short, e.Token(t), "run-short-cert", "IN_CLUSTER_DNS=true", "REGISTRATION_CODE="+harness.OverlayRegCode)
		require.Equal(t, job.ExitOK, run.Code, run.String())
		res := e.status(t, e.adminKubeconfig)
		e.expect(t, res, job.ExitPermanent, `Registered, action needed: the update server's certificate expires in 5 days \(\S+\) — the engine takes a renewed certificate on its next run; if the update server has not renewed it by then, contact SUSE support; to run now: kubectl -n cattle-scc-system create job --from=cronjob/registration-engine registration-engine-manual-\d+$`)
	})

	t.Run("operator Registration Failed", func(t *testing.T) {
		ctx := harness.Context(t)
		run := e.RunAs(ctx, t, e.cloud, e.Token(t), "run-wrong-code", "IN_CLUSTER_DNS=true", "REGISTRATION_CODE=E2E-WRONG-CODE")
		require.Equal(t, job.ExitPermanent, run.Code, "the run waits for the operator's answer and fails with it\n%s", run)
		res := e.waitStatus(t, e.adminKubeconfig, job.ExitPermanent)
		e.expect(t, res, job.ExitPermanent, `Not registered: rancher/scc-operator's Registration scc-registration-[0-9a-f]{32} failed: ".*Unknown Registration Code.*" — needs you \(HTTP 401 Unauthorized: the update server refused the registration code, so the engine does not delete anything\): put a valid code in the Secret registration-code \(key regCode\) or REGISTRATION_CODE, then run the engine: kubectl -n cattle-scc-system create job --from=cronjob/registration-engine registration-engine-manual-\d+; the operator registers the new code afresh, with no delete$`)
		t.Logf("status output, operator failed:\n%s", res.Stdout)
	})
}

// status runs `registration-engine status` with KUBECONFIG=kubeconfig and
// the fake cloud's attestation trust.
func (e *statusEnv) status(t *testing.T, kubeconfig string, args ...string) statusResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args = append([]string{"status",
		"--attestation-roots", filepath.Join(e.cloud.Dir, "attestation-roots.pem"),
		"--intermediates", filepath.Join(e.cloud.Dir, "attestation-intermediate.pem")}, args...)
	res := harness.RunEngine(t, ctx, []string{"KUBECONFIG=" + kubeconfig, "HOME=" + t.TempDir()}, args...)
	verdict, _, _ := strings.Cut(res.Stdout, "\n")
	return statusResult{Result: res, verdict: verdict}
}

// waitStatus runs status until it exits with code, for states the operator
// reaches on its own time; it returns the last run.
func (e *statusEnv) waitStatus(t *testing.T, kubeconfig string, code int) statusResult {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		res := e.status(t, kubeconfig)
		if res.Code == code || time.Now().After(deadline) {
			return res
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// expect asserts the verdict line (a regular expression anchored at its
// start) and the exit code, and prints both for make test.
func (e *statusEnv) expect(t *testing.T, res statusResult, code int, verdict string) {
	t.Helper()
	assert.Regexp(t, regexp.MustCompile(`^`+verdict), res.verdict, "%s", res.Result)
	assert.Equal(t, code, res.Code, "%s", res.Result)
	t.Logf("proved: %s: status exits %d with %q", t.Name(), res.Code, res.verdict)
}

// reset brings cattle-scc-system to a fresh install: no Secret, no Jobs,
// no Lease, CoreDNS as kubeadm made it.
func (e *statusEnv) reset(t *testing.T) {
	ctx := harness.Context(t)
	sccoperator.Forget(t, e.Plane)
	jobs := e.Admin.BatchV1().Jobs(operator.Namespace)
	list, err := jobs.List(ctx, metav1.ListOptions{LabelSelector: status.AppLabel})
	require.NoError(t, err)
	for _, j := range list.Items {
		e.DeleteJob(t, operator.Namespace, j.Name)
	}
	e.DeleteLease(t)
	e.ResetCoreDNS(ctx, t)
}

func (e *statusEnv) patchCronJob(ctx context.Context, t *testing.T, patch string) {
	_, err := e.Admin.BatchV1().CronJobs(operator.Namespace).Patch(ctx, harness.CronJobName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

// uninstallOperator makes the cluster one where rancher/scc-operator was
// never installed, whatever an earlier test ran: no Registration CRD, no
// leader Lease. The operator's Run installs the CRD again.
func (e *statusEnv) uninstallOperator(ctx context.Context, t *testing.T) {
	leases := e.Admin.CoordinationV1().Leases(sccoperator.LeaseNamespace)
	err := leases.Delete(ctx, sccoperator.LeaseName, metav1.DeleteOptions{})
	require.True(t, err == nil || apierrors.IsNotFound(err), "delete the operator's leader Lease: %v", err)
	dyn, err := dynamic.NewForConfig(e.Plane.Admin)
	require.NoError(t, err)
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	const crd = "registrations.scc.cattle.io"
	err = crds.Delete(ctx, crd, metav1.DeleteOptions{})
	require.True(t, err == nil || apierrors.IsNotFound(err), "delete CRD %s: %v", crd, err)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := crds.Get(ctx, crd, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}), "CRD %s was not deleted", crd)
}

// readOnlyUser makes a ServiceAccount that may read everything in
// cattle-scc-system and nothing elsewhere, as a namespace's read-only admin,
// and returns its token.
func (e *statusEnv) readOnlyUser(t *testing.T) string {
	ctx := harness.Context(t)
	const name = "status-reader"
	cs := e.Admin
	_, err := cs.CoreV1().ServiceAccounts(operator.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().Roles(operator.Namespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"", "batch", "coordination.k8s.io", "events.k8s.io"},
			Resources: []string{"secrets", "configmaps", "pods", "events", "leases", "cronjobs", "jobs"},
			Verbs:     []string{"get", "list", "watch"},
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().RoleBindings(operator.Namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: operator.Namespace}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.Background()
		_ = cs.RbacV1().RoleBindings(operator.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
		_ = cs.RbacV1().Roles(operator.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
		_ = cs.CoreV1().ServiceAccounts(operator.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	})
	return e.Plane.ServiceAccountToken(t, operator.Namespace, name)
}

// kubeconfig writes a kubeconfig file for the plane: a copy of from, or
// one that authenticates with token.
func (e *statusEnv) kubeconfig(t *testing.T, user, token, from string) string {
	path := filepath.Join(t.TempDir(), user+".kubeconfig")
	if from != "" {
		data, err := os.ReadFile(from)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, data, 0o600))
		return path
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["plane"] = &clientcmdapi.Cluster{Server: e.Plane.Admin.Host, CertificateAuthority: e.Plane.CAFile}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[user] = &clientcmdapi.Context{Cluster: "plane", AuthInfo: user}
	cfg.CurrentContext = user
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}
