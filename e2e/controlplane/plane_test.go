package controlplane_test

import (
	"encoding/json"
	"fmt"
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

// TestPlaneAuditLog: a plane started WithAuditLog records each request
// with who made it, what it asked of which object, and the answer; one
// started without has no log (the option costs nothing unasked).
func TestPlaneAuditLog(t *testing.T) {
	p := controlplane.Start(t, controlplane.WithAuditLog())
	require.NotEmpty(t, p.AuditLog)
	p.Kubectl(t, "create", "configmap", "audited", "--namespace=default", "--from-literal=k=v")
	p.Kubectl(t, "get", "configmap", "audited", "--namespace=default")
	recs, err := p.Audit()
	require.NoError(t, err)
	var seen []string
	for _, r := range recs {
		if r.Resource == "configmaps" && r.Name == "audited" {
			seen = append(seen, fmt.Sprintf("%s %s %s/%s %d", r.User, r.Verb, r.Namespace, r.Name, r.Code))
		}
	}
	assert.Equal(t, []string{"admin create default/audited 201", "admin get default/audited 200"}, seen)
	assert.Empty(t, controlplane.Shared(t).AuditLog, "the shared plane keeps no audit log")
}
