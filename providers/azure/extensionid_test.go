package azure_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/providers/azure"
)

const (
	aksExtension = "/subscriptions/ce73a2b0-d2e7-4ff6-b987-b32d6908de4e/resourceGroups/rg-rancher_1/providers/Microsoft.ContainerService/managedClusters/aks-1/providers/Microsoft.KubernetesConfiguration/extensions/rancher-payg"
	arcExtension = "/subscriptions/ce73a2b0-d2e7-4ff6-b987-b32d6908de4e/resourceGroups/(edge).rg/providers/Microsoft.Kubernetes/connectedClusters/arc_1/providers/Microsoft.KubernetesConfiguration/extensions/suse.rancher"
	aksParens    = "/subscriptions/ce73a2b0-d2e7-4ff6-b987-b32d6908de4e/resourceGroups/(edge).rg/providers/Microsoft.ContainerService/managedClusters/aks_1/providers/Microsoft.KubernetesConfiguration/extensions/suse.rancher"
)

// The ARM grammar is checked whole, so the subscription that phase 2
// cross-checks is the one the request names, and nothing in the setting can
// reach the request's path or query.
func TestParseExtensionID(t *testing.T) {
	tests := map[string]struct {
		id       string
		wantPath string // "" means refused
	}{
		"AKS extension":       {id: aksExtension, wantPath: aksExtension},
		"parentheses escaped": {id: aksParens, wantPath: strings.Replace(aksParens, "(edge)", "%28edge%29", 1)},
		// Phase 2 matches the extension's cluster with the node through
		// AKS's node resource group; an Arc cluster has none.
		"Arc extension: refused, names the type":                 {id: arcExtension},
		"keywords in any case":                                   {id: "/SUBSCRIPTIONS/ce73a2b0-d2e7-4ff6-b987-b32d6908de4e/resourcegroups/rg/PROVIDERS/Microsoft.ContainerService/managedClusters/c/providers/microsoft.kubernetesconfiguration/Extensions/x", wantPath: "/subscriptions/ce73a2b0-d2e7-4ff6-b987-b32d6908de4e/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c/providers/Microsoft.KubernetesConfiguration/extensions/x"},
		"api-version override":                                   {id: aksExtension + "?api-version=2099-01-01"},
		"fragment":                                               {id: aksExtension + "#x"},
		"percent-encoded dots":                                   {id: "/subscriptions/ce73a2b0-d2e7-4ff6-b987-b32d6908de4e/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c/providers/Microsoft.KubernetesConfiguration/extensions/%2e%2e"},
		"dot-dot, relative":                                      {id: "x/../y"},
		"dot-dot in the path":                                    {id: "/subscriptions/ce73a2b0-d2e7-4ff6-b987-b32d6908de4e/resourceGroups/../providers/Microsoft.ContainerService/managedClusters/c/providers/Microsoft.KubernetesConfiguration/extensions/x"},
		"another subscription's extension behind ..":             {id: "/subscriptions/ce73a2b0-d2e7-4ff6-b987-b32d6908de4e/../../subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c/providers/Microsoft.KubernetesConfiguration/extensions/x"},
		"a virtual machine":                                      {id: "/subscriptions/ce73a2b0-d2e7-4ff6-b987-b32d6908de4e/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm"},
		"subscription not a GUID and a bad cluster name at once": {id: "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/-c/providers/Microsoft.KubernetesConfiguration/extensions/x"},
		"another resource type":                                  {id: "/subscriptions/ce73a2b0-d2e7-4ff6-b987-b32d6908de4e/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c/providers/Microsoft.KubernetesConfiguration/fluxConfigurations/x"},
		"trailing slash":                                         {id: aksExtension + "/"},
		"white space":                                            {id: "/subscriptions/ce73a2b0-d2e7-4ff6-b987-b32d6908de4e/resourceGroups/r g/providers/Microsoft.ContainerService/managedClusters/c/providers/Microsoft.KubernetesConfiguration/extensions/x"},
	}
	msgs := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			id, err := azure.ParseExtensionID(tc.id)
			if tc.wantPath == "" {
				require.ErrorIs(t, err, azure.ErrExtensionID)
				// The message names every problem, so one fix is enough.
				msgs.Add(name, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantPath, id.Path())
			assert.Equal(t, tc.wantPath[:strings.Index(tc.wantPath, "/providers/Microsoft.KubernetesConfiguration/")], id.ClusterPath(),
				"the managed cluster is the extension's parent")
			assert.Equal(t, "ce73a2b0-d2e7-4ff6-b987-b32d6908de4e", id.SubscriptionID)
		})
	}
}
