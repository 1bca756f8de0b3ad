// Package remedy builds the commands a remedy gives a customer for changing
// the engine's chart values on the release they have: Azure's extension
// manager's (az k8s-extension update) on a Marketplace install, helm upgrade
// on their own Helm release. The engine's verdicts and registration-engine
// status use the same words.
package remedy

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/rancher/registration-engine/providers/azure"
)

// How the engine was installed (RELEASE_MANAGER), which decides the
// command a remedy gives for changing one of its values. On a Marketplace
// install Azure's extension manager owns the Helm release: a value changed
// with helm upgrade is outside Azure's record of the extension, and its
// next reconcile or upgrade reverts it (the least favourable reading of
// Microsoft's "Deploy and manage cluster extensions", which gives
// az k8s-extension update as the way to change settings). So each remedy
// names the customer's own command.
const (
	// AzureExtension: the Marketplace bundle, installed and owned by
	// Azure's extension manager (the chart sets it when rendered with the
	// bundle's values).
	AzureExtension = "azure-extension"
	// Helm: a Helm release a person installed.
	Helm = "helm"
)

// Managers are RELEASE_MANAGER's values; "" is unknown (kustomize,
// or a run outside a release), where a remedy names every form.
var Managers = []string{"", AzureExtension, Helm}

// Remedies builds the commands that change the engine's chart values on the
// release the customer has.
type Remedies struct {
	// Manager is RELEASE_MANAGER: AzureExtension, Helm or
	// "".
	Manager string
	// Release is RELEASE_NAME, the Helm release (on an extension, its name).
	Release string
	// Namespace is the release's namespace.
	Namespace string
	// ExtensionID is EXTENSION_RESOURCE_ID: the resource group, cluster and
	// extension of the az command, when it is an AKS extension's ID.
	ExtensionID string
}

// SetValues is the command that sets chart values (key=value pairs, which
// must need no shell quoting) on this release; protected says they are
// Azure protected settings (the registration code). Azure's form carries
// --yes: without a terminal az k8s-extension update stops at its
// confirmation ("Use --yes").
func (r Remedies) SetValues(protected bool, kv ...string) string {
	switch r.Manager {
	case AzureExtension:
		return r.azure(protected, kv)
	case Helm:
		return r.helm(kv)
	}
	return fmt.Sprintf("on the Azure Marketplace, %s; with Helm, %s", r.azure(protected, kv), r.helm(kv))
}

// SetCode is the command that sets the registration code on this release:
// on the Azure Marketplace the extension's protected setting
// registrationCode (the chart makes the Secret registration-code from it,
// and an update of the extension re-runs the engine), with Helm the value;
// on a release of unknown kind every form, and with kustomize the Secret
// registration-code followed by then (the run that reads it).
func (r Remedies) SetCode(then string) string {
	set := r.SetValues(true, "registrationCode=<code>")
	if r.Manager == AzureExtension || r.Manager == Helm {
		return set
	}
	return fmt.Sprintf("%s; with kustomize, kubectl -n %s create secret generic registration-code --from-literal=regCode=<code>%s", set, cmp.Or(shellSafe(r.Namespace), "<namespace>"), then)
}

// azure is az k8s-extension update with the extension's names where
// ExtensionID gives them (names a shell would read are not taken).
func (r Remedies) azure(protected bool, kv []string) string {
	rg, cluster, ext := "<group>", "<cluster>", cmp.Or(shellSafe(r.Release), "<extension>")
	if id, err := azure.ParseExtensionID(r.ExtensionID); err == nil &&
		shellSafe(id.ResourceGroup) != "" && shellSafe(id.ClusterName) != "" && shellSafe(id.Name) != "" {
		rg, cluster, ext = id.ResourceGroup, id.ClusterName, id.Name
	}
	flag := "--configuration-settings"
	if protected {
		flag = "--configuration-protected-settings"
	}
	return fmt.Sprintf("az k8s-extension update --resource-group %s --cluster-name %s --cluster-type managedClusters --name %s %s %s --yes",
		rg, cluster, ext, flag, strings.Join(kv, " "))
}

// helm is helm upgrade keeping the release's other values.
func (r Remedies) helm(kv []string) string {
	return fmt.Sprintf("helm upgrade %s <chart> -n %s --reset-then-reuse-values --set %s",
		cmp.Or(shellSafe(r.Release), "<release>"), cmp.Or(shellSafe(r.Namespace), "<namespace>"), strings.Join(kv, ","))
}

// shellSafe is s when a shell reads it as one plain word, else "".
func shellSafe(s string) string {
	if s == "" || strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != "" {
		return ""
	}
	return s
}
