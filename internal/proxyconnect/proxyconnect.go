// Package proxyconnect names the egress proxy that refused a tunnel. When
// a proxy answers a CONNECT with anything but 200, net/http fails the
// request with the bare status text ("Bad Gateway", transport.go's
// dialConn), which the caller then reports from the address it asked for
// (a region server's): nothing says a proxy was involved, nor which. A
// transport that sets OnProxyConnectResponse to OnResponse fails it with a
// *RefusedError instead.
package proxyconnect

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// RefusedError is a proxy's refusal of a CONNECT: a 502 when it could not
// reach the target, a 403 when its policy forbids it, a 407 when it wants
// other credentials.
type RefusedError struct {
	// Proxy is the proxy's URL with its password masked
	// (url.URL.Redacted): scheme, user, host:port.
	Proxy string
	// Target is the host:port the tunnel was asked for.
	Target string
	// StatusCode and Status are the proxy's answer ("502 Bad Gateway").
	StatusCode int
	Status     string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the proxy %s refused to open a tunnel (CONNECT) to %s: %s", e.Proxy, e.Target, e.Status)
}

// OnResponse is an http.Transport's OnProxyConnectResponse: it returns a
// *RefusedError for any answer but 200, and nil for 200 (the transport
// then goes on as without it).
func OnResponse(_ context.Context, proxyURL *url.URL, connectReq *http.Request, resp *http.Response) error {
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	return &RefusedError{Proxy: proxyURL.Redacted(), Target: connectReq.Host, StatusCode: resp.StatusCode, Status: resp.Status}
}
