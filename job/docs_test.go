package job

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/testkit"
)

// notSettings are the variables docs/configure.md lists that are no
// setting of the engine's own: Kubernetes and the Workload Identity webhook
// inject them, and the Azure SDK, Go's TLS and proxy code read them.
var notSettings = []string{
	"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST",
	"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "SSL_CERT_FILE", "SSL_CERT_DIR",
	"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "DONOTMODIFY",
}

// docs/configure.md's tables and the engine's settings agree: every
// variable a setting reads has a row, and every variable a row names is a
// setting's (or one that notSettings says others read).
func TestConfigureDocNamesEverySetting(t *testing.T) {
	doc, err := os.ReadFile("../docs/configure.md")
	require.NoError(t, err)
	documented := testkit.TableNames(doc, regexp.MustCompile("`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]{4,})`"), "|")
	var envs []string
	for _, s := range settings {
		envs = append(envs, s.envs...)
	}
	for _, e := range envs {
		assert.True(t, documented[e], "setting %s has no row in docs/configure.md", e)
	}
	for d := range documented {
		assert.True(t, slices.Contains(envs, d) || slices.Contains(notSettings, d), "docs/configure.md names %s, which no setting reads", d)
	}
	t.Logf("docs/configure.md documents the %d variables of the engine's settings and %d others", len(envs), len(documented)-len(envs))
}
