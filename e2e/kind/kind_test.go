//go:build e2e

package kind

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindlog "sigs.k8s.io/kind/pkg/log"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/e2e/sccoperator"
	engine "github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
)

// What manifests/overlays/e2e fixes, beside harness's CronJobName,
// UpdateServer and OverlayRegCode.
const (
	engineName    = "registration-engine" // the CronJob's container
	fakecloudName = "fakecloud"           // its Deployment and Service
	fakecloudHost = "fakecloud.cattle-scc-system.svc"
	planEnv       = "MARKETPLACE_PLAN_ID"
	// handoverEnv bounds the engine's wait, before it writes the Secret,
	// for the update server's name to resolve through the cluster's DNS
	// and answer TLS; 0 turns the wait off (for this test only).
	handoverEnv = "HANDOVER_TIMEOUT"
	// jobBound is how long a Job may take: the engine's handover wait
	// (CoreDNS picks a Corefile change up after 30–110 s) and then its
	// wait for the operator's answer.
	jobBound = 5 * time.Minute
)

// settings are the harness's choices; make e2e-kind sets them.
type settings struct {
	nodeImage, image, fakecloudImage string
	operatorImage                    string
	// webhookImages are Azure Workload Identity's webhook at each release
	// the workload-identity case proves, the first installed, each next one
	// swapped in (e2e/kind/lib.sh's AZWI_VERSIONS).
	webhookImages []string
	kubectl       string
	clusterName   string
	artifacts     string
	keep          bool
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func load(t *testing.T) settings {
	t.Helper()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	s := settings{
		nodeImage:      env("KIND_NODE_IMAGE", "local/kind-node:v1.37.2"),
		image:          env("E2E_IMAGE", "registration-engine:latest"),
		fakecloudImage: env("E2E_FAKECLOUD_IMAGE", "registration-engine-fakecloud:latest"),
		operatorImage:  env("E2E_OPERATOR_IMAGE", "local/scc-operator:"+sccoperator.CommitRMT[:7]),
		webhookImages:  strings.Fields(env("E2E_WEBHOOK_IMAGES", "local/azwi-webhook:v1.5.1 local/azwi-webhook:v1.6.0")),
		kubectl:        filepath.Join(os.Getenv("K8S_TESTBIN"), "kubectl"),
		clusterName:    env("E2E_CLUSTER_NAME", "registration-engine-e2e"),
		artifacts:      env("E2E_ARTIFACTS", filepath.Join(repo, "_out", "kind-e2e")),
		keep:           os.Getenv("E2E_KEEP_CLUSTER") == "1",
	}
	require.NotEmpty(t, os.Getenv("K8S_TESTBIN"), "K8S_TESTBIN must name the directory of kubectl (make e2e-kind sets it)")
	require.FileExists(t, s.kubectl)
	require.NotEmpty(t, s.webhookImages, "E2E_WEBHOOK_IMAGES names no webhook image")
	for _, img := range append([]string{s.nodeImage, s.image, s.fakecloudImage, s.operatorImage}, s.webhookImages...) {
		out, err := exec.Command("docker", "image", "inspect", "-f", "{{.Id}}", img).CombinedOutput()
		require.NoError(t, err, "image %s is missing (make e2e-kind builds it): %s", img, out)
	}
	require.NoError(t, os.MkdirAll(s.artifacts, 0o755))
	return s
}

// TestKind runs the whole product as users run it: the engine's image from
// the project's Dockerfile, the CronJob of manifests/overlays/e2e, a Job
// made from it by `kubectl create job --from=cronjob/registration-engine`,
// in a pod with its ServiceAccount token, a projected Workload Identity
// token, a read-only root filesystem and user 65532, against the fake cloud
// running as a pod and reached over the pod network; and rancher/scc-operator
// (the revision the engine needs) as a pod of its own, which reads the
// Secret, resolves the update server's name through the cluster's real
// CoreDNS and registers with the fake update server. A wrong Marketplace
// plan must fail the Job at once; the right one must end with the
// operator's Registration active, never Failed; the same run with the
// engine's handover wait turned off must end Failed, which is what the wait
// is for; the next run must then recover that Registration by itself; and
// the Helm chart installed as the Azure Marketplace installs it (the
// bundle's values, the extension's managed identity) must register again.
func TestKind(t *testing.T) {
	s := load(t)
	c := createCluster(t, s)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c.apply(t, ctx)
	c.waitForSystem(t, ctx)
	c.waitForFakecloud(t, ctx)
	c.copyTrust(t, ctx)
	pristine := c.corefile(t, ctx)
	c.installOperator(t, ctx)
	rec, err := sccoperator.Record(context.Background(), c.cfg)
	require.NoError(t, err)
	defer rec.Stop()

	// First the failure: it stops at phase 2 and leaves nothing behind, so
	// the success after it starts from a cluster without the Secret.
	t.Run("wrong plan fails the Job at once", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		job := c.runJob(t, ctx, "manual-wrong-plan", func(pod *corev1.PodSpec) {
			controlplane.SetEnv(engineContainer(t, pod), map[string]string{planEnv: "not-the-plan-of-the-extension"})
		})
		failed := controlplane.FinishedCondition(job)
		require.Equal(t, batchv1.JobFailed, failed.Type, "the Job did not fail: %+v", job.Status)
		assert.Equal(t, batchv1.JobReasonPodFailurePolicy, failed.Reason, "podFailurePolicy (exit %d) ended the Job: %s", engine.ExitPermanent, failed.Message)
		assert.Equal(t, int32(1), job.Status.Failed, "one pod, no retries")
		pods := c.jobPods(t, ctx, job.Name)
		require.Len(t, pods, 1, "a permanent failure is not retried: pods %v", podNames(pods))
		term := terminated(pods[0], engineName)
		require.NotNil(t, term, "the engine container did not terminate")
		assert.Equal(t, int32(engine.ExitPermanent), term.ExitCode)
		logs := c.logs(t, ctx, pods[0].Name)
		assert.Contains(t, logs, "not-the-plan-of-the-extension", "the log names the plan that did not match")
		_, err := c.cs.CoreV1().Secrets(operator.Namespace).Get(ctx, operator.SecretName, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "a failed run wrote %s: %v", operator.SecretName, err)
		t.Logf("proved: with plan %q the pod exits %d and the Job fails by its podFailurePolicy with %d pod", "not-the-plan-of-the-extension", term.ExitCode, len(pods))
	})

	// registered is the overlay's active Registration; failed the one the
	// run without the handover wait left Failed; chartRegistered the
	// chart's active one.
	var registered, failed, chartRegistered string
	t.Run("manual Job registers the cluster", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), jobBound+2*time.Minute)
		defer cancel()
		start := time.Now()
		job := c.runJob(t, ctx, "manual-1", nil)
		require.Equal(t, batchv1.JobComplete, controlplane.FinishedCondition(job).Type, "the Job did not complete: %+v", job.Status)
		assert.Equal(t, int32(0), job.Status.Failed, "no pod failed on the way")
		took := time.Since(start)

		sec, err := c.cs.CoreV1().Secrets(operator.Namespace).Get(ctx, operator.SecretName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, corev1.SecretTypeOpaque, sec.Type)
		assert.Equal(t, operator.RegistrationTypeOnline, string(sec.Data[operator.KeyRegistrationType]))
		assert.Equal(t, "https://"+harness.UpdateServer, string(sec.Data[operator.KeyRegistrationURL]), "the update server's name, never the raced address")
		assert.Equal(t, harness.OverlayRegCode, string(sec.Data[operator.KeyRegCode]))
		assert.True(t, strings.HasPrefix(string(sec.Data[operator.KeyInstanceData]), "<document>"), "instanceData: %.80q", sec.Data[operator.KeyInstanceData])
		block, _ := pem.Decode(sec.Data[operator.KeyRegistrationURLCert])
		require.NotNil(t, block, "registrationUrlCert is not PEM")
		cert, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		assert.NoError(t, cert.VerifyHostname(harness.UpdateServer), "registrationUrlCert is not the update server's")
		served := c.updateServerCert(t, ctx)
		assert.Equal(t, strings.TrimSpace(served), strings.TrimSpace(string(sec.Data[operator.KeyRegistrationURLCert])), "the certificate the update server serves")

		sum := c.summary(t, ctx, job.Name)
		assert.Equal(t, "registered", sum["outcome"], "the run's summary: %v", sum)
		assert.Equal(t, "active", sum["operator"], "the run waited for the operator's answer: %v", sum)
		replicas := c.coreDNSReplicas(t, ctx)
		handed := c.jobLogLine(t, ctx, job.Name, "update server reachable through the cluster: handing over")
		require.NotNil(t, handed, "the run handed over")
		assert.EqualValues(t, replicas, handed["replicasAsked"], "every CoreDNS replica was asked directly before the handover")
		assert.GreaterOrEqual(t, replicas, 2, "kind runs two CoreDNS replicas")
		ev := c.jobEvent(t, ctx, job.Name)
		assert.Equal(t, kube.ReasonRegistered, ev.Reason, "%s", ev.Note)
		assert.Equal(t, corev1.EventTypeNormal, ev.Type)
		podIP := c.fakecloudPodIP(t, ctx)
		assert.Contains(t, c.corefile(t, ctx), podIP+" "+harness.UpdateServer, "CoreDNS maps the update server's name to the address that won the race")
		t.Logf("proved: Job %s completed in %.1fs and wrote %s with its five keys after each of the %d CoreDNS replicas answered %s with %s (the fake cloud's pod)",
			job.Name, took.Seconds(), operator.SecretName, replicas, harness.UpdateServer, podIP)

		t.Run("the operator registers and activates", func(t *testing.T) {
			var final sccoperator.Registration
			var states int
			registered, final, states = c.activeRegistration(t, ctx, rec)
			announce := c.announce(t, ctx, harness.OverlayRegCode)
			assert.Equal(t, http.StatusCreated, announce.Status)
			assert.Equal(t, harness.UpdateServer, announce.ServerName, "the operator dialled the update server by its name (SNI)")
			assert.True(t, strings.HasSuffix(announce.LocalAddr, ":443"), "on 443, where https://%s leads: %s", harness.UpdateServer, announce.LocalAddr)
			t.Logf("proved: CronJob → Job %s (%.0fs, summary operator=%v, Event %s) → Secret → rancher/scc-operator %.7s in a pod resolved %s through CoreDNS to %s and registered with regCode %s: Registration %s Done, activationStatus.activated=%t, system %d, %q, never Failure (%d states)",
				job.Name, took.Seconds(), sum["operator"], ev.Reason, sccoperator.CommitRMT, harness.UpdateServer, podIP, announce.RegCode, registered, final.Activated, final.SystemID, final.RegisteredProduct, states)
		})

		t.Run("the update server's name resolves in the cluster", func(t *testing.T) {
			got, ok := c.resolve(t, ctx, harness.UpdateServer, 60)
			require.True(t, ok, "%s does not resolve in the cluster: %s", harness.UpdateServer, got)
			assert.Equal(t, podIP, got)
			t.Logf("proved: a pod resolves %s to %s through CoreDNS", harness.UpdateServer, got)
		})
	})

	// From here on the kubelet hands CoreDNS a changed ConfigMap at once
	// (configSync); the run above waited out its real sync.
	cfgSync := c.startConfigSync(t)

	// The same cluster as the engine found it (no Secret, no Registration,
	// a Corefile without the entry, loaded by CoreDNS), and the engine
	// without its handover wait: the Secret then reaches the operator
	// before CoreDNS answers for the name, and the operator gives up for
	// good. The race is not close: the operator acts on the Secret within
	// a second or two, CoreDNS loads the edited Corefile only after the
	// kubelet refreshed its ConfigMap volume (its periodic sync, about a
	// minute: the config sync is paused until the Registration failed) and
	// the reload plugin's next check (every 30 s ± 15 s), the 30–110 s
	// measured before the wait existed; the test reports both.
	t.Run("without the handover wait the operator fails for good", func(t *testing.T) {
		require.NotEmpty(t, registered, "needs the registration of the previous subtest")
		ctx, cancel := context.WithTimeout(context.Background(), jobBound+4*time.Minute)
		defer cancel()
		c.deregister(t, ctx, rec, registered)
		c.resetCoreDNS(t, ctx, pristine)
		if addr, ok := c.resolve(t, ctx, harness.UpdateServer, 1); ok {
			require.Failf(t, "the reset cluster still resolves the name", "%s → %s", harness.UpdateServer, addr)
		}
		reqsBefore := len(c.sccRequests(t, ctx))

		start := time.Now()
		cfgSync.pause()
		job := c.runJob(t, ctx, "manual-no-wait", func(pod *corev1.PodSpec) {
			controlplane.SetEnv(engineContainer(t, pod), map[string]string{handoverEnv: "0"})
		})
		jobCond := controlplane.FinishedCondition(job)
		finished := time.Since(start)
		name := c.waitRegistration(t, ctx, rec)
		cfgSync.resume()
		failed = name
		states := rec.States(name)
		final := states[len(states)-1]
		require.True(t, final.Failed(), "Registration %s did not fail: %s", name, final)
		assert.False(t, final.Activated)
		assert.Contains(t, final.FailureMessage(), "no such host", "the operator could not resolve %s", harness.UpdateServer)
		for _, r := range c.sccRequests(t, ctx)[reqsBefore:] {
			assert.NotEqual(t, "/connect/subscriptions/systems", r.Path, "nothing reached the update server: %+v", r)
		}
		// It stays Failed once CoreDNS answers: the operator does not retry.
		_, ok := c.resolve(t, ctx, harness.UpdateServer, 90)
		resolvedAt := time.Since(start)
		require.True(t, ok, "%s never resolved", harness.UpdateServer)
		time.Sleep(10 * time.Second)
		again, err := sccoperator.Get(ctx, c.dyn, name)
		require.NoError(t, err)
		assert.True(t, again.Failed() && !again.Activated, "Registration %s after the name resolved: %s", name, again)
		// The engine said so: the run fails for good (exit 2, the Job's
		// podFailurePolicy, no retry) and the Job carries the Warning.
		sum := c.summary(t, ctx, job.Name)
		assert.Equal(t, "failed", sum["operator"], "the run's summary: %v", sum)
		assert.EqualValues(t, engine.ExitPermanent, sum["exitCode"])
		assert.Equal(t, batchv1.JobFailed, jobCond.Type, "a Failed Registration must not leave a Complete Job: %s", jobCond.Message)
		assert.Equal(t, batchv1.JobReasonPodFailurePolicy, jobCond.Reason)
		ev := c.jobEvent(t, ctx, job.Name)
		assert.Equal(t, kube.ReasonOperatorFailed, ev.Reason, "%s", ev.Note)
		assert.Equal(t, corev1.EventTypeWarning, ev.Type)
		t.Logf("proved: with %s=0 Job %s ended %s (%s; summary operator=%v exitCode=%v; Event %s) %.0fs after it started, its Registration %s Failed (%q); a pod resolved %s only %.0fs after the start, and the Registration stayed Failed: the wait is what makes it work",
			handoverEnv, job.Name, jobCond.Type, jobCond.Reason, sum["operator"], sum["exitCode"], ev.Reason, finished.Seconds(), name, final.FailureMessage(), harness.UpdateServer, resolvedAt.Seconds())
	})

	// Zero touch after the operator gave up: the next run, with its
	// handover wait, finds the Registration Failed for a cause a retry can
	// fix (the name did not resolve), deletes the Secret as the operator
	// asks, writes it afresh and sees the new Registration active. Before
	// it, status says the engine will recover; after it, registered.
	var recovered string
	t.Run("the next run recovers the Failed Registration by itself", func(t *testing.T) {
		require.NotEmpty(t, failed, "needs the Failed Registration of the previous subtest")
		ctx, cancel := context.WithTimeout(context.Background(), jobBound+4*time.Minute)
		defer cancel()
		states := rec.States(failed)
		gaveUp := states[len(states)-1]
		require.True(t, gaveUp.Failed(), "Registration %s: %s", failed, gaveUp)
		before := c.status(t, ctx)
		assert.Regexp(t, `^Not registered yet: rancher/scc-operator's Registration `+failed+` failed: ".*no such host.*" — recovering automatically at the next run \(attempt 1 of 3, cause [^)]+\)`, before.verdict, before.out)
		assert.Equal(t, 1, before.code, before.out)
		secretUID := c.secretUID(t, ctx)

		start := time.Now()
		job := c.runJob(t, ctx, "manual-2", nil)
		cond := controlplane.FinishedCondition(job)
		require.Equal(t, batchv1.JobComplete, cond.Type, "the recovering Job did not complete: %s\n%s", cond.Message, strings.Join(c.jobLog(t, ctx, job.Name), "\n"))
		took := time.Since(start)
		sum := c.summary(t, ctx, job.Name)
		assert.Equal(t, operator.Recovered, sum["recovery"], "the run's summary: %v", sum)
		assert.Equal(t, "active", sum["operator"], "the run's summary: %v", sum)
		assert.Equal(t, failed, sum["replacedRegistration"], "the run replaced the Failed Registration: %v", sum)
		newName, _ := sum["registration"].(string)
		require.NotEmpty(t, newName, "the run's summary names the new Registration: %v", sum)
		active, err := rec.Wait(ctx, newName, sccoperator.Registration.Done)
		require.NoError(t, err)
		assert.True(t, active.Activated, "Registration %s: %s", newName, active)
		_, err = sccoperator.Get(ctx, c.dyn, failed)
		assert.True(t, apierrors.IsNotFound(err), "the Failed Registration is gone: %v", err)
		assert.NotEqual(t, secretUID, c.secretUID(t, ctx), "the Secret was deleted and written afresh")
		ev := c.jobEvent(t, ctx, job.Name)
		assert.Equal(t, kube.ReasonOperatorRecovered, ev.Reason, "%s", ev.Note)
		assert.Equal(t, corev1.EventTypeNormal, ev.Type)
		assert.Contains(t, ev.Note, "had failed registration "+failed)
		describe := c.kubectl(t, ctx, nil, "-n", operator.Namespace, "describe", "job", job.Name)
		assert.Contains(t, string(describe), kube.ReasonOperatorRecovered, "kubectl describe job shows the Event")
		// The overlay's CronJob is suspended (the test makes its Jobs), which
		// status rightly reports once the cluster is registered.
		after := c.status(t, ctx)
		assert.Regexp(t, `^Registered, action needed: the CronJob registration-engine is suspended`, after.verdict, after.out)
		assert.Contains(t, after.out, "rancher/scc-operator: active, Registration "+newName, "status sees the recovered Registration active")
		assert.Equal(t, 2, after.code, after.out)
		recovered = newName
		t.Logf("status before the run (exit %d):\n%s", before.code, before.out)
		t.Logf("kubectl describe job %s:\n%s", job.Name, describe)
		t.Logf("status after the run (exit %d): %s", after.code, after.verdict)
		t.Logf("proved: Registration %s Failed (%q); status said %q; Job %s from the CronJob deleted %s, wrote it afresh and ended Complete in %.0fs with Event %s; rancher/scc-operator %.7s activated Registration %s %.0fs after the failure (activated=%t), the Failed one is gone, status exits %d",
			failed, gaveUp.FailureMessage(), before.verdict, job.Name, operator.SecretName, took.Seconds(), ev.Reason, sccoperator.CommitRMT, newName, active.Seen.Sub(gaveUp.Seen).Seconds(), active.Activated, after.code)
	})

	// The way the Azure Marketplace installs the engine: the Helm chart
	// with the bundle's values and what Azure injects, the extension's
	// managed identity for the ARM token, on a cluster whose last
	// registration is deregistered first.
	t.Run("the Helm chart installed as the Marketplace does registers", func(t *testing.T) {
		require.NotEmpty(t, recovered, "needs the recovered Registration of the previous subtest")
		ctx, cancel := context.WithTimeout(context.Background(), jobBound+5*time.Minute)
		defer cancel()
		c.deregister(t, ctx, rec, recovered)
		c.resetCoreDNS(t, ctx, pristine)
		// kind's CoreDNS is kubeadm's: the Corefile layout's grants. No
		// manual Job: the release's own run meets ARM still refusing the
		// extension's identity, as right after a Marketplace install, and
		// the retry CronJob registers once Azure has caught up.
		job, took := c.installThroughFirstContact(t, ctx, "corefile")
		cond := controlplane.FinishedCondition(job)
		require.Equal(t, batchv1.JobComplete, cond.Type, "the retry CronJob's Job did not complete: %s\n%s", cond.Message, strings.Join(c.jobLog(t, ctx, job.Name), "\n"))
		sum := c.summary(t, ctx, job.Name)
		assert.Equal(t, "registered", sum["outcome"], "the run's summary: %v", sum)
		assert.Equal(t, "active", sum["operator"], "the run's summary: %v", sum)
		token := c.jobLogLine(t, ctx, job.Name, "azure token acquired")
		require.NotNil(t, token, "the run logged its credential")
		assert.Equal(t, "managed-identity", token["credentialMode"], "the Marketplace default: the extension's managed identity")

		name, final, states := c.activeRegistration(t, ctx, rec)
		chartRegistered = name
		announce := c.announce(t, ctx, chartRegCode)
		assert.Equal(t, harness.UpdateServer, announce.ServerName)
		t.Logf("proved: helm install of manifests/chart/registration-engine with the Marketplace bundle's values and Azure's injected ones, no manual Job, ARM refusing the identity at first → the retry CronJob's Job %s (%.0fs from install, credentialMode %v, summary operator=%v) → rancher/scc-operator %.7s registered with the chart's code %s: Registration %s Done, activated=%t, never Failure (%d states)",
			job.Name, took.Seconds(), token["credentialMode"], sum["operator"], sccoperator.CommitRMT, announce.RegCode, name, final.Activated, states)
	})

	// The cluster's DNS as AKS has it: AKS's Corefile in coredns, which
	// AKS's addon manager reconciles (a stand-in reverts any change within
	// seconds), and coredns-custom mounted into the CoreDNS pods, with a
	// customer's own keys. The chart, installed afresh as the Marketplace
	// installs it, must register through coredns-custom alone.
	t.Run("on AKS's CoreDNS layout the chart registers through coredns-custom", func(t *testing.T) {
		require.NotEmpty(t, chartRegistered, "needs the chart's Registration of the previous subtest")
		ctx, cancel := context.WithTimeout(context.Background(), jobBound+8*time.Minute)
		defer cancel()
		c.deregister(t, ctx, rec, chartRegistered)
		c.uninstallChart(t, ctx)
		coreRV := c.aksDNS(t, ctx)
		am := startAddonManager(ctx, c, 10*time.Second)
		if addr, ok := c.resolve(t, ctx, harness.UpdateServer, 1); ok {
			require.Failf(t, "AKS's layout still resolves the name", "%s → %s", harness.UpdateServer, addr)
		}

		installed := time.Now()
		c.installChart(t, ctx, "aks") // the chart's default
		job := c.releaseRun(t, ctx)
		cond := controlplane.FinishedCondition(job)
		require.Equal(t, batchv1.JobComplete, cond.Type, "the chart's Job did not complete: %s\n%s", cond.Message, strings.Join(c.jobLog(t, ctx, job.Name), "\n"))
		name, final, states := c.activeRegistration(t, ctx, rec)
		toActive := time.Since(installed)
		reverted := am.Stop()

		sum := c.summary(t, ctx, job.Name)
		assert.Equal(t, "active", sum["operator"], "the run's summary: %v", sum)
		custom, err := c.cs.CoreV1().ConfigMaps("kube-system").Get(ctx, coredns.CustomConfigMap, metav1.GetOptions{})
		require.NoError(t, err)
		podIP := c.fakecloudPodIP(t, ctx)
		entry := custom.Data[coredns.DefaultHostsKey]
		assert.Contains(t, entry, podIP+" "+harness.UpdateServer, "the engine's entry is in coredns-custom under its own key")
		for k, v := range aksUserKeys {
			assert.Equal(t, v, custom.Data[k], "the customer's key %s is untouched", k)
		}
		assert.Len(t, custom.Data, len(aksUserKeys)+1, "one key added, the engine's: %v", slices.Sorted(maps.Keys(custom.Data)))
		core, err := c.cs.CoreV1().ConfigMaps("kube-system").Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, coreRV, core.ResourceVersion, "nobody wrote the coredns ConfigMap")
		assert.Empty(t, reverted, "the addon manager had nothing to revert")
		// The chart's code registered once before, in the previous case;
		// this install's announce is the second.
		var announces []fakecloud.SCCRequest
		for _, r := range c.sccRequests(t, ctx) {
			if r.Path == "/connect/subscriptions/systems" && r.RegCode == chartRegCode {
				announces = append(announces, r)
			}
		}
		require.Len(t, announces, 2, "the previous chart install's announce and this one's")
		assert.Equal(t, harness.UpdateServer, announces[1].ServerName, "the operator dialled the update server by its name (SNI)")
		assert.Equal(t, http.StatusCreated, announces[1].Status)
		t.Logf("proved: on AKS's CoreDNS layout (AKS's Corefile importing custom/*.override and custom/*.server, coredns-custom mounted optional at /etc/coredns/custom, an addon-manager stand-in reconciling coredns) helm install of the chart with the Marketplace values → Job %s → rancher/scc-operator %.7s: Registration %s Done, activated=%t, never Failure (%d states), %.0fs from install to active; the engine's entry %q only in coredns-custom key %s, coredns at resourceVersion %s unchanged (%d reverts), the customer's keys %v untouched",
			job.Name, sccoperator.CommitRMT, name, final.Activated, states, toActive.Seconds(), strings.TrimSpace(entry), coredns.DefaultHostsKey, core.ResourceVersion, len(reverted), slices.Sorted(maps.Keys(aksUserKeys)))

		// status as an admin without the binary runs it: the command the
		// release's NOTES print, the engine's image under the read-only
		// ServiceAccount registration-engine-status.
		inCluster := c.statusFromNotes(t, ctx)
		local := c.status(t, ctx)
		assert.Equal(t, local.verdict, inCluster, "status in the cluster, under its read-only account, says what status with the admin's credentials says")
		t.Logf("proved: the NOTES' command (kubectl run of the engine's image as registration-engine-status, read-only) printed %q, the verdict status gives with the admin's credentials", inCluster)

		// helm upgrade with a new registration code: a run within seconds,
		// and rancher/scc-operator registers afresh with the new code by
		// itself.
		const newCode = chartRegCode + "-2"
		upgraded := time.Now()
		c.helm(t, ctx, "upgrade", "registration-engine", filepath.Join("..", "..", "manifests", "chart", "registration-engine"),
			"--reuse-values", "--set", "registrationCode="+newCode)
		next := c.nextReleaseRun(t, ctx, job.Name)
		nextCond := controlplane.FinishedCondition(next)
		require.Equal(t, batchv1.JobComplete, nextCond.Type, "the upgrade's run did not complete: %s\n%s", nextCond.Message, strings.Join(c.jobLog(t, ctx, next.Name), "\n"))
		reregistered := time.Since(upgraded)
		nextSum := c.summary(t, ctx, next.Name)
		assert.Equal(t, "registered", nextSum["outcome"], "the run's summary: %v", nextSum)
		assert.Equal(t, "active", nextSum["operator"], "the run's summary: %v", nextSum)
		assert.NotEqual(t, name, nextSum["registration"], "a Registration of its own for the new code")
		announced := c.announce(t, ctx, newCode)
		assert.Equal(t, http.StatusCreated, announced.Status)
		t.Logf("proved: helm upgrade --set registrationCode=<new> started run %s, which wrote the new code; rancher/scc-operator announced it to the update server by itself and Registration %v is active (it replaced %s), %.0fs from the upgrade",
			next.Name, nextSum["registration"], name, reregistered.Seconds())

		// helm uninstall: the cleanup hook takes the engine's key out of
		// coredns-custom; CoreDNS stops answering the name.
		started := time.Now()
		c.uninstallChart(t, ctx)
		uninstalled := time.Since(started)
		custom, err = c.cs.CoreV1().ConfigMaps("kube-system").Get(ctx, coredns.CustomConfigMap, metav1.GetOptions{})
		require.NoError(t, err)
		assert.NotContains(t, custom.Data, coredns.DefaultHostsKey, "the engine's key removed at uninstall")
		for k, v := range aksUserKeys {
			assert.Equal(t, v, custom.Data[k], "the customer's key %s is untouched by the uninstall", k)
		}
		var gone time.Duration
		for deadline := time.Now().Add(4 * time.Minute); ; {
			if _, ok := c.resolve(t, ctx, harness.UpdateServer, 1); !ok {
				gone = time.Since(started)
				break
			}
			require.True(t, time.Now().Before(deadline), "CoreDNS still answers %s 4 minutes after helm uninstall", harness.UpdateServer)
			time.Sleep(5 * time.Second)
		}
		_, err = c.cs.CoordinationV1().Leases(operator.Namespace).Get(ctx, harness.LeaseName, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "the Lease went at uninstall (err %v)", err)
		t.Logf("proved: helm uninstall on AKS's layout finished in %.0fs; its post-delete cleanup hook, on a real kubelet under its own ServiceAccount, removed coredns-custom key %s (the customer's keys %v untouched) and the Lease; CoreDNS stopped answering %s %.0fs after the uninstall started",
			uninstalled.Seconds(), coredns.DefaultHostsKey, slices.Sorted(maps.Keys(aksUserKeys)), harness.UpdateServer, gone.Seconds())
	})

	t.Run("with AKS's IMDS restriction the verdict names hostNetwork, which registers", c.testIMDSRestriction)
	t.Run("workload identity through Azure's own webhook", c.testWorkloadIdentity)
}

