package harness_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/harness"
)

// TestKubeletEnv: the process kubelet gives a workload-identity pod the
// fake cloud's federated token and authority, gives a managed-identity pod
// (the Marketplace default) none of the webhook's variables, and refuses a
// pod whose identity the fake cloud would not know.
func TestKubeletEnv(t *testing.T) {
	c := harness.StartCloud(t)
	cloudEnv := c.Vars()
	azure := fakecloud.DefaultAzureConfig()
	tests := map[string]struct {
		pod map[string]string // beyond the extension and plan
		// wantSet are variables the engine gets from the fake cloud;
		// wantUnset it must not get at all.
		wantSet, wantUnset []string
		wantErr            bool
	}{
		"workload identity: token file and authority from the fake cloud": {
			pod:     map[string]string{"AZURE_CLIENT_ID": azure.ClientID, "AZURE_TENANT_ID": azure.TenantID},
			wantSet: []string{"AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST", "AZURE_IMDS_ENDPOINT", "SSL_CERT_FILE"},
		},
		"managed identity: none of the webhook's variables": {
			pod:       map[string]string{"AZURE_CREDENTIAL_MODE": "managed-identity", "AZURE_CLIENT_ID": azure.ManagedIdentityClientID},
			wantSet:   []string{"AZURE_IMDS_ENDPOINT", "SSL_CERT_FILE"},
			wantUnset: []string{"AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST", "AZURE_TENANT_ID"},
		},
		"managed identity with the workload identity's client ID": {
			pod:     map[string]string{"AZURE_CREDENTIAL_MODE": "managed-identity", "AZURE_CLIENT_ID": azure.ClientID},
			wantErr: true,
		},
		"managed identity with a tenant the webhook would have set": {
			pod:     map[string]string{"AZURE_CREDENTIAL_MODE": "managed-identity", "AZURE_CLIENT_ID": azure.ManagedIdentityClientID, "AZURE_TENANT_ID": azure.TenantID},
			wantErr: true,
		},
		"workload identity with another client ID": {
			pod:     map[string]string{"AZURE_CLIENT_ID": "00000000-0000-0000-0000-000000000000", "AZURE_TENANT_ID": azure.TenantID},
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var podEnv []string
			for _, k := range []string{"EXTENSION_RESOURCE_ID", "MARKETPLACE_PUBLISHER_ID", "MARKETPLACE_OFFER_ID", "MARKETPLACE_PLAN_ID"} {
				podEnv = append(podEnv, k+"="+cloudEnv[k])
			}
			for _, k := range slices.Sorted(maps.Keys(tc.pod)) {
				podEnv = append(podEnv, k+"="+tc.pod[k])
			}
			env, err := harness.KubeletEnv(podEnv, c, "/token", "/ca.crt")
			if tc.wantErr {
				require.Error(t, err)
				assert.Nil(t, env)
				return
			}
			require.NoError(t, err)
			got := harness.Cloud{Env: env}.Vars()
			for _, k := range tc.wantSet {
				assert.Equal(t, cloudEnv[k], got[k], k)
			}
			for _, k := range tc.wantUnset {
				assert.NotContains(t, got, k)
			}
			for k, v := range tc.pod {
				assert.Equal(t, v, got[k], "%s from the pod", k)
			}
			assert.Equal(t, "/token", got["KUBERNETES_TOKEN"])
			assert.Equal(t, "/ca.crt", got["KUBERNETES_CA_CERT"])
		})
	}
}
