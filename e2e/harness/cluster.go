package harness

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/sccoperator"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
)

// What manifests/overlays/e2e and the fake cloud fix.
const (
	EngineSA       = "registration-engine"
	LeaseName      = "registration-engine"
	CronJobName    = "registration-engine"
	UpdateServer   = "smt-azure.susecloud.net"
	OverlayRegCode = "E2E-REGISTRATION-CODE" // the CronJob's REGISTRATION_CODE
	DirectRegCode  = "E2E-DIRECT-CODE"       // what RunEnv passes
	// Deadline bounds one case on the control plane (Context).
	Deadline = 2 * time.Minute
)

// CorednsFixture is what kubeadm and kind put into kube-system: the coredns
// ConfigMap with a Corefile that reloads itself, and the coredns Deployment
// (no controller runs it; the tests read its generation and template).
var CorednsFixture = corednsObjects(fakecloud.KubeadmCorefile)

// AKSCorednsFixture is AKS's kube-system: its Corefile, which imports
// coredns-custom's keys (create coredns-custom beside it), and the same
// Deployment.
var AKSCorednsFixture = corednsObjects(fakecloud.AKSCorefile)

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

// Cluster is the shared control plane with manifests/overlays/e2e and
// CorednsFixture applied, and the cluster's DNS running.
type Cluster struct {
	Plane *controlplane.Plane
	Admin kubernetes.Interface
	// Overlay is the rendered overlay, for copies of its objects.
	Overlay []byte
	// Corefile is the Corefile of CorednsFixture, as the API server
	// stores it.
	Corefile string
	// Admission, when set, changes a pod's environment before the process
	// kubelet runs it, as a mutating webhook would have.
	Admission func(ctx context.Context, pod *corev1.Pod, env []string) ([]string, error)
	// DNS is the cluster's DNS, a real CoreDNS serving kube-system's
	// CoreDNS ConfigMaps: the engine's handover wait asks it as it would
	// in a pod (HANDOVER_DNS_SERVER).
	DNS *sccoperator.ClusterDNS
	// Settle is the HANDOVER_SETTLE of every run RunEnv builds and every
	// pod StartKubelet runs (a pod's own HANDOVER_SETTLE, and RunEnv's
	// extra, win). SetupCluster sets ProcessSettle; a case that proves the
	// handover's production timing sets handover.DefaultSettle on its own
	// copy before it starts its kubelet.
	Settle time.Duration
}

// ProcessSettle is the handover's settling in the process tier. The
// settling guards against CoreDNS replicas that reload a change at
// different moments; this tier's cluster DNS is one CoreDNS that serves a
// change to every client at once (sccoperator.ClusterDNS), so the engine's
// 20 s default (handover.DefaultSettle) would only add itself to every run
// that writes the Secret: about 20 runs per make test, and as many again in
// the recovery timelines. One check interval (2 s) still makes the wait pass
// twice before the handover. e2e TestOperator's "the operator registers from
// the Job's Secret" keeps the default, and the kind tier runs it with real
// replicas.
const ProcessSettle = 2 * time.Second

// SetupCluster applies manifests/overlays/e2e and CorednsFixture to the
// shared plane and starts the cluster's DNS for this test.
func SetupCluster(t *testing.T) *Cluster {
	p := controlplane.Shared(t)
	start := time.Now()
	overlay := p.Kustomize(t, filepath.Join(root(t), "manifests", "overlays", "e2e"))
	p.Apply(t, overlay)
	p.Apply(t, []byte(CorednsFixture))
	e := &Cluster{Plane: p, Admin: p.AdminClient(t), Overlay: overlay, Settle: ProcessSettle}
	e.DNS = sccoperator.StartClusterDNS(t, e.Admin, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cm, err := e.Admin.CoreV1().ConfigMaps("kube-system").Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	e.Corefile = cm.Data[coredns.CorefileKey]
	t.Logf("applied manifests/overlays/e2e and the CoreDNS fixture in %.1fs", time.Since(start).Seconds())
	return e
}

// Context ends with the test or after Deadline.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Deadline)
	t.Cleanup(cancel)
	return ctx
}

// ---- running the engine ----------------------------------------------

// Token mints a TokenRequest token for the engine's ServiceAccount.
func (e *Cluster) Token(t testing.TB) string {
	return e.Plane.ServiceAccountToken(t, operator.Namespace, EngineSA)
}