// releaseRun waits for the run the chart's release started at install
// (registration-engine-run-<hash>) to complete or fail.
func (c *kindCluster) releaseRun(t *testing.T, ctx context.Context) *batchv1.Job {
	t.Helper()
	var name string
	require.Eventually(t, func() bool {
		jobs, err := c.cs.BatchV1().Jobs(operator.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, j := range jobs.Items {
			if strings.HasPrefix(j.Name, harness.CronJobName+"-run-") && j.DeletionTimestamp == nil {
				name = j.Name
				return true
			}
		}
		return false
	}, time.Minute, time.Second, "helm install started no run Job")
	return controlplane.WaitJobFinishedWithin(ctx, t, c.cs, operator.Namespace, name, jobBound)
}

// nextReleaseRun waits for the run an upgrade started (a run Job other than
// previous) to complete or fail.
func (c *kindCluster) nextReleaseRun(t *testing.T, ctx context.Context, previous string) *batchv1.Job {
	t.Helper()
	var name string
	require.Eventually(t, func() bool {
		jobs, err := c.cs.BatchV1().Jobs(operator.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, j := range jobs.Items {
			if strings.HasPrefix(j.Name, harness.CronJobName+"-run-") && j.Name != previous && j.DeletionTimestamp == nil {
				name = j.Name
				return true
			}
		}
		return false
	}, time.Minute, time.Second, "helm upgrade started no run Job")
	return controlplane.WaitJobFinishedWithin(ctx, t, c.cs, operator.Namespace, name, jobBound)
}

// activeRegistration waits for the operator's Registration of the Secret
// and requires it Done, never having passed through Failure; it returns
// its name, final state and how many states it went through.
func (c *kindCluster) activeRegistration(t *testing.T, ctx context.Context, rec *sccoperator.Recorder) (string, sccoperator.Registration, int) {
	t.Helper()
	name := c.waitRegistration(t, ctx, rec)
	states := rec.States(name)
	final := states[len(states)-1]
	require.True(t, final.Done(), "Registration %s is not active: %s\n%s", name, final, c.operatorLog(t, ctx))
	for _, st := range states {
		assert.False(t, st.Failed(), "the Registration passed through Failure: %s", st)
	}
	return name, final, len(states)
}

// waitRegistration waits for the operator to adopt scc-registration and for
// its Registration to reach Done or Failure, and returns its name.
func (c *kindCluster) waitRegistration(t *testing.T, ctx context.Context, rec *sccoperator.Recorder) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	name, err := sccoperator.WaitForSecret(ctx, c.cs, operator.Namespace, operator.SecretName)
	require.NoError(t, err, "operator log:\n%s", c.operatorLog(t, ctx))
	_, err = rec.Wait(ctx, name, sccoperator.Registration.Terminal)
	require.NoError(t, err, "operator log:\n%s", c.operatorLog(t, ctx))
	return name
}

// summary is the "run finished" line the engine logged last in the Job's
// newest pod.
func (c *kindCluster) summary(t *testing.T, ctx context.Context, job string) map[string]any {
	t.Helper()
	lines := c.jobLog(t, ctx, job)
	var last map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last), "the last log line: %s", lines[len(lines)-1])
	require.Equal(t, "run finished", last["msg"])
	return last
}

