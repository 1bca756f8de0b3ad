//go:build e2e

package kind

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/harness"
	engine "github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/operator"
)

// What Azure Workload Identity's release fixes (deploy/azure-wi-webhook.yaml,
// cmd/webhook, pkg/webhook), as testdata/azwi-webhook.yaml installs it.
const (
	webhookNamespace  = "azure-workload-identity-system"
	webhookDeployment = "azure-wi-webhook-controller-manager"
	webhookSecret     = "azure-wi-webhook-server-cert"
	webhookConfig     = "azure-wi-webhook-mutating-webhook-configuration"
	// wiRegCode is the registration code of the workload-identity install,
	// so its announce proves which install registered.
	wiRegCode = "WI-REGISTRATION-CODE"
	// fakeEntra is the fake cloud's Entra, which the webhook's cloud
	// environment names as its activeDirectoryEndpoint.
	fakeEntra = "https://" + fakecloudHost + ":8443/"
)

// webhookTokenFiles is where each release of the webhook mounts the
// projected token, the AZURE_FEDERATED_TOKEN_FILE it injects: AKS's add-on
// ships v1.5.1 builds (pkg/webhook/consts.go at v1.5.1, commit 30e0f1b7:
// TokenFileMountPath + TokenFilePathName), v1.6.0 moved it (at v1.6.0,
// commit 04d01a2f: VolumeMountPath + TokenFilePath). The engine reads only
// the variable; the case asserts the path to show which release injected.
var webhookTokenFiles = map[string]string{
	"v1.5.1": "/var/run/secrets/azure/tokens/azure-identity-token",
	"v1.6.0": "/var/run/secrets/azure/wi/token/azure-identity-token",
}

// webhookTokenFile is the token path of webhook release version.
func webhookTokenFile(t *testing.T, version string) string {
	t.Helper()
	f, ok := webhookTokenFiles[version]
	require.True(t, ok, "no token path known for Azure Workload Identity webhook %s: add it to webhookTokenFiles from pkg/webhook/consts.go at that tag", version)
	return f
}

