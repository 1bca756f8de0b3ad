package azure

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/testkit"
)

// TestIMDSTokenTransportOnlyRedirectsIMDS: the managed identity's
// transport sends azidentity's IMDS token request to the configured
// endpoint (keeping a base path and the query) and refuses every other
// destination without sending it, so a token request can never leave the
// node. The client under test dials loopback only, so a request the
// transport failed to redirect is an error here, never a packet.
func TestIMDSTokenTransportOnlyRedirectsIMDS(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string
	)
	received := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Host+" "+r.URL.RequestURI())
		mu.Unlock()
		fmt.Fprint(w, `{"access_token":"t"}`)
	}))
	t.Cleanup(srv.Close)
	loopbackOnly := &http.Client{Transport: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil || !net.ParseIP(host).IsLoopback() {
				return nil, fmt.Errorf("test dials loopback only, not %s", addr)
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	base, err := url.Parse(srv.URL + "/imds/")
	require.NoError(t, err)
	tr := imdsTokenTransport{base: base, client: loopbackOnly}

	tests := map[string]struct {
		url     string
		wantErr bool
		want    string // what the fake received: Host and request URI
	}{
		"IMDS token request goes to the configured endpoint": {
			url:  "http://169.254.169.254" + identityTokenPath + "?api-version=2018-02-01&client_id=c&resource=r",
			want: base.Host + " /imds" + identityTokenPath + "?api-version=2018-02-01&client_id=c&resource=r",
		},
		"Entra is refused":                   {url: "https://login.microsoftonline.com/tenant/oauth2/v2.0/token", wantErr: true},
		"another IMDS path is refused":       {url: "http://169.254.169.254/metadata/instance?api-version=2021-02-01", wantErr: true},
		"the token path on another host":     {url: "http://203.0.113.7" + identityTokenPath, wantErr: true},
		"the IMDS host name with a port too": {url: "http://169.254.169.254:80" + identityTokenPath, wantErr: true},
	}
	// What each refusal says, the destination and the one path allowed
	// among it: the golden file.
	msgs := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, tc.url, nil)
			require.NoError(t, err)
			resp, err := tr.Do(req)
			if tc.wantErr {
				require.Error(t, err)
				assert.Empty(t, received(), "nothing was sent")
				msgs.Add(name, err)
				return
			}
			require.NoError(t, err)
			_ = resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, []string{tc.want}, received())
			assert.Equal(t, "169.254.169.254", req.URL.Host, "the caller's request is not modified")
		})
	}
}
