package fakecloud

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sccClient speaks to an update server's SCC API the way SUSE/connect-ng
// (and so rancher/scc-operator) does: by the server's name over TLS, the
// name checked against the certificate, the connection made to a loopback
// address.
type sccClient struct {
	t    *testing.T
	http *http.Client
	base string
}

func newSCCClient(t *testing.T, u *UpdateServer, addr string) *sccClient {
	pool := x509.NewCertPool()
	pool.AddCert(mustParse(t, u.CertPEM))
	var d net.Dialer
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	return &sccClient{t: t, base: "https://" + u.Name, http: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext:       dial,
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}}}
}

// call sends body as JSON with either a registration code or Basic
// credentials and returns the status and the decoded JSON answer.
func (c *sccClient) call(method, path, regCode, login, password string, body any) (int, any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(c.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/json")
	if regCode != "" {
		req.Header.Set("Authorization", "Token token="+regCode)
	}
	if login != "" {
		req.SetBasicAuth(login, password)
	}
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	var out any
	if len(data) > 0 {
		require.NoError(c.t, json.Unmarshal(data, &out), "%s", data)
	}
	return resp.StatusCode, out
}

// TestUpdateServerSCCAPI runs the operator's sequence (announce, activate,
// list activations, keepalive, deregister) against each fault.
func TestUpdateServerSCCAPI(t *testing.T) {
	const (
		code     = "SCC-TEST-CODE"
		hostname = "https://rancher.example.test"
	)
	u, _, err := NewUpdateServer("smt.example.test")
	require.NoError(t, err)
	httpsPort, _, stop, err := ServeUpdateServers(map[string]*UpdateServer{"127.0.0.11": u})
	require.NoError(t, err)
	defer stop()
	c := newSCCClient(t, u, net.JoinHostPort("127.0.0.11", strconv.Itoa(httpsPort)))
	announce := map[string]any{"hostname": hostname, "hwinfo": map[string]any{"arch": "unknown"}}
	product := map[string]any{"identifier": "rancher", "version": "2.12.3", "arch": "unknown", "token": code}
	unknownCode := map[string]any{"type": "error", "error": "Unknown Registration Code.", "localized_error": "Unknown Registration Code."}

	tests := map[string]struct {
		accept          string // SetRegCode
		faults          UpdateFaults
		sendCode        string
		wantAnnounce    int
		wantAnnounceErr any
		wantActivations int // -1: not reached
	}{
		"registers with any code":       {sendCode: code, wantAnnounce: 201, wantActivations: 1},
		"registers with the known code": {accept: code, sendCode: code, wantAnnounce: 201, wantActivations: 1},
		"401 on a code it does not know": {accept: "OTHER-CODE", sendCode: code, wantAnnounce: 401,
			wantAnnounceErr: unknownCode, wantActivations: -1},
		"401 without a code": {wantAnnounce: 401, wantAnnounceErr: unknownCode, wantActivations: -1},
		"401 on every code":  {faults: UpdateFaults{SCCRefuseCode: true}, sendCode: code, wantAnnounce: 401, wantAnnounceErr: unknownCode, wantActivations: -1},
		"500 on announce": {faults: UpdateFaults{SCCAnnounce5xx: true}, sendCode: code, wantAnnounce: 500,
			wantAnnounceErr: map[string]any{"type": "error", "error": "Internal Server Error", "localized_error": "Internal Server Error"}, wantActivations: -1},
		"no activations": {faults: UpdateFaults{SCCNoActivations: true}, sendCode: code, wantAnnounce: 201, wantActivations: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			u.Reset()
			u.SetRegCode(tc.accept)
			u.SetFaults(tc.faults)
			c.t = t

			status, body := c.call("POST", "/connect/subscriptions/systems", tc.sendCode, "", "", announce)
			require.Equal(t, tc.wantAnnounce, status, "%v", body)
			reqs := u.SCCRequests()
			require.Len(t, reqs, 1)
			assert.Equal(t, SCCRequest{
				Method: "POST", Path: "/connect/subscriptions/systems", RegCode: tc.sendCode,
				Host: u.Name, ServerName: u.Name, LocalAddr: reqs[0].LocalAddr, Hostname: hostname, Status: tc.wantAnnounce,
			}, reqs[0], "the fake records the code, the name dialled (Host and SNI) and the body's hostname")
			assert.Equal(t, "127.0.0.11:"+strconv.Itoa(httpsPort), reqs[0].LocalAddr)
			if tc.wantActivations < 0 {
				assert.Equal(t, tc.wantAnnounceErr, body, "connect-ng shows localized_error")
				return
			}
			sys, ok := body.(map[string]any)
			require.True(t, ok, "%v", body)
			login, _ := sys["login"].(string)
			assert.Equal(t, SCCPassword, sys["password"])
			assert.NotZero(t, sys["id"])

			status, wrong := c.call("POST", "/connect/systems/products", "", login, "not-the-password", product)
			assert.Equal(t, 401, status, "Basic credentials are checked: %v", wrong)
			status, svc := c.call("POST", "/connect/systems/products", "", login, SCCPassword, product)
			require.Equal(t, 201, status, "%v", svc)
			assert.Equal(t, "Rancher Prime 2.12.3", svc.(map[string]any)["product"].(map[string]any)["friendly_name"])

			status, list := c.call("GET", "/connect/systems/activations", "", login, SCCPassword, nil)
			require.Equal(t, 200, status)
			activations, ok := list.([]any)
			require.True(t, ok, "a JSON array even when empty: %v", list)
			require.Len(t, activations, tc.wantActivations)
			if tc.wantActivations > 0 {
				a := activations[0].(map[string]any)
				assert.Equal(t, code, a["regcode"])
				assert.Equal(t, "ACTIVE", a["status"])
				for _, k := range []string{"starts_at", "expires_at"} {
					_, err := time.Parse(time.RFC3339, a[k].(string))
					assert.NoError(t, err, "%s is RFC 3339: connect-ng parses it into a time.Time", k)
				}
				assert.Equal(t, "rancher", a["service"].(map[string]any)["product"].(map[string]any)["identifier"])
			}

			status, _ = c.call("PUT", "/connect/systems", "", login, SCCPassword, announce)
			assert.Equal(t, 204, status, "keepalive")
			status, _ = c.call("DELETE", "/connect/systems", "", login, SCCPassword, nil)
			assert.Equal(t, 204, status, "deregister")
			status, _ = c.call("GET", "/connect/systems/activations", "", login, SCCPassword, nil)
			assert.Equal(t, 401, status, "a deregistered system's credentials are gone")

			var paths []string
			for _, r := range u.SCCRequests() {
				paths = append(paths, r.Method+" "+r.Path)
				if r.Path != "/connect/subscriptions/systems" {
					assert.Equal(t, login, r.Login)
					assert.Empty(t, r.RegCode)
				}
			}
			assert.Equal(t, []string{
				"POST /connect/subscriptions/systems", "POST /connect/systems/products", "POST /connect/systems/products",
				"GET /connect/systems/activations", "PUT /connect/systems", "DELETE /connect/systems", "GET /connect/systems/activations",
			}, paths)
		})
	}
}