// testWorkloadIdentity: the chart installed with
// azure.credentialMode=workload-identity, as a customer chooses it, and the
// token injected by Azure's own Workload Identity webhook (built from its
// release, running with its own certificate rotation), never by hand. In
// order, each case a customer meets:
//
//   - the webhook not installed: the pod's label does nothing, and the run
//     stops at once with the verdict that asks whether the webhook is
//     installed;
//   - the webhook installed: what it does to a pod (server-side dry runs:
//     its defaults, init containers, skip-containers, the token expiration
//     annotation, a variable already set, hostNetwork with its proxy
//     sidecar);
//   - a federated identity credential of another namespace's
//     ServiceAccount: Entra (the fake, checking the token against the
//     cluster's own issuer and keys) refuses with AADSTS70021, and the
//     verdict names the subject the credential must carry;
//   - the right credential: the run exchanges the projected token at Entra
//     and registers;
//   - each next release of the webhook (v1.5.1, as AKS ships it, first;
//     then v1.6.0, which mounts the token elsewhere), swapped into the same
//     Deployment: its dry runs again, and a new registration code whose run
//     exchanges the token at the path this release injected and registers;
//   - then with hostNetwork: true, which registers too.
func (c *kindCluster) testWorkloadIdentity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*jobBound+5*time.Minute)
	defer cancel()
	azCfg := fakecloud.DefaultAzureConfig()
	subject := "system:serviceaccount:" + operator.Namespace + ":" + engineName

	// 1. No webhook: the chart labels the pod, nothing injects. The case
	// starts from a cluster without the release, whatever the case before
	// it left.
	c.helm(t, ctx, "uninstall", "registration-engine", "--ignore-not-found", "--wait")
	_, err := c.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, webhookConfig, metav1.GetOptions{})
	require.Error(t, err, "the webhook is not installed yet")
	c.installChart(t, ctx, "aks", map[string]any{
		"azure": map[string]any{
			"credentialMode":   "workload-identity",
			"workloadIdentity": map[string]any{"clientId": azCfg.ClientID, "tenantId": azCfg.TenantID},
		},
		"registrationCode": wiRegCode,
	})
	noWebhook := c.releaseRun(t, ctx)
	cond := controlplane.FinishedCondition(noWebhook)
	require.Equal(t, batchv1.JobFailed, cond.Type, "without the webhook the run cannot have a token:\n%s", strings.Join(c.jobLog(t, ctx, noWebhook.Name), "\n"))
	assert.Equal(t, batchv1.JobReasonPodFailurePolicy, cond.Reason, "permanent: failed at once, not retried")
	pods := c.jobPods(t, ctx, noWebhook.Name)
	require.Len(t, pods, 1)
	assert.Equal(t, "true", pods[0].Labels["azure.workload.identity/use"], "the chart labels the pod")
	assert.Empty(t, envValue(pods[0].Spec.Containers[0], "AZURE_FEDERATED_TOKEN_FILE"), "nothing injected")
	term := terminated(pods[0], engineName)
	require.NotNil(t, term)
	assert.Equal(t, int32(engine.ExitPermanent), term.ExitCode)
	noWebhookVerdict := c.logLineContaining(t, ctx, pods[0].Name, "nothing injected AZURE_FEDERATED_TOKEN_FILE")
	assert.Contains(t, noWebhookVerdict, "is the Azure Workload Identity webhook installed?")
	assert.NotContains(t, noWebhookVerdict, "AZURE_CLIENT_ID is not set", "one verdict about the injection, not three about variables")
	t.Logf("proved: helm install with azure.credentialMode=workload-identity on a cluster without Azure's Workload Identity webhook: the run's pod carries azure.workload.identity/use=true and no AZURE_FEDERATED_TOKEN_FILE; Job %s failed at once (%s, exit %d) with %q",
		noWebhook.Name, cond.Reason, term.ExitCode, verdictOf(noWebhookVerdict))

	// 2. The webhook, as its release installs it.
	version := c.installWebhook(t, ctx, c.s.webhookImages[0])
	tokenFile := webhookTokenFile(t, version)
	c.webhookBehaviour(t, ctx, version, tokenFile)

	// 3. Entra holds a federated identity credential for another
	// namespace's ServiceAccount; the issuer and its keys are the
	// cluster's own, as Entra reads them from the issuer's discovery
	// document.
	issuer, jwks := c.serviceAccountIssuer(t, ctx)
	wrong := "system:serviceaccount:default:" + engineName
	c.setFederation(t, ctx, fakecloud.Federation{Issuer: issuer, Subject: wrong, Keys: jwks})
	// A refusal may be a credential still propagating: within the
	// cluster's first contact (this release has no successful run yet) the
	// run is retried (exit 1, failureClass settling), after it permanent.
	// The first pod's verdict is what the customer reads; the Job is then
	// removed rather than waited out through its retries.
	const refusedJob = "wi-wrong-subject"
	c.kubectl(t, ctx, nil, "-n", operator.Namespace, "create", "job", refusedJob, "--from=cronjob/"+harness.CronJobName)
	refusedPod := c.firstFinishedPod(t, ctx, refusedJob)
	term = terminated(refusedPod, engineName)
	require.NotNil(t, term)
	assert.Equal(t, int32(engine.ExitTransient), term.ExitCode, "settling within the first contact: retried, not failed for good")
	assert.Equal(t, tokenFile, envValue(refusedPod.Spec.Containers[0], "AZURE_FEDERATED_TOKEN_FILE"), "the webhook injected the token")
	lines := strings.Split(strings.TrimSpace(c.logs(t, ctx, refusedPod.Name)), "\n")
	var last map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last), "the pod's last log line")
	require.Equal(t, "run finished", last["msg"])
	wrongVerdict, _ := last["error"].(string)
	assert.Contains(t, wrongVerdict, "AADSTS70021")
	assert.Contains(t, wrongVerdict, `subject "`+subject+`"`, "the verdict names the subject the credential must carry")
	assert.Contains(t, wrongVerdict, `issuer "`+issuer+`"`, "and the issuer")
	assert.Equal(t, "settling", last["failureClass"], "the run's summary: %v", last)
	c.kubectl(t, ctx, nil, "-n", operator.Namespace, "delete", "job", refusedJob, "--cascade=foreground", "--wait")
	t.Logf("proved: with a federated identity credential for %s, Entra (the fake, checking the token against the cluster's issuer %s and its JWKS) refused the webhook-injected token with AADSTS70021; Job %s's pod exited %d (settling: retried within the first contact) and the verdict names the subject the credential must carry: %q",
		wrong, issuer, refusedJob, term.ExitCode, wrongVerdict)

	// 4. The right credential: the run registers.
	c.setFederation(t, ctx, fakecloud.Federation{Issuer: issuer, Subject: subject, Keys: jwks})
	start := time.Now()
	job := c.runJob(t, ctx, "wi-registers", nil)
	c.provedRegistered(t, ctx, wiRun{version: version, tokenFile: tokenFile, job: job, took: time.Since(start), regCode: wiRegCode, issuer: issuer, subject: subject})

	// 4b. Each next release of the webhook, swapped into the same
	// Deployment (the manifest is the same at both tags but for the image).
	// A new registration code makes the upgrade's run write the Secret
	// anew, so the operator registers again: a registration through this
	// release's token, not a run that finds everything unchanged.
	chart := filepath.Join("..", "..", "manifests", "chart", "registration-engine")
	lastRun := noWebhook.Name
	for _, image := range c.s.webhookImages[1:] {
		before := tokenFile
		version = c.swapWebhook(t, ctx, image)
		tokenFile = webhookTokenFile(t, version)
		c.webhookBehaviour(t, ctx, version, tokenFile)
		code := wiRegCode + "-" + strings.ReplaceAll(strings.TrimPrefix(version, "v"), ".", "-")
		start = time.Now()
		c.helm(t, ctx, "upgrade", "registration-engine", chart, "--reuse-values", "--set", "registrationCode="+code)
		run := c.nextReleaseRun(t, ctx, lastRun)
		c.provedRegistered(t, ctx, wiRun{version: version, tokenFile: tokenFile, job: run, took: time.Since(start), regCode: code, issuer: issuer, subject: subject})
		lastRun = run.Name
		t.Logf("the webhook's image swapped to %s: AZURE_FEDERATED_TOKEN_FILE went from %s to %s, and the engine followed it", version, before, tokenFile)
	}

	// 5. hostNetwork: true (AKS's IMDS restriction) with workload
	// identity: the webhook injects into a pod on the node's network too.
	c.helm(t, ctx, "upgrade", "registration-engine", chart, "--reuse-values", "--set", "hostNetwork=true")
	run := c.nextReleaseRun(t, ctx, lastRun)
	cond = controlplane.FinishedCondition(run)
	require.Equal(t, batchv1.JobComplete, cond.Type, "workload identity on the node's network: %s\n%s", cond.Message, strings.Join(c.jobLog(t, ctx, run.Name), "\n"))
	pods = c.jobPods(t, ctx, run.Name)
	require.NotEmpty(t, pods)
	assert.True(t, pods[0].Spec.HostNetwork)
	assert.Equal(t, tokenFile, envValue(pods[0].Spec.Containers[0], "AZURE_FEDERATED_TOKEN_FILE"))
	sum := c.summary(t, ctx, run.Name)
	assert.Contains(t, []any{"registered", "unchanged"}, sum["outcome"], "the run's summary: %v", sum)
	assert.Equal(t, "active", sum["operator"], "the run's summary: %v", sum)
	t.Logf("proved: helm upgrade --set hostNetwork=true with workload identity: webhook %s injected the token (%s) into run %s on the node's network, which exchanged it and completed: outcome %v, operator %v",
		version, tokenFile, run.Name, sum["outcome"], sum["operator"])
}

