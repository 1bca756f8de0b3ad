//go:build e2e

package kind

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/sccoperator"
	engine "github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/operator"
)

// operatorName is the operator's Deployment and container.
const operatorName = "rancher-scc-operator"

// operatorDeployment runs rancher/scc-operator as Rancher would: one
// replica in cattle-scc-system as ServiceAccount rancher-scc-operator (whose
// ClusterRole sccoperator.RancherObjects grants), with in-cluster
// credentials, the image's system roots (Debian's bundle) and nothing else
// to trust: the update server's certificate reaches it only through the
// Secret's registrationUrlCert. Its /healthz answers 500, so there is no
// probe; installOperator waits for its Lease and CRD instead.
func operatorDeployment(image string) *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": operatorName}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: operatorName, Namespace: sccoperator.Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: sccoperator.ServiceAccount,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To(int64(65532)),
						RunAsGroup:     ptr.To(int64(65532)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:  operatorName,
						Image: image,
						// Loaded into the node by the e2e; there is no registry to ask.
						ImagePullPolicy: corev1.PullNever,
						Args: []string{
							"--operator-namespace=" + sccoperator.Namespace,
							"--lease-namespace=" + sccoperator.LeaseNamespace,
						},
						Env: []corev1.EnvVar{{Name: "HOME", Value: "/tmp"}},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
					}},
					Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
}

// installOperator puts into the cluster what Rancher would (the stand-in
// CRDs, Settings and metrics Secret of e2e/sccoperator, the operator's
// ServiceAccount and least RBAC), starts the operator's Deployment and
// waits until it leads and serves Registrations.
func (c *kindCluster) installOperator(t *testing.T, ctx context.Context) {
	t.Helper()
	c.kubectl(t, ctx, []byte(sccoperator.RancherCRDs), "apply", "-f", "-")
	c.kubectl(t, ctx, nil, append([]string{"wait", "--for=condition=Established", "--timeout=60s"}, sccoperator.RancherCRDNames...)...)
	c.kubectl(t, ctx, []byte(sccoperator.RancherObjects), "apply", "-f", "-")
	_, err := c.cs.AppsV1().Deployments(sccoperator.Namespace).Create(ctx, operatorDeployment(c.s.operatorImage), metav1.CreateOptions{})
	require.NoError(t, err)

	dyn, err := dynamic.NewForConfig(c.cfg)
	require.NoError(t, err)
	start := time.Now()
	state := ""
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if p := c.operatorPod(t, ctx); p != nil {
			for _, s := range p.Status.ContainerStatuses {
				if s.RestartCount > 0 {
					return false, fmt.Errorf("pod %s restarted %d times: the operator exits", p.Name, s.RestartCount)
				}
			}
		}
		ok, st, err := sccoperator.Serving(ctx, c.cs, dyn)
		if err != nil {
			st = err.Error() // the API server is busy: poll again
		}
		state = st
		return ok, nil
	})
	require.NoError(t, err, "rancher/scc-operator did not start (%s):\n%s", state, c.operatorLog(t, ctx))
	t.Logf("rancher/scc-operator (%s) leads and serves registrations after %.1fs", c.s.operatorImage, time.Since(start).Seconds())
}

func (c *kindCluster) operatorPod(t *testing.T, ctx context.Context) *corev1.Pod {
	t.Helper()
	pods, err := c.cs.CoreV1().Pods(sccoperator.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + operatorName})
	if err != nil || len(pods.Items) == 0 {
		return nil
	}
	return &pods.Items[0]
}

// operatorLog is the operator container's log ("" when there is none yet).
func (c *kindCluster) operatorLog(t *testing.T, ctx context.Context) string {
	t.Helper()
	p := c.operatorPod(t, ctx)
	if p == nil {
		return "(no operator pod)"
	}
	b, err := c.cs.CoreV1().Pods(sccoperator.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: operatorName}).DoRaw(ctx)
	if err != nil {
		return "(log: " + err.Error() + ")"
	}
	return string(b)
}