// TestCloudSCCFaults: the fault table's SCC faults reach every update
// server, Options.RegCode sets the accepted code, and the admin endpoint
// serves the recorded requests.
func TestCloudSCCFaults(t *testing.T) {
	tests := map[string]struct {
		fault      string
		wantStatus int
	}{
		"healthy":            {wantStatus: 201},
		"scc-401":            {fault: "scc-401", wantStatus: 401},
		"scc-announce-5xx":   {fault: "scc-announce-5xx", wantStatus: 500},
		"scc-no-activations": {fault: "scc-no-activations", wantStatus: 201},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opts := Options{Dir: t.TempDir(), RegCode: "CLOUD-CODE"}
			if tc.fault != "" {
				opts.Faults = []string{tc.fault}
			}
			c, err := Start(opts)
			require.NoError(t, err)
			defer c.Stop()
			env := c.Env()
			for i, ip := range []string{"127.0.0.4", "127.0.0.5"} {
				sc := newSCCClient(t, c.Updates[i], net.JoinHostPort(ip, env["UPDATE_SERVER_HTTPS_PORT"]))
				status, _ := sc.call("POST", "/connect/subscriptions/systems", "CLOUD-CODE", "", "", map[string]any{"hostname": "h"})
				assert.Equal(t, tc.wantStatus, status, "update server %s", ip)
				status, _ = sc.call("POST", "/connect/subscriptions/systems", "NOT-THE-CLOUD-CODE", "", "", map[string]any{"hostname": "h"})
				assert.Contains(t, []int{401, 500}, status, "update server %s: another code never registers", ip)
			}

			resp, err := http.Get(env["AZURE_IMDS_ENDPOINT"] + "/fakecloud/scc-requests")
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, 200, resp.StatusCode)
			var reqs []SCCRequest
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&reqs))
			require.Len(t, reqs, 4)
			assert.Equal(t, "CLOUD-CODE", reqs[0].RegCode)
			assert.Equal(t, tc.wantStatus, reqs[0].Status)
			assert.Equal(t, "smt-azure.susecloud.net", reqs[0].ServerName)
		})
	}
}