// RunEnv is the environment of a run the test starts itself: the fake
// cloud's, plus what a pod of the engine's ServiceAccount would have (the API
// server's address, its token in a file, its CA), the Lease holder, and no
// CoreDNS step unless extra turns it on. Later entries win.
func (e *Cluster) RunEnv(t testing.TB, c Cloud, token, podName string, extra ...string) []string {
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token), 0o600))
	env := append(slices.Clone(c.Env),
		"REGISTRATION_CODE="+DirectRegCode,
		"KUBERNETES_SERVICE_HOST="+e.Plane.Host,
		"KUBERNETES_SERVICE_PORT="+e.Plane.Port,
		"KUBERNETES_TOKEN="+tokenFile,
		"KUBERNETES_CA_CERT="+e.Plane.CAFile,
		"POD_NAME="+podName,
		"IN_CLUSTER_DNS=false",
		// A process has no cluster DNS: the handover wait asks e.DNS.
		"HANDOVER_DNS_SERVER="+e.DNS.Addr,
	)
	if e.Settle > 0 {
		env = append(env, "HANDOVER_SETTLE="+e.Settle.String())
	}
	return append(env, extra...)
}

// RunAs runs the engine with RunEnv.
func (e *Cluster) RunAs(ctx context.Context, t testing.TB, c Cloud, token, podName string, extra ...string) Result {
	t.Helper()
	return RunEngine(t, ctx, e.RunEnv(t, c, token, podName, extra...))
}

// ---- the objects the cases share -------------------------------------

// Secret is the engine's Secret; the test fails if there is none.
func (e *Cluster) Secret(ctx context.Context, t testing.TB) *corev1.Secret {
	t.Helper()
	s, err := e.Admin.CoreV1().Secrets(operator.Namespace).Get(ctx, operator.SecretName, metav1.GetOptions{})
	require.NoError(t, err)
	return s
}

// SecretVersion is the Secret's resourceVersion, "" when there is none.
func (e *Cluster) SecretVersion(ctx context.Context, t testing.TB) string {
	t.Helper()
	s, err := e.Admin.CoreV1().Secrets(operator.Namespace).Get(ctx, operator.SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	require.NoError(t, err)
	return s.ResourceVersion
}

// DeleteSecret deletes the engine's Secret, if there is one, and forgets
// the last run's record (ForgetLastRun): a case starts as a fresh install.
func (e *Cluster) DeleteSecret(ctx context.Context, t testing.TB) {
	t.Helper()
	err := e.Admin.CoreV1().Secrets(operator.Namespace).Delete(ctx, operator.SecretName, metav1.DeleteOptions{})
	require.True(t, err == nil || apierrors.IsNotFound(err), "delete secret: %v", err)
	e.ForgetLastRun(ctx, t)
}

// ForgetLastRun removes the last run's record from the engine's Lease, if
// there is one. A run after one that ended with the Secret in place takes
// a Secret gone since for someone's deletion and does not recreate it
// (operator.ErrSecretDeleted); a case that deletes the Secret to start
// afresh forgets the record with it.
func (e *Cluster) ForgetLastRun(ctx context.Context, t testing.TB) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, kube.AnnotationLastRun)
	_, err := e.Admin.CoordinationV1().Leases(operator.Namespace).Patch(ctx, LeaseName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.True(t, err == nil || apierrors.IsNotFound(err), "forget the last run: %v", err)
}

// DeleteLease deletes the engine's Lease, if there is one.
func (e *Cluster) DeleteLease(t testing.TB) {
	t.Helper()
	err := e.Admin.CoordinationV1().Leases(operator.Namespace).Delete(context.Background(), LeaseName, metav1.DeleteOptions{})
	require.True(t, err == nil || apierrors.IsNotFound(err), "delete lease: %v", err)
}

