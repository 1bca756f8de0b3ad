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

// azure is az k8s-extension update with the extension's names where
// ExtensionID gives them.
func (r Remedies) azure(protected bool, kv []string) string {
	rg, cluster, ext, ok := ParseExtensionID(r.ExtensionID)
	if !ok {
		rg, cluster, ext = "<group>", "<cluster>", cmp.Or(shellSafe(r.Release), "<extension>")
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

// ParseExtensionID reads an AKS cluster extension's ARM ID:
// /subscriptions/S/resourceGroups/RG/providers/Microsoft.ContainerService/managedClusters/C/providers/Microsoft.KubernetesConfiguration/extensions/E.
// Names with characters a shell would read are not taken.
func ParseExtensionID(id string) (rg, cluster, ext string, ok bool) {
	p := strings.Split(strings.Trim(id, "/"), "/")
	if len(p) != 12 || !strings.EqualFold(p[0], "subscriptions") || !strings.EqualFold(p[2], "resourceGroups") ||
		!strings.EqualFold(p[5], "Microsoft.ContainerService") || !strings.EqualFold(p[6], "managedClusters") ||
		!strings.EqualFold(p[9], "Microsoft.KubernetesConfiguration") || !strings.EqualFold(p[10], "extensions") {
		return "", "", "", false
	}
	for _, v := range []string{p[3], p[7], p[11]} {
		if v == "" || strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != "" {
			return "", "", "", false
		}
	}
	return p[3], p[7], p[11], true
}