// TestUpdateServerPassingFaults: the passing faults fail as many calls as
// they say, the way a real outage ends, and then the SCC API answers again.
func TestUpdateServerPassingFaults(t *testing.T) {
	const code = "SCC-TEST-CODE"
	u, _, err := NewUpdateServer("smt.example.test")
	require.NoError(t, err)
	httpsPort, _, stop, err := ServeUpdateServers(map[string]*UpdateServer{"127.0.0.11": u})
	require.NoError(t, err)
	defer stop()
	c := newSCCClient(t, u, net.JoinHostPort("127.0.0.11", strconv.Itoa(httpsPort)))
	announce := map[string]any{"hostname": "https://rancher.example.test"}
	product := map[string]any{"identifier": "rancher", "version": "2.12.3", "arch": "unknown", "token": code}

	t.Run("503 on the first announce, then 201", func(t *testing.T) {
		u.Reset()
		u.SetFaults(UpdateFaults{SCCAnnounceFailures: 1})
		c.t = t
		status, body := c.call("POST", "/connect/subscriptions/systems", code, "", "", announce)
		assert.Equal(t, 503, status)
		assert.Equal(t, "Service Unavailable", body.(map[string]any)["localized_error"], "connect-ng reads an API error only from SCC's JSON")
		status, _ = c.call("POST", "/connect/subscriptions/systems", code, "", "", announce)
		assert.Equal(t, 201, status)
	})
	t.Run("429 when asked", func(t *testing.T) {
		u.Reset()
		u.SetFaults(UpdateFaults{SCCAnnounceFailures: 1, SCCAnnounceStatus: 429})
		c.t = t
		status, _ := c.call("POST", "/connect/subscriptions/systems", code, "", "", announce)
		assert.Equal(t, 429, status)
	})
	t.Run("a reset connection, then 201", func(t *testing.T) {
		u.Reset()
		u.SetFaults(UpdateFaults{SCCAnnounceResets: 1})
		c.t = t
		b, err := json.Marshal(announce)
		require.NoError(t, err)
		req, err := http.NewRequest("POST", c.base+"/connect/subscriptions/systems", bytes.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Token token="+code)
		_, err = c.http.Do(req)
		require.Error(t, err)
		assert.ErrorIs(t, err, syscall.ECONNRESET, "the connection is reset, not closed or timed out")
		status, _ := c.call("POST", "/connect/subscriptions/systems", code, "", "", announce)
		assert.Equal(t, 201, status)
	})
	t.Run("500 at the second call, then 201", func(t *testing.T) {
		u.Reset()
		u.SetFaults(UpdateFaults{SCCActivateFailures: 1})
		c.t = t
		status, sys := c.call("POST", "/connect/subscriptions/systems", code, "", "", announce)
		require.Equal(t, 201, status)
		login := sys.(map[string]any)["login"].(string)
		status, _ = c.call("POST", "/connect/systems/products", "", login, SCCPassword, product)
		assert.Equal(t, 500, status)
		status, _ = c.call("POST", "/connect/systems/products", "", login, SCCPassword, product)
		assert.Equal(t, 201, status)
		var got []int
		for _, r := range u.SCCRequests() {
			got = append(got, r.Status)
		}
		assert.Equal(t, []int{201, 500, 201}, got, "each recorded with its answer")
	})
}
