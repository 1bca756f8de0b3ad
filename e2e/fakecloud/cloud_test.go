package fakecloud_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/fakecloud"
)

// A pod behind a Service: the servers bind 127.0.0.1 (the pod's address),
// the engine dials the Service by name, and a dialer that sends the name to
// the pod stands in for CoreDNS and kube-proxy. The update server is
// reached at the pod's address directly, as the region server hands it out.
const (
	podAddr     = "127.0.0.1"
	serviceName = "fakecloud.test.svc"
)

func behindService(t *testing.T, roots *x509.CertPool) *http.Client {
	t.Helper()
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if host != serviceName && host != podAddr {
			return nil, fmt.Errorf("the engine was sent to %s, neither the Service nor the pod", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(podAddr, port))
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext:     dial,
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	}}
}

func pool(t *testing.T, files ...string) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.True(t, p.AppendCertsFromPEM(b), "%s holds no certificate", f)
	}
	return p
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(podAddr, "0"))
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func fetch(t *testing.T, c *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestStartListenServesEveryPeerAtTheAdvertisedAddress(t *testing.T) {
	dir := t.TempDir()
	imdsPort := freePort(t)
	c, err := fakecloud.Start(fakecloud.Options{Dir: dir, Host: serviceName, Listen: podAddr, UpdateIPs: []string{podAddr},
		Ports: fakecloud.Ports{IMDS: imdsPort}})
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	env := c.Env()
	port := func(key string) string { return env[key] }
	imds := "http://" + net.JoinHostPort(serviceName, strconv.Itoa(imdsPort))
	assert.Equal(t, imds, env["AZURE_IMDS_ENDPOINT"], "the fixed IMDS port is what the engine is told")
	assert.Equal(t, net.JoinHostPort(serviceName, strconv.Itoa(imdsPort)), env["AIA_ALLOWED_HOSTS"])
	cfg, err := os.ReadFile(env["REGIONSRV_CONFIG"])
	require.NoError(t, err)
	assert.Contains(t, string(cfg), "regionsrv = "+serviceName+"\n", "one region server, the Service")
	trusted := behindService(t, pool(t, filepath.Join(dir, "ca.pem"), filepath.Join(dir, "certs", serviceName+".pem")))
	updateRoots := x509.NewCertPool()
	updateRoots.AppendCertsFromPEM(c.Updates[0].CertPEM)

	tests := map[string]struct {
		client *http.Client
		url    string
		status int
		body   string
	}{
		"IMDS answers": {trusted, imds + "/metadata/instance/compute?api-version=2021-02-01", 400, "Required metadata header"},
		"Entra's certificate names the Service address": {trusted,
			env["AZURE_AUTHORITY_HOST"] + env["AZURE_TENANT_ID"] + "/v2.0/.well-known/openid-configuration", 200, `"token_endpoint"`},
		"the region server's pinned certificate names the Service, and it hands out the pod's address": {trusted,
			"https://" + net.JoinHostPort(serviceName, port("REGION_SERVER_PORT")) + "/regionInfo", 200, `SMTserverIP="` + podAddr + `"`},
		"the update server answers on its HTTPS port": {behindServiceNamed(t, updateRoots, c.Updates[0].Name),
			"https://" + net.JoinHostPort(podAddr, port("UPDATE_SERVER_HTTPS_PORT")) + "/api/health/status", 200, "online"},
		"the update server answers on its HTTP port": {trusted,
			"http://" + net.JoinHostPort(podAddr, port("UPDATE_SERVER_HTTP_PORT")) + "/smt.crt", 200, "BEGIN CERTIFICATE"},
		"the CA is served to a pod that cannot read Dir": {trusted, imds + "/fakecloud/files/ca.pem", 200, "BEGIN CERTIFICATE"},
		"the region certificate is served":               {trusted, imds + "/fakecloud/files/certs/" + serviceName + ".pem", 200, "BEGIN CERTIFICATE"},
		"the attestation roots are served":               {trusted, imds + "/fakecloud/files/attestation-roots.pem", 200, "BEGIN CERTIFICATE"},
		"the federated token is not served":              {trusted, imds + "/fakecloud/files/token", 404, ""},
		"nothing outside Dir is served":                  {trusted, imds + "/fakecloud/files/certs/../token", 404, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, tc.url, nil)
			require.NoError(t, err)
			status, body := fetch(t, tc.client, req)
			assert.Equal(t, tc.status, status, body)
			assert.Contains(t, body, tc.body)
		})
	}
}