// jobLog is the log of the Job's newest pod, a line each.
func (c *kindCluster) jobLog(t *testing.T, ctx context.Context, job string) []string {
	t.Helper()
	pods := c.jobPods(t, ctx, job)
	require.NotEmpty(t, pods)
	newest := slices.MaxFunc(pods, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return strings.Split(strings.TrimSpace(c.logs(t, ctx, newest.Name)), "\n")
}

// jobLogLine is the first line with message msg that the engine logged in
// the Job's newest pod; nil when there is none.
func (c *kindCluster) jobLogLine(t *testing.T, ctx context.Context, job, msg string) map[string]any {
	t.Helper()
	for _, line := range c.jobLog(t, ctx, job) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	return nil
}

// coreDNSReplicas counts the ready CoreDNS pods behind kube-dns.
func (c *kindCluster) coreDNSReplicas(t *testing.T, ctx context.Context) int {
	t.Helper()
	pods, err := c.cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	require.NoError(t, err)
	n := 0
	for _, p := range pods.Items {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// jobEvent is the one events.k8s.io Event the engine recorded on Job job.
func (c *kindCluster) jobEvent(t *testing.T, ctx context.Context, job string) eventsv1.Event {
	t.Helper()
	return controlplane.JobEvent(ctx, t, c.cs, operator.Namespace, job, kube.ReportingController)
}

// announce is the one announce (POST /connect/subscriptions/systems) the
// fake update server received with the overlay's registration code.
func (c *kindCluster) announce(t *testing.T, ctx context.Context, regCode string) fakecloud.SCCRequest {
	t.Helper()
	var found []fakecloud.SCCRequest
	reqs := c.sccRequests(t, ctx)
	for _, r := range reqs {
		if r.Method == http.MethodPost && r.Path == "/connect/subscriptions/systems" && r.RegCode == regCode {
			found = append(found, r)
		}
	}
	require.Len(t, found, 1, "announces with regCode %s among %+v", regCode, reqs)
	return found[0]
}

// ------------------------------------------------------------------ cluster

type kindCluster struct {
	s          settings
	provider   *cluster.Provider
	kubeconfig string
	cfg        *rest.Config
	cs         kubernetes.Interface
	dyn        dynamic.Interface
	// overlayEnv is the overlay's engine settings (what the fake cloud
	// serves), read by the first chart install, before that install
	// replaces the overlay's CronJob.
	overlayEnv map[string]string
}

func createCluster(t *testing.T, s settings) *kindCluster {
	t.Helper()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	c := &kindCluster{
		s:          s,
		provider:   cluster.NewProvider(cluster.ProviderWithDocker(), cluster.ProviderWithLogger(testLogger{t})),
		kubeconfig: filepath.Join(s.artifacts, "kubeconfig"),
	}
	names, err := c.provider.List()
	require.NoError(t, err)
	if slices.Contains(names, s.clusterName) {
		t.Logf("deleting cluster %s left from an earlier run", s.clusterName)
		require.NoError(t, c.provider.Delete(s.clusterName, c.kubeconfig))
	}
	start := time.Now()
	err = c.provider.Create(s.clusterName,
		cluster.CreateWithConfigFile(filepath.Join(repo, "kind-config.yaml")),
		cluster.CreateWithNodeImage(s.nodeImage),
		cluster.CreateWithKubeconfigPath(c.kubeconfig),
		cluster.CreateWithWaitForReady(3*time.Minute),
		cluster.CreateWithDisplayUsage(false),
		cluster.CreateWithDisplaySalutation(false),
	)
	t.Cleanup(func() { c.teardown(t) })
	require.NoError(t, err, "kind create cluster")
	t.Logf("cluster %s up in %.1fs (node image %s)", s.clusterName, time.Since(start).Seconds(), s.nodeImage)

	c.cfg, err = clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	require.NoError(t, err)
	c.cs, err = kubernetes.NewForConfig(c.cfg)
	require.NoError(t, err)
	c.dyn, err = dynamic.NewForConfig(c.cfg)
	require.NoError(t, err)
	version, err := c.cs.Discovery().ServerVersion()
	require.NoError(t, err)
	t.Logf("proved: the kind tier runs on Kubernetes %s (kube-apiserver /version), node image %s", version.GitVersion, s.nodeImage)

	start = time.Now()
	nodes, err := c.provider.ListInternalNodes(s.clusterName)
	require.NoError(t, err)
	loaded := append([]string{s.image, s.fakecloudImage, s.operatorImage}, s.webhookImages...)
	for _, img := range loaded {
		for _, n := range nodes {
			save := exec.Command("docker", "save", img)
			out, err := save.StdoutPipe()
			require.NoError(t, err)
			var stderr bytes.Buffer
			save.Stderr = &stderr
			require.NoError(t, save.Start())
			loadErr := nodeutils.LoadImageArchive(n, out)
			_, _ = io.Copy(io.Discard, out)
			require.NoError(t, save.Wait(), "docker save %s: %s", img, stderr.String())
			require.NoError(t, loadErr, "load %s into %s", img, n.String())
		}
	}
	t.Logf("loaded %s in %.1fs", strings.Join(loaded, ", "), time.Since(start).Seconds())
	return c
}

// teardown collects what explains a failure, then deletes the cluster
// unless E2E_KEEP_CLUSTER=1.
func (c *kindCluster) teardown(t *testing.T) {
	if t.Failed() && c.cs != nil {
		c.collect(t)
	}
	if c.s.keep {
		t.Logf("kept cluster %s: KUBECONFIG=%s kubectl get pods -A; delete it with make e2e-kind-clean or a new run", c.s.clusterName, c.kubeconfig)
		return
	}
	if err := c.provider.Delete(c.s.clusterName, c.kubeconfig); err != nil {
		t.Errorf("delete cluster %s: %v", c.s.clusterName, err)
	}
}

// collect writes every pod's log and the events of the engine's namespace
// and kube-system to the artifacts directory, prints the engine's and the
// fake cloud's logs, and exports kind's node logs next to them.
func (c *kindCluster) collect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(c.s.artifacts, "logs-"+time.Now().Format("20060102-150405"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("collect: %v", err)
		return
	}
	for _, ns := range []string{operator.Namespace, "kube-system"} {
		pods, err := c.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("collect: pods in %s: %v", ns, err)
			continue
		}
		for _, p := range pods.Items {
			for _, ctr := range p.Spec.Containers {
				b, err := c.cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: ctr.Name}).DoRaw(ctx)
				if err != nil {
					b = []byte(err.Error())
				}
				_ = os.WriteFile(filepath.Join(dir, ns+"_"+p.Name+"_"+ctr.Name+".log"), b, 0o644)
				if ns == operator.Namespace {
					t.Logf("--- log of %s/%s (%s):\n%s", p.Name, ctr.Name, p.Status.Phase, b)
				}
			}
		}
		if ev, err := c.cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
			var b strings.Builder
			for _, e := range ev.Items {
				fmt.Fprintf(&b, "%s %s %s/%s %s: %s\n", e.LastTimestamp.Format(time.RFC3339), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
			_ = os.WriteFile(filepath.Join(dir, ns+"_events.txt"), []byte(b.String()), 0o644)
			if ns == operator.Namespace {
				t.Logf("--- events in %s:\n%s", ns, b.String())
			}
		}
	}
	if err := c.provider.CollectLogs(c.s.clusterName, filepath.Join(dir, "kind")); err != nil {
		t.Logf("collect: kind export logs: %v", err)
	}
	t.Logf("logs of the failed run are in %s", dir)
}

// apply renders manifests/overlays/e2e with kubectl kustomize and applies it.
func (c *kindCluster) apply(t *testing.T, ctx context.Context) {
	t.Helper()
	rendered := c.kubectl(t, ctx, nil, "kustomize", filepath.Join("..", "..", "manifests", "overlays", "e2e"))
	c.kubectl(t, ctx, rendered, "apply", "-f", "-")
}

func (c *kindCluster) kubectl(t *testing.T, ctx context.Context, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, c.s.kubectl, append([]string{"--kubeconfig", c.kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), stderr.String())
	return out
}

// waitForSystem waits for kube-proxy and CoreDNS: a pod started before
// kube-proxy wrote its rules sends the API server's Service address out of
// the node (here into a TLS-inspecting proxy, which answers for it).
func (c *kindCluster) waitForSystem(t *testing.T, ctx context.Context) {
	t.Helper()
	start := time.Now()
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		ds, err := c.cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
		if err != nil || ds.Status.DesiredNumberScheduled == 0 || ds.Status.NumberReady < ds.Status.DesiredNumberScheduled {
			return false, nil //nolint:nilerr // not yet: poll again
		}
		d, err := c.cs.AppsV1().Deployments("kube-system").Get(ctx, coredns.Deployment, metav1.GetOptions{})
		if err != nil || d.Status.ReadyReplicas == 0 {
			return false, nil //nolint:nilerr // not yet: poll again
		}
		return true, nil
	})
	require.NoError(t, err, "kube-proxy and CoreDNS did not become ready")
	t.Logf("kube-proxy and CoreDNS ready in %.1fs", time.Since(start).Seconds())
}

