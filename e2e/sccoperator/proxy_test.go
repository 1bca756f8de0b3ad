package sccoperator

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/fakecloud"
)

const name = "smt.example.test"

// nameServer serves "hello" over TLS with a certificate for name only, on
// 127.0.0.1, and returns its port and a pool trusting it.
func nameServer(t *testing.T) (int, *x509.CertPool) {
	t.Helper()
	cert, pemBytes, err := fakecloud.SelfSigned(name)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from "+r.Host)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pemBytes))
	return srv.Listener.Addr().(*net.TCPAddr).Port, pool
}

// viaProxy is a client that, like connect-ng's, takes its proxy from
// HTTPS_PROXY (here given directly) and checks TLS for the URL's name.
func viaProxy(p *Proxy, pool *x509.CertPool) *http.Client {
	u, _ := url.Parse(p.URL)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		Proxy:           http.ProxyURL(u),
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}}
}

func TestProxyTunnelsByNameWithTLSEndToEnd(t *testing.T) {
	port, pool := nameServer(t)
	backend := "127.0.0.1:" + strconv.Itoa(port)
	p, err := NewProxy(StaticRoute(map[string]string{name + ":443": backend, "wrong.example.test:443": backend, "far.example.test:443": "192.0.2.1:443"}))
	require.NoError(t, err)
	defer p.Close()
	client := viaProxy(p, pool)

	resp, err := client.Get("https://" + name + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "hello from "+name, string(body), "the request reaches the backend with the name as Host")

	tests := map[string]struct {
		url                string
		wantTarget, dialed string
		wantErr            error // of the tunnel; nil: it opened
	}{
		"name without a route":         {url: "https://unknown.example.test/", wantTarget: "unknown.example.test:443", wantErr: ErrNoRoute},
		"certificate for another name": {url: "https://wrong.example.test/", wantTarget: "wrong.example.test:443", dialed: backend},
		"route off loopback":           {url: "https://far.example.test/", wantTarget: "far.example.test:443", wantErr: ErrNotLoopback},
	}
	for n, tc := range tests {
		t.Run(n, func(t *testing.T) {
			_, err := client.Get(tc.url)
			require.Error(t, err)
			tunnels := p.Tunnels()
			got := tunnels[len(tunnels)-1]
			assert.Equal(t, tc.wantTarget, got.Target)
			assert.Equal(t, tc.dialed, got.Dialed, "a refused tunnel dials nothing")
			if tc.wantErr == nil {
				assert.NoError(t, got.Err)
			} else {
				assert.ErrorIs(t, got.Err, tc.wantErr)
			}
			if tc.dialed != "" {
				var hostErr x509.HostnameError
				assert.ErrorAs(t, err, &hostErr, "TLS inside the tunnel is the client's own: the name is checked")
			}
		})
	}

	resp, err = http.Get(p.URL + "/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "only CONNECT")
}

// TestProxyPassesAResetOn: an upstream that resets the connection reaches
// the client as a reset, not as an orderly EOF, so the operator behind the
// proxy fails as it would in a pod ("connection reset by peer").
func TestProxyPassesAResetOn(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 1)
			_, _ = c.Read(buf)
			_ = c.(*net.TCPConn).SetLinger(0)
			_ = c.Close()
		}
	}()
	p, err := NewProxy(StaticRoute(map[string]string{name + ":443": l.Addr().String()}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })

	_, pool := nameServer(t)
	_, err = viaProxy(p, pool).Get("https://" + name + "/")
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.ECONNRESET, "the connection is reset, not closed or timed out")
}