// behindServiceNamed is behindService verifying the update server's
// certificate for its name, as the engine does.
func behindServiceNamed(t *testing.T, roots *x509.CertPool, name string) *http.Client {
	c := behindService(t, roots)
	c.Transport.(*http.Transport).TLSClientConfig.ServerName = name
	return c
}

func TestStartListenRefuses(t *testing.T) {
	tests := map[string]fakecloud.Options{
		"two region servers on one port": {Host: serviceName, Listen: podAddr, UpdateIPs: []string{podAddr},
			RegionIPs: []string{"127.0.0.2", "127.0.0.3"}},
		"an update server without an IP to hand out": {Host: serviceName, Listen: podAddr},
	}
	for name, opts := range tests {
		t.Run(name, func(t *testing.T) {
			opts.Dir = t.TempDir()
			c, err := fakecloud.Start(opts)
			if err == nil {
				c.Stop()
			}
			assert.Error(t, err)
		})
	}
}

func saToken(t *testing.T, claims map[string]any) string {
	t.Helper()
	b, err := json.Marshal(claims)
	require.NoError(t, err)
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(b) + "." + enc([]byte("signature"))
}

func TestFederatedSubjectAcceptsTheServiceAccountsToken(t *testing.T) {
	const sub = "system:serviceaccount:cattle-scc-system:registration-engine"
	dir := t.TempDir()
	c, err := fakecloud.Start(fakecloud.Options{Dir: dir, FederatedSubject: sub})
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	env := c.Env()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool(t, filepath.Join(dir, "ca.pem")), MinVersion: tls.VersionTLS12}}}
	future, past := time.Now().Add(time.Hour).Unix(), time.Now().Add(-time.Minute).Unix()
	aud := "api://AzureADTokenExchange"
	fixed := fakecloud.DefaultAzureConfig().FederatedToken

	tests := map[string]struct {
		assertion string
		status    int
		body      string
	}{
		"projected token of the ServiceAccount": {saToken(t, map[string]any{"sub": sub, "aud": []string{aud}, "exp": future}), 200, `"access_token"`},
		"audience as a single string":           {saToken(t, map[string]any{"sub": sub, "aud": aud, "exp": future}), 200, `"access_token"`},
		"the configured token still works":      {fixed, 200, `"access_token"`},
		"another ServiceAccount": {saToken(t, map[string]any{"sub": "system:serviceaccount:default:default", "aud": []string{aud}, "exp": future}),
			400, "AADSTS70021"},
		"the API server's audience": {saToken(t, map[string]any{"sub": sub, "aud": []string{"https://kubernetes.default.svc"}, "exp": future}),
			400, "AADSTS70021"},
		"expired":     {saToken(t, map[string]any{"sub": sub, "aud": []string{aud}, "exp": past}), 400, "AADSTS70021"},
		"not a token": {"garbage", 400, "AADSTS70021"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			form := url.Values{
				"grant_type":            {"client_credentials"},
				"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
				"client_id":             {env["AZURE_CLIENT_ID"]},
				"client_assertion":      {tc.assertion},
				"scope":                 {"https://management.azure.com/.default"},
			}
			req, err := http.NewRequest(http.MethodPost,
				fmt.Sprintf("%s%s/oauth2/v2.0/token", env["AZURE_AUTHORITY_HOST"], env["AZURE_TENANT_ID"]), strings.NewReader(form.Encode()))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			status, body := fetch(t, client, req)
			assert.Equal(t, tc.status, status, body)
			assert.Contains(t, body, tc.body)
		})
	}
}

// TestLoopbackExceptionOnlyForLoopbackUpdateServers: the engine refuses
// update servers at loopback addresses unless UPDATE_SERVER_ALLOW_LOOPBACK is
// set, so a fake cloud on loopback sets it, and one that hands out a pod's
// address (the kind tier) does not: there the real rule runs.
func TestLoopbackExceptionOnlyForLoopbackUpdateServers(t *testing.T) {
	tests := map[string]struct {
		opts fakecloud.Options
		want string
	}{
		"update servers on loopback": {opts: fakecloud.Options{}, want: "true"},
		"update server at a pod's address": {
			opts: fakecloud.Options{Host: serviceName, Listen: podAddr, UpdateIPs: []string{"10.244.0.7"}}, want: "",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.opts.Dir = t.TempDir()
			c, err := fakecloud.Start(tc.opts)
			require.NoError(t, err)
			t.Cleanup(c.Stop)
			assert.Equal(t, tc.want, c.Env()["UPDATE_SERVER_ALLOW_LOOPBACK"])
		})
	}
}
