package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/e2e/sccoperator"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/providers/azure"
)

// chartRegCode is the registration code the chart test installs as the
// Marketplace's protected setting.
const chartRegCode = "E2E-CHART-REGISTRATION-CODE"

// runHelm runs helm against the plane as its admin and returns its output.
func runHelm(t *testing.T, p *controlplane.Plane, helm string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := testkit.Command(ctx, helm, append(args, "--kubeconfig", p.AdminKubeconfig)...)
	require.NoError(t, err)
	return string(out)
}

// workloadIdentityWebhook does for the process kubelet what Azure's Workload
// Identity webhook does for a pod labelled azure.workload.identity/use: it
// sets AZURE_CLIENT_ID and AZURE_TENANT_ID from the annotations of the pod's
// ServiceAccount (the federated token file is the fake cloud's, see
// kubeletRedirects). A chart that forgot the label or the annotations gets
// no identity, and the run fails.
//
// The real webhook, its projected token and Entra's check of that token run
// in the kind tier (e2e/kind testWorkloadIdentity), on the newest
// Kubernetes only and only in .ci/run. This stand-in stays for what that
// cannot give: the chart's workload-identity wiring proved on every
// make test, and on the LTS Kubernetes (make e2e-lts runs TestChartInstall).
func workloadIdentityWebhook(e *clusterEnv) func(context.Context, *corev1.Pod, []string) ([]string, error) {
	return func(ctx context.Context, pod *corev1.Pod, env []string) ([]string, error) {
		if pod.Labels["azure.workload.identity/use"] != "true" {
			return env, nil
		}
		sa, err := e.Admin.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, pod.Spec.ServiceAccountName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("workload identity webhook: %w", err)
		}
		for k, v := range map[string]string{
			"AZURE_CLIENT_ID": sa.Annotations["azure.workload.identity/client-id"],
			"AZURE_TENANT_ID": sa.Annotations["azure.workload.identity/tenant-id"],
		} {
			if v != "" {
				env = append(env, k+"="+v)
			}
		}
		return env, nil
	}
}

// TestChartInstall installs manifests/chart/registration-engine with the
// Marketplace bundle's values on a real kube-apiserver, with the process
// kubelet running and no manual Job: the release's own run registers, once
// per credential mode the portal offers:
//
//   - the Marketplace default: the install sets only what Azure injects and
//     what mainTemplate.json's settings carry, so the credential is the
//     extension's managed identity (global.azure.identity.clientId), whose
//     ARM token the run gets from the fake IMDS; no Workload Identity
//     webhook acts on the pod. Then the lifecycle: an unchanged upgrade
//     starts nothing, an upgrade with a new registration code starts a run
//     that writes it;
//   - workload identity, as a customer may choose: the webhook stand-in
//     injects the IDs from the ServiceAccount's annotations, and the token
//     comes from the fake Entra, never from IMDS;
//   - workload identity behind the proxy Azure Arc's extension manager
//     passes (Azure.proxySettings, nothing in extraEnv): Entra and ARM,
//     known by name only, are reached through a CONNECT proxy on loopback
//     that logs its tunnels. IMDS and the region servers listen on
//     loopback here, which Go never proxies whatever the variables say, so
//     this case proves nothing of them: providers/azure
//     TestIMDSNeverUsesProxy proves IMDS's transport has no proxy, job/smt
//     TestRegionServersThroughProxy the region servers' use of it; a pod has no
//     volumes under the process kubelet, so proxyCert's mount is proved
//     by the chart's tests (manifests TestChartValues).
//
// Each ends with helm uninstall, whose cleanup hook removes the engine's
// CoreDNS entry (CoreDNS stops answering the name) and its Lease. Each runs
// on a plane of its own: the chart owns objects (the kube-system Role, the
// CronJob) that TestCluster applies from the e2e overlay.
func TestChartInstall(t *testing.T) {
	helm := testkit.Helm(t)
	tests := map[string]chartCase{
		"marketplace default: the extension's managed identity": {wantMode: "managed-identity", wantTokenRequests: 1, lifecycle: true},
		"workload identity chosen in the portal": {
			set:              []string{"azure.credentialMode=workload-identity", "azure.workloadIdentity.clientId=" + fakecloud.DefaultAzureConfig().ClientID, "azure.workloadIdentity.tenantId=" + fakecloud.DefaultAzureConfig().TenantID},
			workloadIdentity: true, wantMode: "workload-identity", wantTokenRequests: 0,
		},
		// Azure Arc's extension manager passes the cluster's proxy as
		// Azure.proxySettings: the release's run reaches Entra and ARM
		// through it.
		"behind the proxy Azure passes": {
			set:              []string{"azure.credentialMode=workload-identity", "azure.workloadIdentity.clientId=" + fakecloud.DefaultAzureConfig().ClientID, "azure.workloadIdentity.tenantId=" + fakecloud.DefaultAzureConfig().TenantID},
			workloadIdentity: true, wantMode: "workload-identity", wantTokenRequests: 0, proxy: true,
		},
	}
	t.Parallel()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, helm)
		})
	}
}