func (c *kindCluster) waitForFakecloud(t *testing.T, ctx context.Context) {
	t.Helper()
	start := time.Now()
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := c.cs.AppsV1().Deployments(operator.Namespace).Get(ctx, fakecloudName, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not there yet, or the API server is busy: poll again
		}
		return d.Status.ReadyReplicas >= 1, nil
	})
	require.NoError(t, err, "the fake cloud's pod did not become ready")
	t.Logf("fake cloud ready in %.1fs", time.Since(start).Seconds())
}

// copyTrust copies the certificates the fake cloud made at start into the
// ConfigMaps the CronJob mounts: its CA and attestation root
// (fakecloud-trust) and its region server's pinned certificate
// (region-server-certs), fetched through the API server's Service proxy.
func (c *kindCluster) copyTrust(t *testing.T, ctx context.Context) {
	t.Helper()
	file := func(name string) string { return c.fakecloudFile(t, ctx, name) }
	for name, data := range map[string]map[string]string{
		"fakecloud-trust": {
			"ca.pem":                file("ca.pem"),
			"attestation-roots.pem": file("attestation-roots.pem"),
		},
		"region-server-certs": {fakecloudHost + ".pem": file("certs/" + fakecloudHost + ".pem")},
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: operator.Namespace}, Data: data}
		_, err := c.cs.CoreV1().ConfigMaps(operator.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// fakecloudFile is one of the certificates the fake cloud made at start,
// fetched through the API server's Service proxy.
func (c *kindCluster) fakecloudFile(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	b, err := c.cs.CoreV1().Services(operator.Namespace).ProxyGet("http", fakecloudName, "imds", "/fakecloud/files/"+name, nil).DoRaw(ctx)
	require.NoError(t, err, "fetch %s from the fake cloud", name)
	require.Contains(t, string(b), "BEGIN CERTIFICATE", name)
	return string(b)
}

// runJob makes a Job from the CronJob as `kubectl create job NAME
// --from=cronjob/registration-engine` does (edit, when set, changes its pod
// first: kubectl's object, taken with --dry-run, then created) and waits
// until it completes or fails.
func (c *kindCluster) runJob(t *testing.T, ctx context.Context, name string, edit func(*corev1.PodSpec)) *batchv1.Job {
	t.Helper()
	args := []string{"-n", operator.Namespace, "create", "job", name, "--from=cronjob/" + harness.CronJobName}
	if edit == nil {
		c.kubectl(t, ctx, nil, args...)
	} else {
		var job batchv1.Job
		require.NoError(t, json.Unmarshal(c.kubectl(t, ctx, nil, append(args, "--dry-run=client", "-o", "json")...), &job))
		edit(&job.Spec.Template.Spec)
		_, err := c.cs.BatchV1().Jobs(operator.Namespace).Create(ctx, &job, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	return controlplane.WaitJobFinishedWithin(ctx, t, c.cs, operator.Namespace, name, jobBound)
}

// engineContainer is the engine's container in the CronJob's pod.
func engineContainer(t *testing.T, pod *corev1.PodSpec) *corev1.Container {
	t.Helper()
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == engineName })
	require.GreaterOrEqual(t, i, 0, "the CronJob has no container %s", engineName)
	return &pod.Containers[i]
}

func (c *kindCluster) jobPods(t *testing.T, ctx context.Context, job string) []corev1.Pod {
	t.Helper()
	pods, err := c.cs.CoreV1().Pods(operator.Namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	require.NoError(t, err)
	return pods.Items
}

func podNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name+" ("+string(p.Status.Phase)+")")
	}
	return names
}

