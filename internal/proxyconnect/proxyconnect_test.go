package proxyconnect

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOnResponse: a 200 lets the tunnel be; any other answer is a
// RefusedError naming the proxy (password masked), the target and the
// answer.
func TestOnResponse(t *testing.T) {
	proxy := &url.URL{Scheme: "http", User: url.UserPassword("engine", "s3cret"), Host: "proxy.corp:3128"}
	connect := &http.Request{Method: http.MethodConnect, Host: "23.100.36.229:443", URL: &url.URL{Opaque: "23.100.36.229:443"}}
	tests := map[string]struct {
		status string
		code   int
		want   string
	}{
		"200: the tunnel is open": {status: "200 Connection established", code: 200},
		"502":                     {status: "502 Bad Gateway", code: 502, want: "the proxy http://engine:xxxxx@proxy.corp:3128 refused to open a tunnel (CONNECT) to 23.100.36.229:443: 502 Bad Gateway"},
		"407":                     {status: "407 Proxy Authentication Required", code: 407, want: "the proxy http://engine:xxxxx@proxy.corp:3128 refused to open a tunnel (CONNECT) to 23.100.36.229:443: 407 Proxy Authentication Required"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := OnResponse(context.Background(), proxy, connect, &http.Response{StatusCode: tc.code, Status: tc.status})
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			var refused *RefusedError
			require.ErrorAs(t, err, &refused)
			assert.Equal(t, tc.code, refused.StatusCode)
			assert.Equal(t, tc.want, err.Error())
			assert.NotContains(t, err.Error(), "s3cret")
		})
	}
}