// wiRun is one workload-identity run that must register: the webhook
// release that injected its token and the token path that release uses,
// the Job, how long it took, the code it registers and the federated
// identity credential Entra checks it against.
type wiRun struct {
	version, tokenFile string
	job                *batchv1.Job
	took               time.Duration
	regCode            string
	issuer, subject    string
}

// provedRegistered requires that r's Job completed with what the webhook
// injected (the chart sets none of it), exchanged the token at Entra and
// registered r's code, and logs the proof.
func (c *kindCluster) provedRegistered(t *testing.T, ctx context.Context, r wiRun) {
	t.Helper()
	azCfg := fakecloud.DefaultAzureConfig()
	cond := controlplane.FinishedCondition(r.job)
	require.Equal(t, batchv1.JobComplete, cond.Type, "the workload-identity run with webhook %s did not complete: %s\n%s", r.version, cond.Message, strings.Join(c.jobLog(t, ctx, r.job.Name), "\n"))
	pods := c.jobPods(t, ctx, r.job.Name)
	require.Len(t, pods, 1)
	ctr := pods[0].Spec.Containers[0]
	injected := map[string]string{}
	for _, k := range []string{"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST"} {
		injected[k] = envValue(ctr, k)
	}
	assert.Equal(t, map[string]string{
		"AZURE_CLIENT_ID": azCfg.ClientID, "AZURE_TENANT_ID": azCfg.TenantID,
		"AZURE_FEDERATED_TOKEN_FILE": r.tokenFile, "AZURE_AUTHORITY_HOST": fakeEntra,
	}, injected, "what webhook %s injected (the chart sets none of them)", r.version)
	mounted := false
	for _, m := range ctr.VolumeMounts {
		mounted = mounted || webhookVolume(m.Name) && strings.HasPrefix(r.tokenFile, m.MountPath+"/")
	}
	assert.True(t, mounted, "webhook %s mounts its token volume above %s: %+v", r.version, r.tokenFile, ctr.VolumeMounts)
	vol := projectedToken(pods[0])
	require.NotNil(t, vol, "webhook %s's projected token volume", r.version)
	sum := c.summary(t, ctx, r.job.Name)
	assert.Equal(t, "registered", sum["outcome"], "the run's summary: %v", sum)
	assert.Equal(t, "active", sum["operator"], "the run's summary: %v", sum)
	token := c.jobLogLine(t, ctx, r.job.Name, "azure token acquired")
	require.NotNil(t, token, "the run logged its credential")
	assert.Equal(t, "workload-identity", token["credentialMode"])
	announce := c.announce(t, ctx, r.regCode)
	assert.Equal(t, 201, announce.Status)
	t.Logf("proved: WI %s injected → exchanged → registered: helm chart with azure.credentialMode=workload-identity → Azure Workload Identity webhook %s injected AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE=%s and AZURE_AUTHORITY_HOST=%s and the projected token (audience %s, %d s) → Job %s exchanged it at Entra (issuer %s, subject %s checked against the cluster's JWKS; credentialMode %v) → registered in %.0fs: summary outcome %v, operator %v, Registration %v, the update server announced code %s",
		r.version, r.version, r.tokenFile, fakeEntra, vol.Audience, *vol.ExpirationSeconds, r.job.Name, r.issuer, r.subject, token["credentialMode"], r.took.Seconds(), sum["outcome"], sum["operator"], sum["registration"], announce.RegCode)
}

