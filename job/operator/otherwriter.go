package operator

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/rancher/registration-engine/job/escape"
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

// RancherManager is the field manager the API server records for a Secret
// a person wrote through Rancher's UI. Rancher's registration page
// ("Register Rancher Prime", rancher/dashboard
// pkg/rancher-prime/pages/registration.composable.ts at 17ad8a6) deletes
// scc-registration and creates its own through Steve (POST /v1/secrets/…),
// and Steve (rancher/steve pkg/client/factory.go at 7972270) makes the
// call with client-go's default User-Agent, "rancher/<version> (…)",
// impersonating the person, with no fieldManager: the API server records
// the User-Agent's product. docs/troubleshoot.md, "A person registers
// through Rancher's registration page", has the calls and their sources.
const RancherManager = "rancher"

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
	// Person: a person registered with their own code through Rancher's
	// registration page (RancherManager owns data keys).
	Person bool
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
// A person who registered through Rancher's registration page
// (RancherManager owns data keys) counts, as Person: the engine never
// overwrites their code.
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
			if mf.Manager == RancherManager {
				return &OtherWriter{
					Who:      "a person through Rancher's registration page",
					Evidence: fmt.Sprintf("managedFields: %q (%s) owns data keys %s", mf.Manager, mf.Operation, strings.Join(keys, ", ")),
					Person:   true,
				}
			}
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
// The Secret's Helm annotations are foreign text (the engine's own token
// may patch them), and a person pastes the command with their own
// credentials: the helm command is built only from a release name and a
// namespace that Helm and Kubernetes would take (helmRelease, a DNS-1123
// label); anything else is named, quoted, and no command is built from it.
// ns and name are the engine's settings, shell-quoted all the same.
func (w *OtherWriter) Verdict(ns, name string) string {
	if w.Person {
		return w.personVerdict(ns, name)
	}
	head := fmt.Sprintf("%s/%s is written by %s (%s); two writers would overwrite each other, and rancher/scc-operator registers afresh on every change of the code or URL, so the engine writes nothing. Choose one writer: ",
		ns, name, w.Who, w.Evidence)
	del := fmt.Sprintf("kubectl -n %s delete secret %s", escape.Shell(ns), escape.Shell(name))
	switch {
	case w.Release != "":
		upgrade := "helm upgrade <its release> <its chart> -n <its namespace> --reuse-values --set registration.enabled=false"
		switch {
		case !helmRelease(w.Release):
			upgrade = fmt.Sprintf("the Secret's Helm annotation names a release that is not a valid release name: %q; find the release that installed it with helm list -A, then %s", w.Release, upgrade)
		case w.ReleaseNamespace != "" && len(validation.IsDNS1123Label(w.ReleaseNamespace)) > 0:
			upgrade = fmt.Sprintf("the Secret's Helm annotation names a namespace that is not a valid namespace name: %q; find the release that installed it with helm list -A, then %s", w.ReleaseNamespace, upgrade)
		default:
			upgrade = fmt.Sprintf("helm upgrade %s <its chart> -n %s --reuse-values --set registration.enabled=false", w.Release, cmp.Or(w.ReleaseNamespace, "<namespace>"))
		}
		return head + fmt.Sprintf("to keep %s registering the cluster, uninstall this engine (helm uninstall <this engine's release>); "+
			"to let the engine register it (Azure Marketplace PAYG), turn the registration off in that release "+
			"(Rancher's chart: %s), "+
			"delete the Secret it left (%s; its helm.sh/resource-policy keep keeps it after the upgrade), then run the engine",
			w.Who, upgrade, del)
	default:
		return head + fmt.Sprintf("to keep %s, uninstall this engine; to let the engine register the cluster, stop %s writing %s/%s "+
			"(remove the Secret from its sources), delete the Secret (%s), then run the engine",
			w.Who, w.Who, ns, name, del)
	}
}

// personVerdict is Verdict for a person's registration through Rancher's
// registration page: what happened, before the first "; " (status's line),
// then how to keep it or hand registration back to the engine.
func (w *OtherWriter) personVerdict(ns, name string) string {
	return fmt.Sprintf("%s/%s was registered by a person through Rancher's registration page with their own code (%s), so the PAYG registration is not applied; "+
		"the engine writes nothing, since two writers would overwrite each other and rancher/scc-operator registers afresh on every change of the code. "+
		"Choose one writer: to keep that code, uninstall this engine (on the Azure Marketplace, az k8s-extension delete …; with Helm, helm uninstall <this engine's release>); "+
		"to hand registration back to the engine (Azure Marketplace PAYG), delete the Secret (kubectl -n %s delete secret %s; this deregisters the person's code), "+
		"then run the engine (%s), and do not enter a code in Rancher's registration page again",
		ns, name, w.Evidence, escape.Shell(ns), escape.Shell(name), RunNowCommand(ns, "", kube.CronJobName+"-manual"))
}

// helmRelease reports whether s is a name Helm takes for a release (Helm
// 3's validation: a DNS-1123 subdomain of at most 53 characters).
func helmRelease(s string) bool {
	return len(s) <= 53 && len(validation.IsDNS1123Subdomain(s)) == 0
}