// sccRequests are the SCC API requests the fake update server received, in
// order (its GET /fakecloud/scc-requests, through the API server's Service
// proxy).
func (c *kindCluster) sccRequests(t *testing.T, ctx context.Context) []fakecloud.SCCRequest {
	t.Helper()
	b, err := c.cs.CoreV1().Services(operator.Namespace).ProxyGet("http", fakecloudName, "imds", "/fakecloud/scc-requests", nil).DoRaw(ctx)
	require.NoError(t, err)
	var reqs []fakecloud.SCCRequest
	require.NoError(t, json.Unmarshal(b, &reqs), "%s", b)
	return reqs
}

// corefile is CoreDNS's Corefile as it is now.
func (c *kindCluster) corefile(t *testing.T, ctx context.Context) string {
	t.Helper()
	cm, err := c.cs.CoreV1().ConfigMaps("kube-system").Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	return cm.Data[coredns.CorefileKey]
}

// resetCoreDNS puts corefile back into CoreDNS's ConfigMap and restarts
// CoreDNS, as kubectl rollout restart does, so the running servers have
// loaded it (instead of waiting out the kubelet's sync and the reload
// plugin), and waits until only new pods serve.
func (c *kindCluster) resetCoreDNS(t *testing.T, ctx context.Context, corefile string) {
	t.Helper()
	cms := c.cs.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data[coredns.CorefileKey] = corefile
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	patch := `{"spec":{"template":{"metadata":{"annotations":{"` + "kubectl.kubernetes.io/restartedAt" + `":"` + time.Now().UTC().Format(time.RFC3339Nano) + `"}}}}}`
	deps := c.cs.AppsV1().Deployments("kube-system")
	d, err := deps.Patch(ctx, coredns.Deployment, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	gen := d.Generation
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := deps.Get(ctx, coredns.Deployment, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // the API server is busy: poll again
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		return d.Status.ObservedGeneration >= gen && d.Status.UpdatedReplicas == want &&
			d.Status.ReadyReplicas == want && d.Status.Replicas == want, nil
	})
	require.NoError(t, err, "CoreDNS did not restart")
}

// deregister deletes scc-registration, which the operator answers by
// deregistering the cluster and deleting its Registration, and waits until
// both are gone: the recovery the operator requires after a Failure.
func (c *kindCluster) deregister(t *testing.T, ctx context.Context, rec *sccoperator.Recorder, registration string) {
	t.Helper()
	secrets := c.cs.CoreV1().Secrets(operator.Namespace)
	err := secrets.Delete(ctx, operator.SecretName, metav1.DeleteOptions{})
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := secrets.Get(ctx, operator.SecretName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "the operator did not release %s:\n%s", operator.SecretName, c.operatorLog(t, ctx))
	_, err = rec.Wait(ctx, registration, func(r sccoperator.Registration) bool { return r.Deleted })
	require.NoError(t, err, "the operator did not delete its Registration")
}

// secretUID is scc-registration's UID: a new one means it was deleted and
// written afresh.
func (c *kindCluster) secretUID(t *testing.T, ctx context.Context) types.UID {
	t.Helper()
	sec, err := c.cs.CoreV1().Secrets(operator.Namespace).Get(ctx, operator.SecretName, metav1.GetOptions{})
	require.NoError(t, err)
	return sec.UID
}

// statusRun is one `registration-engine status`: its exit code, its whole
// output and the verdict line it opens with.
type statusRun struct {
	code         int
	out, verdict string
}

// status runs `registration-engine status` as a cluster admin on a
// workstation does, in this process: with the kind cluster's kubeconfig
// (--kubeconfig, which the process's own KUBECONFIG cannot override), and the fake
// cloud's attestation trust (fetched through the API server's Service
// proxy) in place of Azure's.
func (c *kindCluster) status(t *testing.T, ctx context.Context) statusRun {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"attestation-roots.pem", "attestation-intermediate.pem"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(c.fakecloudFile(t, ctx, name)), 0o600))
	}
	var stdout, stderr bytes.Buffer
	err := engine.RunStatus(ctx, []string{"--kubeconfig", c.kubeconfig,
		"--attestation-roots", filepath.Join(dir, "attestation-roots.pem"),
		"--intermediates", filepath.Join(dir, "attestation-intermediate.pem")},
		func(string) string { return "" }, &stdout, &stderr)
	out := stdout.String() + stderr.String()
	verdict, _, _ := strings.Cut(stdout.String(), "\n")
	return statusRun{code: engine.ExitCode(err), out: out, verdict: verdict}
}