func terminated(p corev1.Pod, container string) *corev1.ContainerStateTerminated {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			return s.State.Terminated
		}
	}
	return nil
}

func (c *kindCluster) logs(t *testing.T, ctx context.Context, pod string) string {
	t.Helper()
	b, err := c.cs.CoreV1().Pods(operator.Namespace).GetLogs(pod, &corev1.PodLogOptions{Container: engineName}).DoRaw(ctx)
	require.NoError(t, err)
	return string(b)
}

func (c *kindCluster) fakecloudPod(t *testing.T, ctx context.Context) corev1.Pod {
	t.Helper()
	pods, err := c.cs.CoreV1().Pods(operator.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + fakecloudName})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1)
	return pods.Items[0]
}

func (c *kindCluster) fakecloudPodIP(t *testing.T, ctx context.Context) string {
	t.Helper()
	ip := c.fakecloudPod(t, ctx).Status.PodIP
	require.NotEmpty(t, ip)
	return ip
}

// updateServerCert is what the fake update server publishes at /smt.crt on
// its HTTP port, through the API server's pod proxy.
func (c *kindCluster) updateServerCert(t *testing.T, ctx context.Context) string {
	t.Helper()
	p := c.fakecloudPod(t, ctx)
	port := ""
	for _, cp := range p.Spec.Containers[0].Ports {
		if cp.Name == "update-http" {
			port = strconv.Itoa(int(cp.ContainerPort))
		}
	}
	require.NotEmpty(t, port, "the fake cloud's pod names no update-http port")
	// The pod proxy takes a port number, not a name.
	b, err := c.cs.CoreV1().Pods(operator.Namespace).ProxyGet("http", p.Name, port, "/smt.crt", nil).DoRaw(ctx)
	require.NoError(t, err)
	return string(b)
}

