package controlplane_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/controlplane"
)

// TestPlaneServes proves the harness: the API server answers kubectl with
// the admin kubeconfig, and its version is the one the binaries were built
// at (kubectl and the server come from the same build).
func TestPlaneServes(t *testing.T) {
	p := controlplane.Shared(t)

	var v struct {
		ClientVersion struct{ GitVersion string } `json:"clientVersion"`
		ServerVersion struct{ GitVersion string } `json:"serverVersion"`
	}
	require.NoError(t, json.Unmarshal([]byte(p.Kubectl(t, "version", "-o", "json")), &v))
	assert.NotEmpty(t, v.ServerVersion.GitVersion)
	assert.Equal(t, v.ClientVersion.GitVersion, v.ServerVersion.GitVersion)
	assert.Equal(t, "127.0.0.1", p.Host)
	assert.NotEmpty(t, p.Port)
}
