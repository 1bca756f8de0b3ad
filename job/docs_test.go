package job

import (
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/smt"
	"github.com/rancher/registration-engine/providers"
	"github.com/rancher/registration-engine/providers/azure"
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

// docs/install.md's egress table names every endpoint the engine dials by
// default, with its port, and the hosts AKS documents for installing a
// Marketplace extension: a firewall built from the table lets a run through.
// (The endpoints are read from the engine's own defaults, so a new default
// without a row fails here.)
func TestEgressTableNamesEveryEndpoint(t *testing.T) {
	doc, err := os.ReadFile("../docs/install.md")
	require.NoError(t, err)
	var table []string
	inEgress := false
	for _, line := range strings.Split(string(doc), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			inEgress = line == "## Egress"
		case inEgress && strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| from"):
			table = append(table, line)
		}
	}
	require.NotEmpty(t, table, "docs/install.md has an Egress table")
	row := func(host string) string {
		for _, r := range table {
			if strings.Contains(r, host) {
				return r
			}
		}
		return ""
	}
	arm, err := url.Parse(azure.DefaultARMEndpoint)
	require.NoError(t, err)
	imds, err := url.Parse(providers.DefaultAzureIMDS)
	require.NoError(t, err)
	want := map[string]string{ // host → the port its row must name
		arm.Hostname():              "443",
		"login.microsoftonline.com": "443",
		imds.Hostname():             "80",
		"by IP (`regionServers`)":   "443",
		"the update servers, by IP": "443",
		// AKS, "Outbound network and FQDN rules", "Cluster extensions".
		"dp.kubernetesconfiguration.azure.com": "443", "mcr.microsoft.com": "443", "arcmktplaceprod.azurecr.io": "443",
	}
	for _, h := range azure.DefaultAIAAllowedHosts {
		want[h] = "80"
	}
	for _, d := range smt.DefaultDomains {
		want[d] = "443"
	}
	for host, port := range want {
		r := row(host)
		if assert.NotEmpty(t, r, "docs/install.md's Egress table has no row for %s", host) {
			assert.Regexp(t, `\| (\*\*)?`+port+`\b`, r, "the row of %s names port %s", host, port)
		}
	}
	assert.Contains(t, row("the update servers, by IP"), "**80**", "the update servers' certificate download on port 80")
}
