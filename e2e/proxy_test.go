package e2e

import (
	"context"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/e2e/sccoperator"
)

// TestEngineThroughProxy runs the built engine behind an egress proxy: a
// CONNECT proxy on loopback that logs every tunnel. Entra and ARM are named
// (login.fake.test, management.fake.test), as in Azure, so HTTPS_PROXY
// applies to them (Go never proxies a loopback address): both must pass the
// proxy, with TLS end to end against the fake cloud's CA (SSL_CERT_FILE, as
// a TLS-inspecting proxy's CA would be given). IMDS must not: its client
// never uses a proxy (providers/azure TestIMDSNeverUsesProxy proves it for
// 169.254.169.254 itself). The region servers' proxy use is proved in
// job/smt TestRegionServersThroughProxy, the API server's refusal of it in
// job/kube TestInClusterNeverUsesProxy.
func TestEngineThroughProxy(t *testing.T) {
	fc, err := fakecloud.Start(fakecloud.Options{Dir: t.TempDir(), Names: []string{"login.fake.test", "management.fake.test"}})
	require.NoError(t, err)
	t.Cleanup(fc.Stop)
	env := fc.Env()
	entra, err := url.Parse(env["AZURE_AUTHORITY_HOST"])
	require.NoError(t, err)
	arm, err := url.Parse(env["ARM_ENDPOINT"])
	require.NoError(t, err)
	named := func(u *url.URL, name string) string { return name + ":" + u.Port() }
	proxy, err := sccoperator.NewProxy(sccoperator.StaticRoute(map[string]string{
		named(entra, "login.fake.test"):    entra.Host,
		named(arm, "management.fake.test"): arm.Host,
	}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })

	env["AZURE_AUTHORITY_HOST"] = "https://" + named(entra, "login.fake.test") + "/"
	env["ARM_ENDPOINT"] = "https://" + named(arm, "management.fake.test")
	env["HTTPS_PROXY"] = proxy.URL
	env["NO_PROXY"] = ""
	env["REGISTRATION_CODE"] = "E2E-CODE"
	var vars []string
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := harness.RunEngine(t, ctx, vars, "--dry-run")
	require.Equal(t, 0, res.Code, res.String())
	assert.Equal(t, "registered", summary(t, res.Stderr)["outcome"])

	var passed []string
	for _, tun := range proxy.Tunnels() {
		require.NoError(t, tun.Err, "tunnel to %s", tun.Target)
		host, _, _ := net.SplitHostPort(tun.Target)
		passed = append(passed, host)
	}
	assert.Contains(t, passed, "login.fake.test", "Entra through the proxy")
	assert.Contains(t, passed, "management.fake.test", "ARM through the proxy")
	imds, err := url.Parse(env["AZURE_IMDS_ENDPOINT"])
	require.NoError(t, err)
	assert.NotContains(t, passed, imds.Hostname(), "IMDS never through the proxy")
	slices.Sort(passed)
	passed = slices.Compact(passed)
	if t.Failed() {
		return
	}
	t.Logf("proved: behind HTTPS_PROXY (a CONNECT proxy on loopback) the engine reached Entra and ARM only through it (tunnels to %s), TLS checked end to end against SSL_CERT_FILE, and registered (dry run, in %s)",
		strings.Join(passed, ", "), res.Took.Round(time.Millisecond))
}
