package azure

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/rancher/registration-engine/internal/proxyconnect"
)

// defaultTransport carries Entra's and ARM's traffic when the caller gives
// no client: Go's default transport (the proxy variables, its timeouts),
// except that a proxy refusing the tunnel is named in the error
// (proxyconnect.RefusedError) instead of a bare "Bad Gateway".
func defaultTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.OnProxyConnectResponse = proxyconnect.OnResponse
	return tr
}

// errBodyTooLarge marks a response body over the transport's cap.
var errBodyTooLarge = errors.New("response body too large")

// limitedTransport is the SDK's HTTP transport with a cap on every response
// body: reading past max bytes fails instead of buffering without end.
type limitedTransport struct {
	client *http.Client
	max    int64
}

// Do implements policy.Transporter.
func (t limitedTransport) Do(req *http.Request) (*http.Response, error) {
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max, max: t.max}
	return resp, nil
}

type limitedBody struct {
	rc        io.ReadCloser
	left, max int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells "exactly max" from "more than max".
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, fmt.Errorf("%w: more than %d bytes", errBodyTooLarge, b.max)
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
