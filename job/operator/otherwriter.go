package operator

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/rancher/registration-engine/job/kube"
)

// Helm's marks of ownership on an object it installed.
const (
	helmReleaseName      = "meta.helm.sh/release-name"
	helmReleaseNamespace = "meta.helm.sh/release-namespace"
	managedByLabel       = "app.kubernetes.io/managed-by"
)

// PythonEngineManager is the field manager the API server records for SUSE's
// Python engine (SUSE-Enceladus/cloud-registration-engine): it writes the
// Secret with the requests library and no fieldManager parameter, so the
// manager is the User-Agent's product, "python-requests". Its Secret is not
// another tool's: the engine takes it over (server-side apply with Force).
const PythonEngineManager = "python-requests"

// OtherWriter is a tool other than this engine that writes the
// registration Secret.
type OtherWriter struct {
	// Who names it: `Helm release "rancher" (namespace cattle-system)` or
	// `field manager "argocd-controller"`.
	Who string
	// Evidence is what in the Secret says so.
	Evidence string
	// Release and ReleaseNamespace are the Helm release, when Helm owns
	// the Secret ("" when only its label says Helm).
	Release, ReleaseNamespace string
}

// FindOtherWriter reports a writer of s that the engine must not fight, or
// nil. Those it does not count:
//   - itself (kube.FieldManager) and rancher/scc-operator, which adopts the
//     Secret with labels, annotations and a finalizer but writes no data;
//   - a person with kubectl (managers "kubectl", "kubectl-…"), who may put
//     the registration code into the Secret;
//   - SUSE's Python engine (PythonEngineManager), whose Secret the engine
//     takes over.
//
// Anything that installed or keeps writing the Secret's data does count:
// Helm (Rancher's chart, annotations meta.helm.sh/release-name or the label
// app.kubernetes.io/managed-by=Helm), GitOps controllers, Terraform. Only
// managers that own data keys count; one that owns only metadata (a backup
// tool's annotation) writes no registration.
func FindOtherWriter(s *corev1.Secret) *OtherWriter {
	if s == nil {
		return nil
	}
	if rel := s.Annotations[helmReleaseName]; rel != "" {
		relNS := s.Annotations[helmReleaseNamespace]
		return &OtherWriter{
			Who:      fmt.Sprintf("Helm release %q (namespace %s)", rel, cmp.Or(relNS, "unknown")),
			Evidence: "annotation " + helmReleaseName + "=" + rel,
			Release:  rel, ReleaseNamespace: relNS,
		}
	}
	if strings.EqualFold(s.Labels[managedByLabel], "Helm") {
		return &OtherWriter{Who: "Helm", Evidence: "label " + managedByLabel + "=" + s.Labels[managedByLabel]}
	}
	for _, mf := range s.ManagedFields {
		if ownWriter(mf.Manager) || mf.FieldsV1 == nil {
			continue
		}
		if keys := dataKeys(mf.FieldsV1.GetRawBytes()); len(keys) > 0 {
			return &OtherWriter{
				Who:      fmt.Sprintf("field manager %q", mf.Manager),
				Evidence: fmt.Sprintf("managedFields: %q (%s) owns data keys %s", mf.Manager, mf.Operation, strings.Join(keys, ", ")),
			}
		}
	}
	return nil
}

// OperatorManagers are the field managers rancher/scc-operator writes
// under: client-go's default, the program's name (its cmd/operator builds
// "operator"; images name it scc-operator), or its operator name
// (--operator-name, default rancher-scc-operator).
var OperatorManagers = []string{"operator", "scc-operator", "rancher-scc-operator"}

// ownWriter: the managers FindOtherWriter does not count.
func ownWriter(manager string) bool {
	return manager == kube.FieldManager || manager == PythonEngineManager ||
		slices.Contains(OperatorManagers, manager) ||
		manager == "kubectl" || strings.HasPrefix(manager, "kubectl-")
}

// dataKeys lists the data and stringData keys a managedFields entry owns.
func dataKeys(raw []byte) []string {
	var f map[string]json.RawMessage
	if json.Unmarshal(raw, &f) != nil {
		return nil
	}
	var keys []string
	for _, field := range []string{"f:data", "f:stringData"} {
		var sub map[string]json.RawMessage
		if json.Unmarshal(f[field], &sub) != nil {
			continue
		}
		for k := range sub {
			if name, ok := strings.CutPrefix(k, "f:"); ok {
				keys = append(keys, name)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// Verdict is the permanent error's text: who writes ns/name, why the
// engine stops, and the choice a person must make, with the commands.
func (w *OtherWriter) Verdict(ns, name string) string {
	head := fmt.Sprintf("%s/%s is written by %s (%s); two writers would overwrite each other, and rancher/scc-operator registers afresh on every change of the code or URL, so the engine writes nothing. Choose one writer: ",
		ns, name, w.Who, w.Evidence)
	switch {
	case w.Release != "":
		return head + fmt.Sprintf("to keep %s registering the cluster, uninstall this engine (helm uninstall <this engine's release>); "+
			"to let the engine register it (Azure Marketplace PAYG), turn the registration off in that release "+
			"(Rancher's chart: helm upgrade %s <its chart> -n %s --reuse-values --set registration.enabled=false), "+
			"delete the Secret it left (kubectl -n %s delete secret %s; its helm.sh/resource-policy keep keeps it after the upgrade), then run the engine",
			w.Who, w.Release, cmp.Or(w.ReleaseNamespace, "<namespace>"), ns, name)
	default:
		return head + fmt.Sprintf("to keep %s, uninstall this engine; to let the engine register the cluster, stop %s writing %s/%s "+
			"(remove the Secret from its sources), delete the Secret (kubectl -n %s delete secret %s), then run the engine",
			w.Who, w.Who, ns, name, ns, name)
	}
}
