package sccoperator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/rancher/registration-engine/e2e/controlplane"
)

// What Install puts into the plane in Rancher's place.
const (
	// Namespace is the operator's namespace, where it reads SecretName.
	Namespace = "cattle-scc-system"
	// SecretName is the Secret the operator registers from (the engine
	// writes it).
	SecretName = "scc-registration"
	// ServiceAccount is the operator's identity; ClusterRole and
	// ClusterRoleBinding carry the same name.
	ServiceAccount = "rancher-scc-operator"
	// ServerURL is the Setting server-url: the hostname the operator
	// announces the cluster with.
	ServerURL = "https://rancher.example.test"
	// InstallUUID is the Setting install-uuid and the metrics payload's
	// installuuid.
	InstallUUID = "6f1c2f4e-7d0a-4a8e-9b6f-3c2d1e0f4a5b"
	// RancherVersion is the version the metrics payload reports; the
	// operator activates product rancher/<RancherVersion>.
	RancherVersion = "2.12.3"
	// LeaseNamespace and LeaseName are the operator's leader Lease.
	LeaseNamespace = "kube-system"
	LeaseName      = "scc-controllers"
)

// RancherCRDs are the CRDs of the Rancher objects the operator reads,
// stand-ins that keep every field (StandInCRD): the operator exits at
// start without secretrequests, and waits without settings. Apply them,
// and wait for RancherCRDNames to be established, before RancherObjects.
// The kind tier applies the same two documents to its cluster.
var RancherCRDs = StandInCRD("telemetry.cattle.io", "v1", "SecretRequest", true) + "---\n" +
	StandInCRD("management.cattle.io", "v3", "Setting", false)

// RancherCRDNames names the CRDs of RancherCRDs as kubectl wait takes them.
var RancherCRDNames = []string{"crd/secretrequests.telemetry.cattle.io", "crd/settings.management.cattle.io"}

// StandInCRD is the YAML of a cluster-scoped CRD for kind in group at
// version (plural: kind in lower case with an s), with a schema that keeps
// every field and, when status is set, a status subresource: enough for a
// test to create, read and authorize the real objects of a component it
// does not install.
func StandInCRD(group, version, kind string, status bool) string {
	singular := strings.ToLower(kind)
	subresources := ""
	if status {
		subresources = "\n      subresources: {status: {}}"
	}
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[3]ss.%[1]s}
spec:
  group: %[1]s
  scope: Cluster
  names: {kind: %[4]s, listKind: %[4]sList, plural: %[3]ss, singular: %[3]s}
  versions:
    - name: %[2]s
      served: true
      storage: true%[5]s
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, group, version, singular, kind, subresources)
}

// RancherObjects are the Settings and the metrics Secret Rancher would
// keep, and the operator's ServiceAccount with the least RBAC it runs with,
// whether it runs as a process (Run) or as a pod (the kind tier).
var RancherObjects = fmt.Sprintf(`
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: management.cattle.io/v3
kind: Setting
metadata: {name: server-url}
value: %[2]s
---
apiVersion: management.cattle.io/v3
kind: Setting
metadata: {name: install-uuid}
value: %[3]s
---
apiVersion: v1
kind: Secret
metadata: {name: rancher-scc-metrics, namespace: %[1]s}
type: Opaque
stringData:
  payload: '{"version":"v%[4]s","subscription":{"installuuid":"%[3]s","product":"rancher","version":"%[4]s","arch":"unknown","git":"v%[4]s"}}'
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: %[5]s, namespace: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %[5]s}
rules:
  # Its informer watches every Secret; it adopts scc-registration, keeps
  # system credentials and its hash/salt Secrets.
  - apiGroups: [""]
    resources: [secrets]
    verbs: [get, list, watch, create, update, patch, delete]
  # kube-system's UID is the cluster's identity.
  - apiGroups: [""]
    resources: [namespaces]
    verbs: [get]
  # scc-operator-config is optional; a 404 is fine.
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get]
  # It installs the Registration CRD itself.
  - apiGroups: [apiextensions.k8s.io]
    resources: [customresourcedefinitions]
    verbs: [get, list, watch, create, update]
  - apiGroups: [scc.cattle.io]
    resources: [registrations, registrations/status]
    verbs: [get, list, watch, create, update, patch, delete]
  - apiGroups: [management.cattle.io]
    resources: [settings]
    verbs: [get]
  - apiGroups: [telemetry.cattle.io]
    resources: [secretrequests]
    verbs: [get, create]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [get, create, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[5]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[5]s}
subjects:
  - {kind: ServiceAccount, name: %[5]s, namespace: %[1]s}
`, Namespace, ServerURL, InstallUUID, RancherVersion, ServiceAccount)

// Install puts into the plane what Rancher would provide to the operator
// (the CRDs secretrequests.telemetry.cattle.io and
// settings.management.cattle.io, the Settings server-url and install-uuid,
// the Secret cattle-scc-system/rancher-scc-metrics with its payload, the
// namespace) and the operator's ServiceAccount, ClusterRole and
// ClusterRoleBinding. It is idempotent (server-side apply), so every test
// may call it on a shared plane.
func Install(t testing.TB, p *controlplane.Plane) {
	t.Helper()
	p.Apply(t, []byte(RancherCRDs))
	p.Kubectl(t, append([]string{"wait", "--for=condition=Established", "--timeout=60s"}, RancherCRDNames...)...)
	p.Apply(t, []byte(RancherObjects))
}

// clearLease deletes the operator's leader Lease when it is held, so an
// operator that died without releasing it (a crash, SIGKILL) does not make
// the next one wait out its duration. Only one operator runs at a time.
func clearLease(ctx context.Context, p *controlplane.Plane, t testing.TB) error {
	leases := p.AdminClient(t).CoordinationV1().Leases(LeaseNamespace)
	l, err := leases.Get(ctx, LeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lease %s/%s: %w", LeaseNamespace, LeaseName, err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return nil
	}
	err = leases.Delete(ctx, LeaseName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("lease %s/%s: %w", LeaseNamespace, LeaseName, err)
	}
	return nil
}

// Forget brings the plane back to a cluster the operator never saw: the
// Secret scc-registration and every Registration are deleted, their
// finalizers removed first. Call it with no operator running (between
// cases, or at the end): deregistration on delete, which the finalizers
// wait for, is racy in the operator and needs it running.
func Forget(t testing.TB, p *controlplane.Plane) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dropFinalizers := []byte(`{"metadata":{"finalizers":null}}`)
	secrets := p.AdminClient(t).CoreV1().Secrets(Namespace)
	_, err := secrets.Patch(ctx, SecretName, types.MergePatchType, dropFinalizers, metav1.PatchOptions{})
	if err == nil {
		err = secrets.Delete(ctx, SecretName, metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("forget %s/%s: %v", Namespace, SecretName, err)
	}
	dyn, err := dynamic.NewForConfig(p.Admin)
	if err != nil {
		t.Fatal(err)
	}
	regs := dyn.Resource(RegistrationResource)
	list, err := regs.List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return // no operator ever ran: no CRD
	}
	if err != nil {
		t.Fatalf("forget registrations: %v", err)
	}
	for _, r := range list.Items {
		_, err := regs.Patch(ctx, r.GetName(), types.MergePatchType, dropFinalizers, metav1.PatchOptions{})
		if err == nil {
			err = regs.Delete(ctx, r.GetName(), metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("forget registration %s: %v", r.GetName(), err)
		}
	}
}