// installWebhook applies testdata/azwi-webhook.yaml with image, waits
// until the webhook's rotator has made its certificate, the pod serves and
// the API server calls it, and returns the version the webhook reports.
func (c *kindCluster) installWebhook(t *testing.T, ctx context.Context, image string) string {
	t.Helper()
	start := time.Now()
	b, err := os.ReadFile(filepath.Join("testdata", "azwi-webhook.yaml"))
	require.NoError(t, err)
	manifest := strings.NewReplacer("image: IMAGE", "image: "+image, "AZURE_TENANT_ID: TENANT", "AZURE_TENANT_ID: "+fakecloud.DefaultAzureConfig().TenantID).Replace(string(b))
	c.kubectl(t, ctx, []byte(manifest), "apply", "-f", "-")

	// The rotator writes the Secret; the kubelet would hand the pod the
	// files only at its next sync of the pod (a minute or so): a change to
	// the pod makes it sync at once, as configSync does for CoreDNS.
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := c.cs.CoreV1().Secrets(webhookNamespace).Get(ctx, webhookSecret, metav1.GetOptions{})
		return err == nil && len(s.Data["tls.crt"]) > 0, nil
	})
	require.NoError(t, err, "the webhook's rotator never wrote %s", webhookSecret)
	nudged := false
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := c.cs.AppsV1().Deployments(webhookNamespace).Get(ctx, webhookDeployment, metav1.GetOptions{})
		if err == nil && d.Status.ReadyReplicas >= 1 {
			return true, nil
		}
		if !nudged {
			nudged = c.touchPods(ctx, webhookNamespace, "azure-workload-identity.io/system=true")
		}
		return false, nil
	})
	require.NoError(t, err, "the webhook did not become ready")
	mwc, err := c.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, webhookConfig, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, mwc.Webhooks[0].ClientConfig.CABundle, "the rotator injected its CA into %s", webhookConfig)
	version := c.webhookVersion(t, ctx, image)
	t.Logf("Azure Workload Identity webhook %s ready in %.1fs (its rotator made the certificate and %s's caBundle)", version, time.Since(start).Seconds(), webhookConfig)
	return version
}