// chartCase is one install of TestChartInstall.
type chartCase struct {
	// set are --set values beyond what Azure injects and the Marketplace
	// settings carry.
	set []string
	// workloadIdentity: the webhook stand-in acts on labelled pods.
	workloadIdentity bool
	// lifecycle: also upgrade unchanged, upgrade with a new code.
	lifecycle bool
	// proxy: Entra and ARM are known by name (Go never proxies a
	// loopback address) and reached only through a CONNECT proxy on
	// loopback, which the install names in Azure.proxySettings alone.
	proxy             bool
	wantMode          string
	wantTokenRequests int32
}

func (tc chartCase) run(t *testing.T, helm string) {
	var extra []string
	for _, kv := range tc.set {
		extra = append(extra, "--set", kv)
	}
	p := controlplane.Start(t)
	e := &clusterEnv{&harness.Cluster{Plane: p, Admin: p.AdminClient(t), Settle: harness.ProcessSettle}}
	if tc.workloadIdentity {
		e.Admission = workloadIdentityWebhook(e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	aksBeforeInstall(ctx, t, e)

	var c harness.Cloud
	var proxy *sccoperator.Proxy
	if tc.proxy {
		c, proxy = cloudBehindProxy(t)
		// With a user and password, as a customer's proxy may want: the
		// pods take the URL from the chart's Secret, none shows it.
		extra = append(extra, "--set", "Azure.proxySettings.isProxyEnabled=true", "--set", "Azure.proxySettings.httpsProxy="+proxyWithPassword(proxy),
			"--set", `Azure.proxySettings.noProxy=localhost\,.svc\,.cluster.local`)
	} else {
		c = harness.StartCloud(t)
	}
	cloudEnv := c.Vars()
	chart := filepath.Join("..", "manifests", "chart", "registration-engine")
	install := append(marketplaceValues(t, chart, cloudEnv, chartRegCode), extra...)
	// The process kubelet runs before the install: the release's own run
	// must start with no person, as on a cluster.
	kubeletCtx, stopKubelet := context.WithCancel(ctx)
	defer stopKubelet()
	runs := e.StartKubelet(kubeletCtx, t, operator.Namespace, c)
	start := time.Now()
	runHelm(t, p, helm, append([]string{"install", "registration-engine", chart, "--namespace", operator.Namespace}, install...)...)
	installed := time.Since(start)
	manifest := runHelm(t, p, helm, "get", "manifest", "registration-engine", "--namespace", operator.Namespace)
	release := releaseObjects(t, manifest)
	require.NotEmpty(t, release)

	// No manual Job: the install's run, named by its inputs, registers.
	first := runJobOf(t, release)
	pr := e.completedRun(ctx, t, runs, first)
	registered := time.Since(start)
	assert.Equal(t, job.OutcomeRegistered, summary(t, pr.Res.Stderr)["outcome"])
	assert.Equal(t, "starting without a startup sleep", logLine(t, pr.Res.Stderr, "starting without a startup sleep")["msg"], "the install's run does not sleep")
	tokens := identityTokenRequests(t, c)
	assert.Equal(t, tc.wantTokenRequests, tokens, "managed identity token requests IMDS answered")
	assert.Equal(t, tc.wantMode, logLine(t, pr.Res.Stderr, "azure token acquired")["credentialMode"], "the credential the run used")
	before := e.Secret(ctx, t)
	harness.AssertRegistration(t, before, chartRegCode)
	t.Logf("proved: helm install (Marketplace values, credential mode %s) exited 0 in %s and, with no manual Job, the release's run %s registered %s %s after the install started (pod ran %s)",
		tc.wantMode, installed.Round(time.Millisecond), first, operator.SecretName, registered.Round(time.Millisecond), pr.Res.Took.Round(time.Millisecond))
	if tc.proxy {
		assertThroughProxy(t, proxy)
		assertNoProxyPasswordInPods(ctx, t, e)
	}
	if !tc.lifecycle {
		tc.uninstall(ctx, t, p, e, helm, release, before, registered)
		return
	}

	// An upgrade with nothing a run reads changed starts nothing.
	runHelm(t, p, helm, append([]string{"upgrade", "registration-engine", chart, "--namespace", operator.Namespace}, install...)...)
	unchanged := releaseObjects(t, runHelm(t, p, helm, "get", "manifest", "registration-engine", "--namespace", operator.Namespace))
	assert.Equal(t, first, runJobOfOrEmpty(unchanged), "the finished run's Job stays in the release, unchanged, until its TTL")
	time.Sleep(3 * time.Second)
	jobs, err := e.Admin.BatchV1().Jobs(operator.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, j := range jobs.Items {
		assert.Equal(t, first, j.Name, "an unchanged upgrade started a Job")
	}
	assert.Len(t, runs.ForJob(t, first), 1, "the run Job ran no second pod")
	t.Logf("proved: helm upgrade with the same values started no run (the namespace holds only %s, with its one pod)", first)

	// An upgrade with a new registration code: a run at once, which writes
	// the new code (the operator re-registers on a new regCode by itself).
	const newCode = "E2E-CHART-REGISTRATION-CODE-2"
	start = time.Now()
	runHelm(t, p, helm, append([]string{"upgrade", "registration-engine", chart, "--namespace", operator.Namespace}, append(install, "--set", "registrationCode="+newCode)...)...)
	release = releaseObjects(t, runHelm(t, p, helm, "get", "manifest", "registration-engine", "--namespace", operator.Namespace))
	second := runJobOf(t, release)
	require.NotEqual(t, first, second, "a new code, a new run")
	pr = e.completedRun(ctx, t, runs, second)
	rerun := time.Since(start)
	assert.Equal(t, job.OutcomeRegistered, summary(t, pr.Res.Stderr)["outcome"])
	after := e.Secret(ctx, t)
	harness.AssertRegistration(t, after, newCode)
	t.Logf("proved: helm upgrade with a new registration code started run %s, which wrote the new code into %s %s after the upgrade started", second, operator.SecretName, rerun.Round(time.Millisecond))

	tc.uninstall(ctx, t, p, e, helm, release, after, registered)
}

// Entra's and ARM's names behind the proxy (they resolve nowhere but in
// the proxy's routes).
const (
	proxiedEntra = "login.fake.test"
	proxiedARM   = "management.fake.test"
)

// cloudBehindProxy starts a fake cloud whose Entra and ARM the engine
// knows by name only, and a CONNECT proxy on loopback that routes those
// names to them and logs every tunnel: the engine reaches them only if it
// uses the proxy. The process kubelet hands the pod the named endpoints.
func cloudBehindProxy(t *testing.T) (harness.Cloud, *sccoperator.Proxy) {
	t.Helper()
	c := harness.StartCloudArgs(t, "--names", proxiedEntra+","+proxiedARM)
	entra, err := url.Parse(c.Value(t, "AZURE_AUTHORITY_HOST"))
	require.NoError(t, err)
	arm, err := url.Parse(c.Value(t, "ARM_ENDPOINT"))
	require.NoError(t, err)
	named := func(u *url.URL, name string) string { return name + ":" + u.Port() }
	proxy, err := sccoperator.NewProxy(sccoperator.StaticRoute(map[string]string{
		named(entra, proxiedEntra): entra.Host,
		named(arm, proxiedARM):     arm.Host,
	}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	c.Env = append(slices.Clone(c.Env),
		"AZURE_AUTHORITY_HOST=https://"+named(entra, proxiedEntra)+"/",
		"ARM_ENDPOINT=https://"+named(arm, proxiedARM))
	return c, proxy
}

// assertThroughProxy: the run reached Entra and ARM through the proxy
// (their names resolve nowhere else), with TLS end to end.
func assertThroughProxy(t *testing.T, proxy *sccoperator.Proxy) {
	t.Helper()
	var passed []string
	for _, tun := range proxy.Tunnels() {
		require.NoError(t, tun.Err, "tunnel to %s", tun.Target)
		host, _, _ := net.SplitHostPort(tun.Target)
		passed = append(passed, host)
	}
	assert.Contains(t, passed, proxiedEntra, "Entra through the proxy")
	assert.Contains(t, passed, proxiedARM, "ARM through the proxy")
	slices.Sort(passed)
	t.Logf("proved: with only Azure.proxySettings (isProxyEnabled, httpsProxy %s) set, the release's run reached Entra and ARM through the proxy (tunnels to %s)",
		proxy.URL, strings.Join(slices.Compact(passed), ", "))
}

// proxyPassword is the password of the proxy URL a proxy case installs
// with; the proxy on loopback asks for none, and Go sends it as
// Proxy-Authorization on each CONNECT.
const proxyPassword = "E2E-PROXY-PASSWORD"

// proxyWithPassword is proxy's URL with a user and proxyPassword.
func proxyWithPassword(proxy *sccoperator.Proxy) string {
	return strings.Replace(proxy.URL, "http://", "http://e2e-user:"+proxyPassword+"@", 1)
}

// assertNoProxyPasswordInPods: the release's CronJobs and Jobs, as the API
// server holds them (readable with the view role), do not show the proxy's
// password: their pods take HTTPS_PROXY from the chart's Secret.
func assertNoProxyPasswordInPods(ctx context.Context, t *testing.T, e *clusterEnv) {
	t.Helper()
	cronJobs, err := e.Admin.BatchV1().CronJobs(operator.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	jobs, err := e.Admin.BatchV1().Jobs(operator.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, cronJobs.Items)
	require.NotEmpty(t, jobs.Items)
	for _, list := range []any{cronJobs, jobs} {
		data, err := json.Marshal(list)
		require.NoError(t, err)
		assert.NotContains(t, string(data), proxyPassword, "a CronJob or Job shows the proxy's password")
	}
	secret, err := e.Admin.CoreV1().Secrets(operator.Namespace).Get(ctx, "registration-engine-proxy", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, string(secret.Data["HTTPS_PROXY"]), proxyPassword)
	t.Logf("proved: %d CronJobs and %d Jobs of the release hold no proxy password; Secret %s does, and the run went through the proxy with it",
		len(cronJobs.Items), len(jobs.Items), secret.Name)
}

// marketplaceValues are the helm flags of a Marketplace install from the
// portal: the bundle's values, what Azure injects (custom-meter), and the
// configurationSettings of the bundle's own mainTemplate.json, evaluated as
// ARM does for the portal's answers (portalSettings): the managed identity,
// the fake cloud's extension and plan, the code.
func marketplaceValues(t *testing.T, chart string, cloudEnv map[string]string, regCode string) []string {
	t.Helper()
	id, err := azure.ParseExtensionID(cloudEnv["EXTENSION_RESOURCE_ID"])
	require.NoError(t, err, "the fake cloud's extension ID")
	settings := portalSettings(t, id.SubscriptionID, id.ResourceGroup, map[string]string{
		"plan-name": cloudEnv["MARKETPLACE_PLAN_ID"], "plan-publisher": cloudEnv["MARKETPLACE_PUBLISHER_ID"], "plan-offerID": cloudEnv["MARKETPLACE_OFFER_ID"],
	}, map[string]string{
		"clusterResourceName": id.ClusterName, "extensionResourceName": id.Name, "registrationCode": regCode,
		"credentialMode": "managed-identity", "workloadIdentityClientId": "", "workloadIdentityTenantId": "",
	})
	args := []string{
		"--values", filepath.Join(chart, "..", "..", "marketplace", "values.yaml"),
		// What Azure injects at deployment.
		"--set", "global.azure.identity.clientId=" + fakecloud.DefaultAzureConfig().ManagedIdentityClientID,
		"--set", "global.azure.extension.resourceId=" + cloudEnv["EXTENSION_RESOURCE_ID"],
		"--set", "global.azure.marketplace.planId=" + cloudEnv["MARKETPLACE_PLAN_ID"],
		"--set", "global.azure.images.engine.registry=marketplace.azurecr.io",
		"--set", "global.azure.images.engine.image=rancher/registration-engine",
		"--set", "global.azure.images.engine.digest=sha256:" + strings.Repeat("0", 64),
		// The fake cloud's update servers listen on loopback.
		"--set", "inClusterDNSTestLoopback=true",
	}
	// --set, so that a case's own --set after these wins (helm applies
	// --set-string after every --set, whatever their order).
	for _, kv := range settings {
		args = append(args, "--set", kv)
	}
	return args
}

// runJobOfOrEmpty is the name of the release's run Job, or "".
func runJobOfOrEmpty(release []releaseObject) string {
	for _, o := range release {
		if o.gvr.Resource == "jobs" && strings.HasPrefix(o.name, harness.CronJobName+"-run-") {
			return o.name
		}
	}
	return ""
}

// runJobOf is the name of the release's run Job; the test fails without
// one.
func runJobOf(t *testing.T, release []releaseObject) string {
	t.Helper()
	name := runJobOfOrEmpty(release)
	require.NotEmpty(t, name, "the release has a run Job")
	return name
}

// uninstall: the cleanup hook removes the engine's CoreDNS entry and its
// Lease, CoreDNS stops answering the name, every object of the release
// goes, and the operator's Secret and the customer's own coredns-custom
// key stay.
func (tc chartCase) uninstall(ctx context.Context, t *testing.T, p *controlplane.Plane, e *clusterEnv, helm string, release []releaseObject, secret *corev1.Secret, registered time.Duration) {
	require.NotEmpty(t, e.DNS.Lookup(ctx, harness.UpdateServer), "precondition: CoreDNS answers the update server's name")
	start := time.Now()
	runHelm(t, p, helm, "uninstall", "registration-engine", "--namespace", operator.Namespace, "--wait", "--timeout", "120s")
	took := time.Since(start)
	assert.Less(t, took, 90*time.Second, "helm uninstall, cleanup hook included, is bounded")
	dyn, err := dynamic.NewForConfig(p.Admin)
	require.NoError(t, err)
	for _, o := range release {
		_, err := dyn.Resource(o.gvr).Namespace(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "%s %s/%s survived helm uninstall (err %v)", o.gvr.Resource, o.namespace, o.name, err)
	}
	custom, err := e.Admin.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns-custom", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"log.override": "log\n"}, custom.Data, "the engine's key gone, the customer's kept")
	_, err = e.Admin.CoordinationV1().Leases(operator.Namespace).Get(ctx, harness.LeaseName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the Lease went with the release (err %v)", err)
	var gone time.Duration
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		gone = time.Since(start)
		return len(e.DNS.Lookup(ctx, harness.UpdateServer)) == 0, nil
	}), "CoreDNS still answers the update server's name after helm uninstall")
	hooks, err := e.Admin.BatchV1().Jobs(operator.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, hooks.Items, "no Job left behind (the cleanup hook deletes itself)")
	assertNoCleanupAccess(ctx, t, dyn)
	after := e.Secret(ctx, t)
	assert.Equal(t, secret.ResourceVersion, after.ResourceVersion, "helm uninstall must not touch the operator's Secret")
	t.Logf("proved: helm uninstall finished in %s; its post-delete cleanup hook, under its own ServiceAccount and policy copy (gone with it), removed coredns-custom key %s (the customer's log.override kept) and the Lease, CoreDNS stopped answering %s %s after the uninstall started, and %s stayed", took.Round(time.Millisecond), coredns.DefaultHostsKey, harness.UpdateServer, gone.Round(time.Millisecond), operator.SecretName)
}

// aksBeforeInstall gives e's plane what a cluster has before the
// Marketplace installs: Rancher's namespace and kube-system's CoreDNS as on
// AKS (the Corefile, and coredns-custom with a customer's key, where the
// chart's default lets the engine write), served by a real CoreDNS, which
// the run's handover wait asks.
func aksBeforeInstall(ctx context.Context, t *testing.T, e *clusterEnv) {
	t.Helper()
	_, err := e.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operator.Namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.Plane.Apply(t, []byte(harness.AKSCorednsFixture))
	_, err = e.Admin.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns-custom"}, Data: map[string]string{"log.override": "log\n"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.DNS = sccoperator.StartClusterDNS(t, e.Admin, 0)
}

// cleanupAccess are the objects the cleanup hook brings for itself (its
// ServiceAccount, Roles and policy copy), which must go with its Job.
var cleanupAccess = []releaseObject{
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, namespace: operator.Namespace, name: "registration-engine-cleanup"},
	{gvr: rbacv1.SchemeGroupVersion.WithResource("roles"), namespace: operator.Namespace, name: "registration-engine-cleanup"},
	{gvr: rbacv1.SchemeGroupVersion.WithResource("rolebindings"), namespace: operator.Namespace, name: "registration-engine-cleanup"},
	{gvr: rbacv1.SchemeGroupVersion.WithResource("roles"), namespace: "kube-system", name: "registration-engine-cleanup"},
	{gvr: rbacv1.SchemeGroupVersion.WithResource("rolebindings"), namespace: "kube-system", name: "registration-engine-cleanup"},
	{gvr: admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicies"), name: "registration-engine-coredns-cleanup"},
	{gvr: admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicybindings"), name: "registration-engine-coredns-cleanup"},
}

// assertNoCleanupAccess: none of cleanupAccess is left after helm
// uninstall returned.
func assertNoCleanupAccess(ctx context.Context, t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	for _, o := range cleanupAccess {
		_, err := dyn.Resource(o.gvr).Namespace(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "the cleanup hook's %s %s/%s survived helm uninstall (err %v)", o.gvr.Resource, o.namespace, o.name, err)
	}
}

// TestChartUninstallWhenCleanupCannotRun: helm uninstall when the cleanup
// hook's pod never starts (no kubelet runs it). The hook is post-delete:
// Helm 3.22 deletes the release first, then reports the failed hook
// ("uninstallation completed with 1 error(s)", pkg/action/uninstall.go),
// so this proves that the release goes all the same, within the hook's
// activeDeadlineSeconds, with the reason, and that the hook leaves nothing
// behind: its Job, ServiceAccount, Roles and policy copy.
func TestChartUninstallWhenCleanupCannotRun(t *testing.T) {
	t.Parallel()
	helm := testkit.Helm(t)
	p := controlplane.Start(t)
	e := &clusterEnv{&harness.Cluster{Plane: p, Admin: p.AdminClient(t), Settle: harness.ProcessSettle}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := e.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operator.Namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	p.Apply(t, []byte(harness.AKSCorednsFixture))
	c := harness.StartCloud(t)
	chart := filepath.Join("..", "manifests", "chart", "registration-engine")
	const deadline = 15
	runHelm(t, p, helm, append([]string{"install", "registration-engine", chart, "--namespace", operator.Namespace,
		"--set", fmt.Sprintf("cleanupDeadlineSeconds=%d", deadline)}, marketplaceValues(t, chart, c.Vars(), chartRegCode)...)...)

	start := time.Now()
	out, err := testkit.Command(ctx, helm, "uninstall", "registration-engine", "--namespace", operator.Namespace, "--timeout", "120s", "--kubeconfig", p.AdminKubeconfig)
	took := time.Since(start)
	require.Error(t, err, "helm reports the failed hook:\n%s", out)
	helmErr := err.Error()
	assert.Contains(t, helmErr, "uninstallation completed with 1 error(s)", "the uninstall itself completed")
	assert.Contains(t, helmErr, "DeadlineExceeded", "the reason is the hook's deadline")
	assert.Less(t, took, time.Duration(deadline+30)*time.Second, "bounded by the hook's activeDeadlineSeconds, not helm's --timeout")
	_, err = e.Admin.BatchV1().CronJobs(operator.Namespace).Get(ctx, harness.CronJobName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the CronJob went with the release (err %v)", err)
	releases, err := testkit.Command(ctx, helm, "list", "--all", "--short", "--namespace", operator.Namespace, "--kubeconfig", p.AdminKubeconfig)
	require.NoError(t, err, "%s", releases)
	assert.Empty(t, strings.TrimSpace(string(releases)), "no release left, in any state, to uninstall again")
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.Admin.BatchV1().Jobs(operator.Namespace).Get(ctx, harness.CronJobName+"-cleanup", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}), "the failed hook Job is deleted (hook-failed)")
	dyn, err := dynamic.NewForConfig(p.Admin)
	require.NoError(t, err)
	assertNoCleanupAccess(ctx, t, dyn)
	t.Logf("proved: with the cleanup hook's pod never starting, helm uninstall returned in %s (hook deadline %d s) with %q, the release gone (CronJob, helm status: not found) and nothing of the hook left (Job, ServiceAccount, Roles, policy copy)", took.Round(time.Millisecond), deadline, lastLineOf(helmErr))
}

func lastLineOf(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// releaseObject is one object of a release's manifest.
type releaseObject struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

// releaseObjects decodes `helm get manifest` into the objects the release
// owns.
func releaseObjects(t *testing.T, manifest string) []releaseObject {
	resources := map[string]string{
		"ServiceAccount": "serviceaccounts", "Role": "roles", "RoleBinding": "rolebindings",
		"ConfigMap": "configmaps", "Secret": "secrets", "CronJob": "cronjobs",
		"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
		"Job": "jobs", "ValidatingAdmissionPolicy": "validatingadmissionpolicies", "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
	}
	var out []releaseObject
	for _, doc := range strings.Split(manifest, "\n---") {
		var u unstructured.Unstructured
		require.NoError(t, yaml.Unmarshal([]byte(doc), &u.Object))
		if len(u.Object) == 0 {
			continue
		}
		gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
		require.NoError(t, err)
		res, ok := resources[u.GetKind()]
		require.True(t, ok, "a %s in the release; teach releaseObjects its resource", u.GetKind())
		out = append(out, releaseObject{gvr: gv.WithResource(res), namespace: u.GetNamespace(), name: u.GetName()})
	}
	return out
}
