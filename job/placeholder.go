package job

import (
	"errors"
	"fmt"
	"strings"
)

// Placeholder is the literal an Azure Marketplace bundle ships for the
// values Azure fills in when it deploys the chart (global.azure.* in
// manifests/marketplace/values.yaml). A setting that still holds it was not
// filled in; taken at face value it would send "DONOTMODIFY" to ARM as a
// resource ID, a plan or a client ID.
const Placeholder = "DONOTMODIFY"

// ErrNotFilledIn marks a setting that holds Placeholder (permanent, like
// every configuration problem).
var ErrNotFilledIn = errors.New("not filled in by Azure")

// isPlaceholder reports whether v is the Marketplace placeholder.
func isPlaceholder(v string) bool { return strings.TrimSpace(v) == Placeholder }

// filledInBy is, per setting (its flag), the chart value that carries it and
// what to set it to. Azure injects global.azure.identity.clientId,
// global.azure.marketplace.planId and global.azure.extension.resourceId for
// offers with the custom-meter billing model only (Partner Center's
// documentation of the Kubernetes application offer's billing models), on
// every path that creates the extension: the portal and
// `az k8s-extension create` alike, since both create the same ARM resource.
// An Azure install that still sees the placeholder is on another billing
// model, where the value is the customer's to pass.
var filledInBy = map[string]struct{ settings, note string }{
	"azure-client-id":       {"azure.credentialMode=workload-identity azure.workloadIdentity.clientId=<client-id> azure.workloadIdentity.tenantId=<tenant-id>", "a Workload Identity federated with the engine's ServiceAccount: the extension's managed identity is known only from what Azure injects"},
	"extension-resource-id": {"azure.extensionResourceId=<extension-id>", "the extension's ID: az k8s-extension show … --query id -o tsv"},
	"plan-id":               {"marketplace.planId=<plan-id>", "the plan the extension was created with, its --plan-name"},
	"publisher-id":          {"marketplace.publisherId=<publisher-id>", "the offer's publisher; a bundle staged by manifests/marketplace/stage.sh carries it"},
	"offer-id":              {"marketplace.offerId=<offer-id>", "the offer; a bundle staged by manifests/marketplace/stage.sh carries it"},
}

// placeholderProblem names the setting (the flag or variable it came from),
// says why it counts as missing and how to pass it: on an extension, the
// az command that sets configuration settings (with --yes: without a
// terminal, az k8s-extension update otherwise stops at its confirmation).
func placeholderProblem(flag, from string) error {
	how := "set the value"
	if f, ok := filledInBy[flag]; ok {
		how = fmt.Sprintf("pass it (%s): on the extension, az k8s-extension update --resource-group <group> --cluster-name <cluster> "+
			"--cluster-type managedClusters --name <extension> --configuration-settings %s --yes; with Helm, --set %s",
			f.note, f.settings, strings.ReplaceAll(f.settings, " ", ","))
	}
	return fmt.Errorf("%s=%q: %w: Azure fills in the Marketplace bundle's global.azure values only for offers with the custom-meter billing model, "+
		"and a chart rendered outside Azure has none filled in, so it counts as missing; %s", from, Placeholder, ErrNotFilledIn, how)
}
