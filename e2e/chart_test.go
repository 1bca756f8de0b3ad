package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/e2e/sccoperator"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/kube"
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
// Marketplace bundle's values on a real kube-apiserver, runs a manual Job
// from its CronJob against the fake cloud, and uninstalls it, once per
// credential mode the portal offers:
//
//   - the Marketplace default: the install sets only what Azure injects and
//     what mainTemplate.json's settings carry, so the credential is the
//     extension's managed identity (global.azure.identity.clientId), whose
//     ARM token the run gets from the fake IMDS; no Workload Identity
//     webhook acts on the pod;
//   - workload identity, as a customer may choose: the webhook stand-in
//     injects the IDs from the ServiceAccount's annotations, and the token
//     comes from the fake Entra, never from IMDS.
//
// Each runs on a plane of its own: the chart owns objects (the kube-system
// Role, the CronJob) that TestCluster applies from the e2e overlay.
func TestChartInstall(t *testing.T) {
	helm := testkit.Helm(t)
	tests := map[string]chartCase{
		"marketplace default: the extension's managed identity": {wantMode: "managed-identity", wantTokenRequests: 1},
		"workload identity chosen in the portal": {
			set:              []string{"azure.credentialMode=workload-identity", "azure.workloadIdentity.clientId=" + fakecloud.DefaultAzureConfig().ClientID, "azure.workloadIdentity.tenantId=" + fakecloud.DefaultAzureConfig().TenantID},
			workloadIdentity: true, wantMode: "workload-identity", wantTokenRequests: 0,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) { tc.run(t, helm) })
	}
}

// chartCase is one install of TestChartInstall.
type chartCase struct {
	// set are --set values beyond what Azure injects and the Marketplace
	// settings carry.
	set []string
	// workloadIdentity: the webhook stand-in acts on labelled pods.
	workloadIdentity  bool
	wantMode          string
	wantTokenRequests int32
}

func (tc chartCase) run(t *testing.T, helm string) {
	var extra []string
	for _, kv := range tc.set {
		extra = append(extra, "--set", kv)
	}
	p := controlplane.Start(t)
	e := &clusterEnv{&harness.Cluster{Plane: p, Admin: p.AdminClient(t)}}
	if tc.workloadIdentity {
		e.Admission = workloadIdentityWebhook(e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// What the cluster has before the install: Rancher's namespace and
	// kube-system's CoreDNS, as on AKS (where the Marketplace installs):
	// the Corefile and coredns-custom, where the chart's default lets the
	// engine write.
	_, err := e.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kube.Namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	p.Apply(t, []byte(harness.AKSCorednsFixture))
	_, err = e.Admin.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns-custom"}, Data: map[string]string{"log.override": "log\n"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The run's handover wait asks the cluster's DNS, a real CoreDNS
	// serving these ConfigMaps.
	e.DNS = sccoperator.StartClusterDNS(t, e.Admin, 0)

	c := harness.StartCloud(t)
	cloudEnv := c.Vars()
	chart := filepath.Join("..", "manifests", "chart", "registration-engine")
	start := time.Now()
	runHelm(t, p, helm, append([]string{"install", "registration-engine", chart, "--namespace", kube.Namespace,
		"--values", filepath.Join("..", "manifests", "marketplace", "values.yaml"),
		// What Azure injects at deployment.
		"--set", "global.azure.identity.clientId=" + fakecloud.DefaultAzureConfig().ManagedIdentityClientID,
		"--set", "global.azure.extension.resourceId=" + cloudEnv["EXTENSION_RESOURCE_ID"],
		"--set", "global.azure.marketplace.planId=" + cloudEnv["MARKETPLACE_PLAN_ID"],
		"--set", "global.azure.images.engine.registry=marketplace.azurecr.io",
		"--set", "global.azure.images.engine.image=rancher/registration-engine",
		"--set", "global.azure.images.engine.digest=sha256:" + strings.Repeat("0", 64),
		// mainTemplate.json's settings: the plan from Partner Center, the
		// customer's identity choice, the protected registration code.
		"--set", "marketplace.publisherId=" + cloudEnv["MARKETPLACE_PUBLISHER_ID"],
		"--set", "marketplace.offerId=" + cloudEnv["MARKETPLACE_OFFER_ID"],
		"--set", "registrationCode=" + chartRegCode,
		// The fake cloud's update servers listen on loopback.
		"--set", "inClusterDNSTestLoopback=true",
	}, extra...)...)
	installed := time.Since(start)
	manifest := runHelm(t, p, helm, "get", "manifest", "registration-engine", "--namespace", kube.Namespace)
	release := releaseObjects(t, manifest)
	require.NotEmpty(t, release)

	// A manual run, as the NOTES tell the user.
	runs := e.StartKubelet(ctx, t, kube.Namespace, c)
	const name = "manual-chart"
	p.Kubectl(t, "-n", kube.Namespace, "create", "job", "--from=cronjob/"+harness.CronJobName, name)
	pr := e.completedRun(ctx, t, runs, name)
	assert.Equal(t, job.OutcomeRegistered, summary(t, pr.Res.Stderr)["outcome"])
	tokens := identityTokenRequests(t, c)
	assert.Equal(t, tc.wantTokenRequests, tokens, "managed identity token requests IMDS answered")
	assert.Equal(t, tc.wantMode, logLine(t, pr.Res.Stderr, "azure token acquired")["credentialMode"], "the credential the run used")
	before := e.Secret(ctx, t)
	harness.AssertRegistration(t, before, chartRegCode)

	// Uninstall: every object of the release goes, the operator's Secret
	// stays.
	runHelm(t, p, helm, "uninstall", "registration-engine", "--namespace", kube.Namespace, "--wait", "--timeout", "60s")
	dyn, err := dynamic.NewForConfig(p.Admin)
	require.NoError(t, err)
	for _, o := range release {
		_, err := dyn.Resource(o.gvr).Namespace(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "%s %s/%s survived helm uninstall (err %v)", o.gvr.Resource, o.namespace, o.name, err)
	}
	// The manual Job belonged to the CronJob: the garbage collector takes it.
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.Admin.BatchV1().Jobs(kube.Namespace).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}), "the manual Job outlived its CronJob")
	after := e.Secret(ctx, t)
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "helm uninstall must not touch the operator's Secret")
	harness.AssertRegistration(t, after, chartRegCode)
	// What else the engine wrote at run time, and therefore stays: its
	// released Lease.
	lease, err := e.Admin.CoordinationV1().Leases(kube.Namespace).Get(ctx, harness.LeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, ptr.Deref(lease.Spec.HolderIdentity, ""), "released at the end of the run")

	t.Logf("proved: helm install of manifests/chart/registration-engine with the Marketplace values (%d objects, %s), a manual Job from its CronJob completed with credential mode %s (%d token requests to IMDS) and wrote %s with the protected registration code, and helm uninstall removed all %d objects and the Job but left %s (and the released Lease) in place (pod ran %s)",
		len(release), installed.Round(time.Millisecond), tc.wantMode, tokens, kube.SecretName, len(release), kube.SecretName, pr.Res.Took.Round(time.Millisecond))
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
		"ValidatingAdmissionPolicy": "validatingadmissionpolicies", "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
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