// PutLease replaces the engine's Lease with one a run that died left:
// held by holder, acquired and last renewed at renewed, for
// durationSeconds.
func (e *Cluster) PutLease(ctx context.Context, t testing.TB, holder string, renewed time.Time, durationSeconds int32) {
	t.Helper()
	e.DeleteLease(t)
	at := metav1.NewMicroTime(renewed)
	_, err := e.Admin.CoordinationV1().Leases(operator.Namespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LeaseName},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(durationSeconds),
			AcquireTime: &at, RenewTime: &at,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// Namespace creates a namespace named generateName plus a suffix, deleted
// when the test ends, and returns its name.
func (e *Cluster) Namespace(ctx context.Context, t testing.TB, generateName string) string {
	t.Helper()
	ns, err := e.Admin.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: generateName}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = e.Admin.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// DeleteJob deletes a Job and, in the background, its pods.
func (e *Cluster) DeleteJob(t testing.TB, ns, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := e.Admin.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	assert.True(t, err == nil || apierrors.IsNotFound(err), "delete job %s: %v", name, err)
}

// ResetCoreDNS puts kube-system back to CorednsFixture: no coredns-custom,
// the original Corefile.
func (e *Cluster) ResetCoreDNS(ctx context.Context, t testing.TB) {
	t.Helper()
	cms := e.Admin.CoreV1().ConfigMaps("kube-system")
	err := cms.Delete(ctx, coredns.CustomConfigMap, metav1.DeleteOptions{})
	require.True(t, err == nil || apierrors.IsNotFound(err), "delete coredns-custom: %v", err)
	cm, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	if cm.Data[coredns.CorefileKey] != e.Corefile {
		cm.Data[coredns.CorefileKey] = e.Corefile
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

// UseAKSLayout puts kube-system into AKS's layout, from CorednsFixture: AKS's
// Corefile, which imports coredns-custom's keys, and coredns-custom with a
// key of the cluster's own (log.override). ResetCoreDNS undoes it when the
// test ends.
func (e *Cluster) UseAKSLayout(ctx context.Context, t testing.TB) {
	t.Helper()
	e.ResetCoreDNS(ctx, t)
	t.Cleanup(func() { e.ResetCoreDNS(context.Background(), t) })
	cms := e.Admin.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data[coredns.CorefileKey] = fakecloud.AKSCorefile
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: coredns.CustomConfigMap},
		Data:       map[string]string{"log.override": "log\n"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// OverlayObjects are the cattle-scc-system objects of the rendered overlay
// that a copy of the CronJob needs.
type OverlayObjects struct {
	SA          *corev1.ServiceAccount
	Role        *rbacv1.Role
	RoleBinding *rbacv1.RoleBinding
	CronJob     *batchv1.CronJob
}

// OverlayObjects decodes them from the rendered overlay, strictly.
func (e *Cluster) OverlayObjects(t testing.TB) OverlayObjects {
	t.Helper()
	var o OverlayObjects
	for _, doc := range strings.Split(string(e.Overlay), "\n---\n") {
		var meta struct {
			metav1.TypeMeta   `json:",inline"`
			metav1.ObjectMeta `json:"metadata"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &meta))
		if meta.Namespace != operator.Namespace {
			continue
		}
		var dst any
		switch meta.Kind {
		case "ServiceAccount":
			o.SA = &corev1.ServiceAccount{}
			dst = o.SA
		case "Role":
			o.Role = &rbacv1.Role{}
			dst = o.Role
		case "RoleBinding":
			o.RoleBinding = &rbacv1.RoleBinding{}
			dst = o.RoleBinding
		case "CronJob":
			o.CronJob = &batchv1.CronJob{}
			dst = o.CronJob
		default:
			continue
		}
		require.NoError(t, yaml.UnmarshalStrict([]byte(doc), dst), meta.Kind)
	}
	require.NotNil(t, o.SA)
	require.NotNil(t, o.Role)
	require.NotNil(t, o.RoleBinding)
	require.NotNil(t, o.CronJob)
	require.Len(t, o.CronJob.Spec.JobTemplate.Spec.Template.Spec.Containers, 1)
	return o
}

// CountWrites counts the changes w reports up to and including the one that
// produced resourceVersion final.
func CountWrites(ctx context.Context, t testing.TB, w watch.Interface, final string) int {
	t.Helper()
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

// AssertRegistration checks the five keys of the operator's contract.
func AssertRegistration(t testing.TB, s *corev1.Secret, regCode string) {
	t.Helper()
	assert.Equal(t, "https://"+UpdateServer, string(s.Data[operator.KeyRegistrationURL]))
	assert.Equal(t, operator.RegistrationTypeOnline, string(s.Data[operator.KeyRegistrationType]))
	assert.Equal(t, regCode, string(s.Data[operator.KeyRegCode]))
	doc := string(s.Data[operator.KeyInstanceData])
	assert.True(t, strings.HasPrefix(doc, "<document>") && strings.HasSuffix(doc, "</document>"), "instanceData is the <document> of the attested data: %.60q", doc)
	block, _ := pem.Decode(s.Data[operator.KeyRegistrationURLCert])
	require.NotNil(t, block, "registrationUrlCert is PEM")
	assert.Equal(t, "CERTIFICATE", block.Type)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	assert.NoError(t, cert.VerifyHostname(UpdateServer), "the operator connects to the name in registrationUrl with this certificate")
}
