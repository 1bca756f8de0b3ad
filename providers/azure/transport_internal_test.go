package azure

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/proxyconnect"
)

// TestDefaultTransportNamesARefusingProxy: Entra's and ARM's requests,
// through a proxy that answers 502 to CONNECT, fail naming the proxy (its
// password masked) and its answer, not with a bare "Bad Gateway". The
// proxy is set on the transport as HTTPS_PROXY would set it (Go never
// proxies loopback from the environment, and the target's name resolves
// nowhere: only the proxy is asked).
func TestDefaultTransportNamesARefusingProxy(t *testing.T) {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusMethodNotAllowed)
	}))
	t.Cleanup(proxy.Close)
	proxyURL, err := url.Parse(proxy.URL)
	require.NoError(t, err)
	proxyURL.User = url.UserPassword("engine", "s3cret")
	tr := defaultTransport()
	tr.Proxy = http.ProxyURL(proxyURL)
	t.Cleanup(tr.CloseIdleConnections)

	_, err = (&http.Client{Transport: tr}).Get("https://login.fake.test/tenant/oauth2/v2.0/token")
	var refused *proxyconnect.RefusedError
	require.ErrorAs(t, err, &refused)
	assert.Equal(t, http.StatusBadGateway, refused.StatusCode)
	assert.Contains(t, err.Error(), "the proxy http://engine:xxxxx@"+proxyURL.Host+" refused to open a tunnel (CONNECT) to login.fake.test:443: 502 Bad Gateway")
	assert.NotContains(t, err.Error(), "s3cret")
}