// swapWebhook sets the webhook Deployment's image to image (what an
// upgrade of AKS's add-on does; the manifest is otherwise the same), waits
// until its one pod runs that image and is ready and the old pod is gone,
// so the API server can call only the new release, and returns the version
// the new pod reports. The rotator's certificate and caBundle stay.
func (c *kindCluster) swapWebhook(t *testing.T, ctx context.Context, image string) string {
	t.Helper()
	start := time.Now()
	patch := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"manager","image":"` + image + `"}]}}}}`)
	_, err := c.cs.AppsV1().Deployments(webhookNamespace).Patch(ctx, webhookDeployment, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "set the webhook's image to %s", image)
	var pods []corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.cs.CoreV1().Pods(webhookNamespace).List(ctx, metav1.ListOptions{LabelSelector: "azure-workload-identity.io/system=true"})
		if err != nil {
			return false, nil
		}
		pods = list.Items
		return len(pods) == 1 && pods[0].DeletionTimestamp == nil && pods[0].Spec.Containers[0].Image == image && podReady(pods[0]), nil
	})
	require.NoError(t, err, "the webhook's pods did not become one ready pod of %s: %v", image, podNames(pods))
	version := c.webhookVersion(t, ctx, image)
	t.Logf("Azure Workload Identity webhook swapped to %s (%s) in %.1fs", version, image, time.Since(start).Seconds())
	return version
}

// webhookVersion is the version the webhook's pod of image logs (its user
// agent: "setting up manager", at v1.5.1 and v1.6.0 alike).
func (c *kindCluster) webhookVersion(t *testing.T, ctx context.Context, image string) string {
	t.Helper()
	pods, err := c.cs.CoreV1().Pods(webhookNamespace).List(ctx, metav1.ListOptions{LabelSelector: "azure-workload-identity.io/system=true"})
	require.NoError(t, err)
	i := slices.IndexFunc(pods.Items, func(p corev1.Pod) bool {
		return p.DeletionTimestamp == nil && p.Spec.Containers[0].Image == image
	})
	require.GreaterOrEqual(t, i, 0, "no webhook pod of %s: %v", image, podNames(pods.Items))
	logs, err := c.cs.CoreV1().Pods(webhookNamespace).GetLogs(pods.Items[i].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	require.NoError(t, err)
	version := ""
	for _, line := range strings.Split(string(logs), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "setting up manager" {
			ua, _ := m["userAgent"].(string)
			// azure-workload-identity/webhook/<version> (<os>/<arch>) …
			if parts := strings.Split(ua, "/"); len(parts) > 2 {
				version, _, _ = strings.Cut(parts[2], " ")
			}
		}
	}
	require.NotEmpty(t, version, "the webhook logged no user agent:\n%s", logs)
	require.True(t, strings.HasSuffix(image, ":"+version), "image %s runs webhook %s", image, version)
	return version
}

// podReady reports whether pod's Ready condition is true.
func podReady(pod corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// touchPods annotates the pods matching selector, which makes the kubelet
// sync them (and their Secret volumes) at once; true once it did.
func (c *kindCluster) touchPods(ctx context.Context, ns, selector string) bool {
	pods, err := c.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil || len(pods.Items) == 0 {
		return false
	}
	patch := []byte(`{"metadata":{"annotations":{"e2e.registration-engine/sync":"` + time.Now().Format(time.RFC3339Nano) + `"}}}`)
	for _, p := range pods.Items {
		if _, err := c.cs.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return false
		}
	}
	return true
}

// webhookBehaviour shows, by server-side dry runs of pods of the engine's
// ServiceAccount (the API server calls the webhook; nothing runs), what
// the webhook does beyond the run's own pod: its token expiration default
// and annotation, init containers, skip-containers, a variable already
// set, and the proxy sidecar refused on the node's network.
func (c *kindCluster) webhookBehaviour(t *testing.T, ctx context.Context, version, tokenFile string) {
	t.Helper()
	dryRun := func(mutate func(*corev1.Pod)) (*corev1.Pod, error) {
		ctr := func(name string) corev1.Container {
			return corev1.Container{Name: name, Image: c.s.image, ImagePullPolicy: corev1.PullNever}
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "wi-dry-run-", Namespace: operator.Namespace,
				Labels: map[string]string{"azure.workload.identity/use": "true"}},
			Spec: corev1.PodSpec{
				ServiceAccountName: engineName,
				RestartPolicy:      corev1.RestartPolicyNever,
				InitContainers:     []corev1.Container{ctr("init")},
				Containers:         []corev1.Container{ctr("main"), ctr("preset"), ctr("skipped")},
			},
		}
		mutate(pod)
		return c.cs.CoreV1().Pods(operator.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	}
	// The API server may call the webhook before its Service has an
	// endpoint; it refuses the pod then (failurePolicy Fail).
	var got *corev1.Pod
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
		got, last = dryRun(func(p *corev1.Pod) {
			p.Annotations = map[string]string{"azure.workload.identity/skip-containers": "skipped"}
			p.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "AZURE_AUTHORITY_HOST", Value: "https://preset.example/"}}
		})
		return last == nil, nil
	})
	require.NoError(t, err, "the webhook never answered a dry run: %v", last)
	byName := map[string]corev1.Container{}
	for _, ctr := range append(slices.Clone(got.Spec.InitContainers), got.Spec.Containers...) {
		byName[ctr.Name] = ctr
	}
	vol := projectedToken(*got)
	require.NotNil(t, vol, "the webhook adds the projected token volume")
	assert.Equal(t, fakecloud.TokenExchangeAudience, vol.Audience)
	assert.EqualValues(t, 3600, *vol.ExpirationSeconds, "its default token lifetime")
	assert.Equal(t, tokenFile, envValue(byName["init"], "AZURE_FEDERATED_TOKEN_FILE"), "init containers get the token too, at webhook %s's path", version)
	assert.Equal(t, fakeEntra, envValue(byName["main"], "AZURE_AUTHORITY_HOST"), "the authority host of the webhook's cloud environment")
	assert.Equal(t, "https://preset.example/", envValue(byName["preset"], "AZURE_AUTHORITY_HOST"), "a variable the pod sets wins: the webhook adds only those absent")
	assert.Equal(t, tokenFile, envValue(byName["preset"], "AZURE_FEDERATED_TOKEN_FILE"))
	assert.Empty(t, byName["skipped"].Env, "skip-containers: no variables")
	for _, m := range byName["skipped"].VolumeMounts {
		assert.False(t, webhookVolume(m.Name), "skip-containers: no token (the API server's own kube-api-access stays): %s", m.Name)
	}

	longer, err := dryRun(func(p *corev1.Pod) {
		p.Annotations = map[string]string{"azure.workload.identity/service-account-token-expiration": "86400"}
	})
	require.NoError(t, err)
	assert.EqualValues(t, 86400, *projectedToken(*longer).ExpirationSeconds, "the expiration annotation")

	_, sidecarErr := dryRun(func(p *corev1.Pod) {
		p.Annotations = map[string]string{"azure.workload.identity/inject-proxy-sidecar": "true"}
		p.Spec.HostNetwork = true
	})
	require.Error(t, sidecarErr, "the proxy sidecar on the node's network is refused")
	assert.Contains(t, sidecarErr.Error(), "hostNetwork is set to true, cannot inject proxy sidecar")
	t.Logf("proved: Azure Workload Identity webhook %s (server-side dry runs of pods of ServiceAccount %s): AZURE_FEDERATED_TOKEN_FILE %s; token audience %s, %d s by default and %d s with azure.workload.identity/service-account-token-expiration; init containers injected too; skip-containers left alone; AZURE_AUTHORITY_HOST %s from its cloud environment, but a value the pod sets wins; inject-proxy-sidecar with hostNetwork refused: %q",
		version, engineName, tokenFile, vol.Audience, *vol.ExpirationSeconds, *projectedToken(*longer).ExpirationSeconds, fakeEntra, sidecarErr.Error())
}

// serviceAccountIssuer is the cluster's service-account token issuer from
// its OIDC discovery document, and the JWKS the document points to: what
// Entra reads for a federated identity credential of this issuer.
func (c *kindCluster) serviceAccountIssuer(t *testing.T, ctx context.Context) (string, json.RawMessage) {
	t.Helper()
	rc := c.cs.CoreV1().RESTClient()
	b, err := rc.Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	require.NoError(t, err)
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	require.NotEmpty(t, doc.Issuer)
	// jwks_uri names the API server's external address; through the
	// client, the same path.
	require.True(t, strings.HasSuffix(doc.JWKSURI, "/openid/v1/jwks"), "jwks_uri %s", doc.JWKSURI)
	jwks, err := rc.Get().AbsPath("/openid/v1/jwks").DoRaw(ctx)
	require.NoError(t, err)
	return doc.Issuer, jwks
}

// setFederation gives the fake cloud's Entra the federated identity
// credential f (PUT /fakecloud/federation through the API server's Service
// proxy).
func (c *kindCluster) setFederation(t *testing.T, ctx context.Context, f fakecloud.Federation) {
	t.Helper()
	body, err := json.Marshal(f)
	require.NoError(t, err)
	_, err = c.cs.CoreV1().RESTClient().Put().
		AbsPath("/api/v1/namespaces/"+operator.Namespace+"/services/http:"+fakecloudName+":imds/proxy/fakecloud/federation").
		Body(body).SetHeader("Content-Type", "application/json").DoRaw(ctx)
	require.NoError(t, err, "PUT /fakecloud/federation")
}

// firstFinishedPod waits for the first pod of Job job whose engine
// container has terminated.
func (c *kindCluster) firstFinishedPod(t *testing.T, ctx context.Context, job string) corev1.Pod {
	t.Helper()
	var done corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, time.Second, jobBound, true, func(context.Context) (bool, error) {
		for _, p := range c.jobPods(t, ctx, job) {
			if terminated(p, engineName) != nil {
				done = p
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no pod of Job %s finished", job)
	return done
}

// logLineContaining is the engine's log line in pod that contains s.
func (c *kindCluster) logLineContaining(t *testing.T, ctx context.Context, pod, s string) string {
	t.Helper()
	logs := c.logs(t, ctx, pod)
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	require.Failf(t, "no log line contains "+s, "%s", logs)
	return ""
}

// verdictOf is the error a JSON log line carries, or the line.
func verdictOf(line string) string {
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) == nil {
		if e, ok := m["error"].(string); ok {
			return e
		}
	}
	return line
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// webhookVolume reports whether a volume of this name is the webhook's
// projected token: azure-identity-token (v1.5.1's TokenFilePathName) or
// azure-workload-identity-reserved-<hash of the pod> (v1.6.0's
// ProjectedVolumeNamePrefix).
func webhookVolume(name string) bool {
	return name == "azure-identity-token" || strings.HasPrefix(name, "azure-workload-identity-reserved-")
}

// projectedToken is the webhook's projected service-account token source
// in pod (its volume, see webhookVolume), or nil.
func projectedToken(pod corev1.Pod) *corev1.ServiceAccountTokenProjection {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil || !webhookVolume(v.Name) {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				return s.ServiceAccountToken
			}
		}
	}
	return nil
}
