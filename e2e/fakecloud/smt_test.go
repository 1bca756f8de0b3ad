package fakecloud

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/xml"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestListenSamePort(t *testing.T) {
	ls, port, err := ListenSamePort("127.0.0.2", "127.0.0.3", "::1")
	require.NoError(t, err)
	defer smtCloseAll(ls)

	want := 2
	if HasIPv6Loopback() {
		want = 3
	}
	require.Len(t, ls, want)
	for _, l := range ls {
		assert.Equal(t, port, l.Addr().(*net.TCPAddr).Port)
	}

	_, _, err = ListenSamePort("192.0.2.1")
	assert.Error(t, err, "only loopback addresses")
}

func TestRegionXML(t *testing.T) {
	body := RegionXML([]SMTInfo{
		{IPv4: "192.0.2.1", IPv6: "2001:db8::1", Name: `a"b<c`, Registry: "r", Fingerprint: "AA", Region: "westus3"},
		{IPv6: "2001:db8::2", Name: "v6only", Fingerprint: "BB"},
	}, false)

	var doc struct {
		Servers []struct {
			Attrs []xml.Attr `xml:",any,attr"`
		} `xml:"smtInfo"`
	}
	require.NoError(t, xml.Unmarshal(body, &doc), "%s", body)
	require.Len(t, doc.Servers, 2)
	attrs := func(i int) map[string]string {
		m := map[string]string{}
		for _, a := range doc.Servers[i].Attrs {
			m[a.Name.Local] = a.Value
		}
		return m
	}
	assert.Equal(t, map[string]string{"SMTserverIP": "192.0.2.1", "SMTserverIPv6": "2001:db8::1", "SMTserverName": `a"b<c`, "SMTregistryName": "r", "fingerprint": "AA", "region": "westus3"}, attrs(0))
	assert.Equal(t, map[string]string{"SMTserverIP": "None", "SMTserverIPv6": "2001:db8::2", "SMTserverName": "v6only", "fingerprint": "BB"}, attrs(1),
		"SMTserverIP is always printed, None for an IPv6-only server, as the real server does")
}

func TestServeRegionServers(t *testing.T) {
	dir := t.TempDir()
	rs := NewRegionServer(
		SMTInfo{IPv4: "192.0.2.1", Name: "west", Fingerprint: "AA", Region: "westus3"},
		SMTInfo{IPv4: "192.0.2.2", Name: "east", Fingerprint: "BB", Region: "eastus"},
	)
	port, stop, err := ServeRegionServers(dir, map[string]http.Handler{"127.0.0.2": rs})
	require.NoError(t, err)
	defer stop()

	pinned, err := os.ReadFile(filepath.Join(dir, "127.0.0.2.pem"))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pinned))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}, Timeout: 5 * time.Second}
	get := func(query string) (int, string) {
		resp, err := client.Get("https://127.0.0.2:" + strconv.Itoa(port) + "/regionInfo" + query)
		require.NoError(t, err, "the pinned file verifies the server, IP SAN included")
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}

	code, body := get("?regionHint=WestUS3")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, string(RegionXML(rs.entries[:1], false)), body, "only the hinted region")
	_, body = get("")
	assert.Equal(t, string(RegionXML(rs.entries, false)), body)
	assert.Equal(t, []string{"westus3", ""}, rs.Hints())

	rs.SetFaults(RegionFaults{FailFirst: 1})
	code, _ = get("")
	assert.Equal(t, http.StatusServiceUnavailable, code, "FailFirst counts from SetFaults")
	code, _ = get("")
	assert.Equal(t, http.StatusOK, code)
	rs.SetFaults(RegionFaults{Status: http.StatusNotFound})
	code, body = get("")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, "Not found\n", body)
}

func TestUpdateServer(t *testing.T) {
	u, cert, err := NewUpdateServer("smt.example.test")
	require.NoError(t, err)
	assert.Equal(t, CertPEM(cert), u.CertPEM)
	assert.Len(t, u.Fingerprint(), 59, "40 hex digits in colon-separated pairs")
	assert.Equal(t, SMTInfo{IPv4: "127.0.0.11", Name: "smt.example.test", Registry: "registry-smt.example.test", Fingerprint: u.Fingerprint(), Region: "r"}, u.Info("127.0.0.11", "", "r"))

	httpsPort, httpPort, stop, err := ServeUpdateServers(map[string]*UpdateServer{"127.0.0.11": u})
	require.NoError(t, err)
	defer stop()
	pool := x509.NewCertPool()
	pool.AddCert(mustParse(t, u.CertPEM))
	// The name is not in DNS: connect to the IP, verify for the name.
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: u.Name},
		DisableKeepAlives: true,
	}
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	get := func(scheme string, port int, path string) (int, string) {
		resp, err := client.Get(scheme + "://" + netip.AddrPortFrom(netip.MustParseAddr("127.0.0.11"), uint16(port)).String() + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}

	tests := map[string]struct {
		faults   UpdateFaults
		scheme   string
		path     string
		wantCode int
		wantBody string
	}{
		"healthy":           {path: "/api/health/status", wantCode: 200, wantBody: `{"state":"online"}`},
		"offline":           {faults: UpdateFaults{Offline: true}, path: "/api/health/status", wantCode: 200, wantBody: `{"state":"offline"}`},
		"old SMT":           {faults: UpdateFaults{Health404: true}, path: "/api/health/status", wantCode: 404},
		"5xx":               {faults: UpdateFaults{Status5xx: true}, path: "/smt.crt", wantCode: 503},
		"smt.crt":           {path: "/smt.crt", wantCode: 200, wantBody: string(u.CertPEM)},
		"rmt.crt over http": {scheme: "http", path: "/rmt.crt", wantCode: 200, wantBody: string(u.CertPEM)},
		"only rmt.crt":      {faults: UpdateFaults{OnlyRMTCrt: true}, path: "/smt.crt", wantCode: 404},
		"wrong cert":        {faults: UpdateFaults{WrongCert: true}, path: "/smt.crt", wantCode: 200, wantBody: string(u.wrong)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			u.Reset()
			u.SetFaults(tc.faults)
			scheme, port := "https", httpsPort
			if tc.scheme == "http" {
				scheme, port = "http", httpPort
			}
			code, body := get(scheme, port, tc.path)
			assert.Equal(t, tc.wantCode, code)
			if tc.wantBody != "" {
				assert.Equal(t, tc.wantBody, body)
			}
			assert.Equal(t, 1, u.Requests(tc.path))
		})
	}
	assert.NotEqual(t, u.CertPEM, u.wrong)
}

func mustParse(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(smtFirstDER(pemBytes))
	require.NoError(t, err)
	return c
}