// resolve runs a pod that asks the cluster's DNS for name, up to tries
// times 2 s apart, and returns the first address and true; or its output
// and false when the name never resolved. The image is the node's
// kube-proxy image, the one preloaded image with a libc resolver and a
// shell.
func (c *kindCluster) resolve(t *testing.T, ctx context.Context, name string, tries int) (string, bool) {
	t.Helper()
	ds, err := c.cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	require.NoError(t, err)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "resolve-", Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:            "resolve",
				Image:           ds.Spec.Template.Spec.Containers[0].Image,
				ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", `i=0; while [ $i -lt "$1" ]; do getent hosts "$0" && exit 0; i=$((i+1)); sleep 2; done; echo "$0: no answer"; exit 1`,
					name, strconv.Itoa(tries)},
			}},
		},
	}
	pod, err = c.cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.cs.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // the API server is busy: poll again
		}
		pod = p
		return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed, nil
	})
	require.NoError(t, err, "the resolver pod did not finish")
	b, err := c.cs.CoreV1().Pods("default").GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	require.NoError(t, err)
	if pod.Status.Phase != corev1.PodSucceeded {
		return string(b), false
	}
	fields := strings.Fields(string(b))
	require.NotEmpty(t, fields)
	return fields[0], true
}

// testLogger sends kind's progress to the test log.
type testLogger struct{ t *testing.T }

func (l testLogger) Warn(m string)                        { l.t.Log("kind: " + m) }
func (l testLogger) Warnf(f string, a ...any)             { l.t.Logf("kind: "+f, a...) }
func (l testLogger) Error(m string)                       { l.t.Log("kind: " + m) }
func (l testLogger) Errorf(f string, a ...any)            { l.t.Logf("kind: "+f, a...) }
func (l testLogger) V(v kindlog.Level) kindlog.InfoLogger { return infoLogger{l.t, v <= 0} }

type infoLogger struct {
	t  *testing.T
	on bool
}

func (l infoLogger) Info(m string) {
	if l.on {
		l.t.Log("kind: " + m)
	}
}

func (l infoLogger) Infof(f string, a ...any) {
	if l.on {
		l.t.Logf("kind: "+f, a...)
	}
}

func (l infoLogger) Enabled() bool { return l.on }
