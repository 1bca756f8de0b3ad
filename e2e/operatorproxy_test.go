package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/e2e/sccoperator"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/operator"
)

// TestOperatorBehindAProxy: rancher/scc-operator inherits Rancher's
// HTTPS_PROXY (rancher/rancher #55445). Its Deployment, read by the engine
// as a real cluster holds it, sends the operator's request to the update
// server through an egress proxy, which resolves the name itself and never
// sees the engine's CoreDNS entry. Without the update server's domain in
// NO_PROXY the Job stops with the fix (exit 2, failed through its
// podFailurePolicy, an Event naming the variable and the Deployment),
// writing nothing: no Secret, no CoreDNS edit, no Registration. With the
// domain in NO_PROXY the next Job registers, and the real operator takes
// the Registration to active. (The process tier has no pod network: the
// operator process itself always reaches the update server through the
// harness's proxy, which resolves through the cluster's CoreDNS as a pod's
// direct request would; the Deployment is what the engine judges.)
func TestOperatorBehindAProxy(t *testing.T) {
	o := setupOperator(t)
	ctx := harness.Context(t)
	o.ResetCoreDNS(ctx, t)
	o.DNS.Forget()
	sccoperator.Forget(t, o.Plane)
	o.forceDeleteSecret(ctx, t)
	o.resetUpdateServers()

	deployments := o.Admin.AppsV1().Deployments(sccoperator.Namespace)
	const corporateProxy = "http://proxy.corp.example:3128"
	noProxy := "127.0.0.1,localhost,.svc,.cluster.local"
	labels := map[string]string{"app": "rancher-scc-operator"}
	_, err := deployments.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "rancher-scc-operator"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0), // the operator runs as a process here
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "rancher-scc-operator", Image: "rancher/scc-operator:v0.0.0",
					Env: []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: corporateProxy}, {Name: "NO_PROXY", Value: noProxy}},
				}}},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		err := deployments.Delete(context.Background(), "rancher-scc-operator", metav1.DeleteOptions{})
		assert.True(t, err == nil || apierrors.IsNotFound(err), "delete the operator's Deployment: %v", err)
	})

	sccoperator.Run(t, o.Plane, sccoperator.Options{Binary: sccoperator.Binary(t, sccoperator.CommitRMT), ProxyURL: o.proxy.URL})
	runs := o.StartKubelet(ctx, t, operator.Namespace, o.c)

	// HTTPS_PROXY without the update server's domain in NO_PROXY.
	pr, done := o.runJob(ctx, t, runs, "operator-proxied")
	require.Equal(t, batchv1.JobFailed, controlplane.FinishedCondition(done).Type, pr.Res.String())
	failedReason := controlplane.FinishedCondition(done).Reason
	assert.Equal(t, "PodFailurePolicy", failedReason, "failed at once, not retried")
	assert.Equal(t, job.ExitPermanent, pr.Res.Code)
	sum := summary(t, pr.Res.Stderr)
	assert.Equal(t, "write-secret", sum["failedPhase"], pr.Res.Stderr)
	ev := o.jobEvent(ctx, t, "operator-proxied")
	assert.Equal(t, "Warning", ev.Type)
	for _, want := range []string{"NO_PROXY", "rancher-scc-operator", harness.UpdateServer} {
		assert.Contains(t, ev.Note, want, "the Event names the variable, the Deployment and the name")
	}
	_, err = o.Admin.CoreV1().Secrets(operator.Namespace).Get(ctx, operator.SecretName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no Secret bound to fail (err %v)", err)
	core, err := o.Admin.CoreV1().ConfigMaps("kube-system").Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, o.Corefile, core.Data[coredns.CorefileKey], "no CoreDNS edit")
	dyn, err := dynamic.NewForConfig(o.Plane.Admin)
	require.NoError(t, err)
	regs, err := dyn.Resource(sccoperator.RegistrationResource).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, regs.Items, "the operator registered nothing")

	// status says the same to the person who looks.
	st := harness.RunEngine(t, ctx, []string{"KUBECONFIG=" + o.Plane.AdminKubeconfig, "HOME=" + t.TempDir(),
		"ATTESTATION_ROOTS_FILE=" + o.c.Vars()["ATTESTATION_ROOTS_FILE"]}, "status")
	verdict, _, _ := strings.Cut(st.Stdout, "\n")
	assert.Equal(t, job.ExitPermanent, st.Code, st.String())
	assert.True(t, strings.HasPrefix(verdict, "Not registered: the last run, operator-proxied, failed"), verdict)
	assert.Contains(t, verdict, "NO_PROXY")

	// The platform engineer's fix: the update server's domain in NO_PROXY.
	d, err := deployments.Get(ctx, "rancher-scc-operator", metav1.GetOptions{})
	require.NoError(t, err)
	d.Spec.Template.Spec.Containers[0].Env[1].Value = noProxy + ",.susecloud.net"
	_, err = deployments.Update(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
	pr, done = o.runJob(ctx, t, runs, "operator-exempt")
	require.Equal(t, batchv1.JobComplete, controlplane.FinishedCondition(done).Type, pr.Res.String())
	sum = summary(t, pr.Res.Stderr)
	assert.Equal(t, job.OutcomeRegistered, sum["outcome"])
	assert.Equal(t, operator.StateActive, sum["operator"], pr.Res.Stderr)
	t.Logf("proved: with rancher/scc-operator's Deployment on HTTPS_PROXY %s and NO_PROXY %q the Job failed at once (exit %d, %s) with Event %q and status %q, writing no Secret, no CoreDNS entry and leaving the operator nothing to register; with .susecloud.net added to NO_PROXY the next Job registered and the real operator's Registration %v is active",
		corporateProxy, noProxy, job.ExitPermanent, failedReason, ev.Note, verdict, sum["registration"])
}
