package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/harness"
)

// TestEgressDocumented runs the built engine against the fake cloud, once
// with a Workload Identity and once with the extension's managed identity,
// counts what it dialled by role (each fake counts the requests that reached
// it), and holds each role it dialled to its row of docs/install.md's Egress
// table, with the port the row names: a firewall built from the table lets a
// run through. (job TestEgressTableNamesEveryEndpoint holds the same table to
// the engine's defaults, the real hosts these fakes stand in for.)
func TestEgressDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/install.md")
	require.NoError(t, err)
	var table []string
	in := false
	for _, line := range strings.Split(string(doc), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Egress"
		case in && strings.HasPrefix(line, "| the engine's pod |"):
			table = append(table, line)
		}
	}
	require.NotEmpty(t, table, "docs/install.md has an Egress table")
	// role → what its row names, and the port.
	rows := map[string][2]string{
		"IMDS":                               {"`169.254.169.254`", "80"},
		"Entra":                              {"`login.microsoftonline.com`", "443"},
		"ARM":                                {"`management.azure.com`", "443"},
		"certificate downloads (AIA)":        {"`AIA_ALLOWED_HOSTS`", "80"},
		"region servers":                     {"`regionServers`", "443"},
		"update servers":                     {"the update servers, by IP", "443"},
		"update servers' certificate (HTTP)": {"the update servers, by IP", "80"},
	}
	dialled := map[string]int{}
	for _, mode := range []string{"workload-identity", "managed-identity"} {
		c, err := fakecloud.Start(fakecloud.Options{Dir: t.TempDir()})
		require.NoError(t, err)
		env := c.Environ()
		if mode == "managed-identity" {
			env = managedIdentityEnv(env, fakecloud.DefaultAzureConfig().ManagedIdentityClientID)
		}
		res := harness.RunEngine(t, context.Background(), append(env, "REGISTRATION_CODE=E2E-CODE"), "--dry-run")
		c.Stop()
		require.Equal(t, 0, res.Code, res.String())
		dialled["IMDS"] += int(c.Azure.IMDSRequests.Load() + c.Azure.AttestedRequests.Load() + c.Azure.IdentityTokenRequests.Load())
		dialled["Entra"] += int(c.Azure.TokenRequests.Load())
		dialled["ARM"] += int(c.Azure.ARMRequests.Load())
		dialled["certificate downloads (AIA)"] += int(c.Azure.AIARequests.Load())
		for _, r := range c.Regions {
			dialled["region servers"] += r.Requests()
		}
		for _, u := range c.Updates {
			for _, p := range u.Paths() {
				if strings.HasSuffix(p, ".crt") {
					dialled["update servers' certificate (HTTP)"] += u.Requests(p)
				} else {
					dialled["update servers"] += u.Requests(p)
				}
			}
		}
	}
	var lines []string
	for role, n := range dialled {
		if n == 0 {
			continue
		}
		row, ok := rows[role]
		require.True(t, ok, "the engine dialled %s, a role the test does not know: give it a row in docs/install.md's Egress table and here", role)
		var found string
		for _, r := range table {
			if strings.Contains(r, row[0]) {
				found = r
			}
		}
		if assert.NotEmpty(t, found, "the engine dialled %s (%d requests): docs/install.md's Egress table has no row naming %s", role, n, row[0]) {
			assert.Contains(t, found, row[1], "the row of %s names port %s", role, row[1])
		}
		lines = append(lines, fmt.Sprintf("%s %d (row %s, port %s)", role, n, row[0], row[1]))
	}
	for _, role := range []string{"IMDS", "Entra", "ARM", "region servers", "update servers"} {
		assert.Positive(t, dialled[role], "a healthy run dials %s", role)
	}
	sort.Strings(lines)
	t.Logf("proved: egress of two runs (workload identity, managed identity) by role, each against its docs/install.md Egress row: %s", strings.Join(lines, "; "))
}
