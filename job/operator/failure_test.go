package operator

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The Failure messages below are the shapes rancher/scc-operator writes
// (lifecycle.PrepareFailed sets the error's text; the register step wraps
// connect-ng's error in "Cannot register system to SCC"; a non-recoverable
// HTTP error gets the operator's own prefix), with the transport errors as
// Go's net/http spells them.
const (
	announce       = `Cannot register system to SCC: Post "https://smt-azure.susecloud.net/connect/subscriptions/systems": `
	nonRecoverable = "non-recoverable HTTP error encountered; to reregister Rancher, resolve connection issues then try again. Original error: "
)

func TestClassify(t *testing.T) {
	tests := map[string]struct {
		msg         string
		recoverable bool
		cause       string
		status      int
	}{
		// connect-ng v1.22.1, which both operator revisions build with,
		// as the real operator wrote them against the fake update server.
		"503 at announce (connect-ng v1.22)": {
			msg: "Cannot register system to SCC: Error: Registration server returned 'Service Unavailable' (503)", recoverable: true, cause: "HTTP 503 Service Unavailable", status: 503,
		},
		"401 unknown registration code (connect-ng v1.22)": {
			msg: nonRecoverable + "Cannot register system to SCC: Error: Registration server returned 'Unknown Registration Code.' (401)", cause: "HTTP 401 Unauthorized", status: 401,
		},
		"429 (connect-ng v1.22)": {
			msg: "Cannot register system to SCC: Error: Registration server returned 'Too Many Requests' (429)", recoverable: true, cause: "HTTP 429 Too Many Requests", status: 429,
		},
		"422 at activation (connect-ng v1.22)": {
			msg: nonRecoverable + "Error: Registration server returned 'No valid subscription' (422)", cause: "HTTP 422 Unprocessable Entity", status: 422,
		},
		// Later connect-ng releases.
		"503 at announce": {
			msg: "Cannot register system to SCC: API error: Service Unavailable (code: 503)", recoverable: true, cause: "HTTP 503 Service Unavailable", status: 503,
		},
		"500 at announce": {
			msg: "Cannot register system to SCC: API error: Internal Server Error (code: 500)", recoverable: true, cause: "HTTP 500 Internal Server Error", status: 500,
		},
		"502 through a gateway": {
			msg: "Cannot register system to SCC: API error: Bad Gateway (code: 502)", recoverable: true, cause: "HTTP 502 Bad Gateway", status: 502,
		},
		"429 throttled": {
			msg: "Cannot register system to SCC: API error: Too many requests (code: 429)", recoverable: true, cause: "HTTP 429 Too Many Requests", status: 429,
		},
		"connection reset": {
			msg: announce + "read tcp 10.244.0.5:41234->10.0.0.4:443: read: connection reset by peer", recoverable: true, cause: "connection reset",
		},
		"DNS: no such host": {
			msg: announce + "dial tcp: lookup smt-azure.susecloud.net on 10.96.0.10:53: no such host", recoverable: true, cause: "DNS: no such host",
		},
		"TLS handshake timeout": {
			msg: announce + "net/http: TLS handshake timeout", recoverable: true, cause: "TLS handshake timeout",
		},
		"connection refused": {
			msg: announce + "dial tcp 10.0.0.4:443: connect: connection refused", recoverable: true, cause: "connection refused",
		},
		"request timeout": {
			msg: announce + "context deadline exceeded (Client.Timeout exceeded while awaiting headers)", recoverable: true, cause: "request timeout",
		},
		"server hung up": {
			msg: announce + "EOF", recoverable: true, cause: "connection closed early",
		},
		"a proxy's HTML error page": {
			msg: "Cannot register system to SCC: invalid character '<' looking for beginning of value", recoverable: true, cause: "an HTML answer (a proxy's error page)",
		},
		"401 unknown registration code": {
			msg: nonRecoverable + "Cannot register system to SCC: API error: Unknown Registration Code. (code: 401)", cause: "HTTP 401 Unauthorized", status: 401,
		},
		"403": {
			msg: nonRecoverable + "Cannot register system to SCC: API error: Forbidden (code: 403)", cause: "HTTP 403 Forbidden", status: 403,
		},
		"404": {
			msg: nonRecoverable + "API error: Not found (code: 404)", cause: "HTTP 404 Not Found", status: 404,
		},
		"422 at activation": {
			msg: nonRecoverable + "API error: No valid subscription found (code: 422)", cause: "HTTP 422 Unprocessable Entity", status: 422,
		},
		"400 other 4xx": {
			msg: nonRecoverable + "API error: Bad Request (code: 400)", cause: "HTTP 400 Bad Request", status: 400,
		},
		"keepalive 401 on an active registration": {
			msg: nonRecoverable + "API error: Invalid system credentials (code: 401)", cause: "HTTP 401 Unauthorized", status: 401,
		},
		"501 is the operator's non-recoverable 5xx": {
			msg: nonRecoverable + "API error: Not Implemented (code: 501)", cause: "HTTP 501 Not Implemented", status: 501,
		},
		"505": {
			msg: "API error: HTTP Version Not Supported (code: 505)", cause: "HTTP 505 HTTP Version Not Supported", status: 505,
		},
		"510": {
			msg: "API error: Not Extended (code: 510)", cause: "HTTP 510 Not Extended", status: 510,
		},
		"x509 unknown authority (main ignores registrationUrlCert)": {
			msg: announce + "tls: failed to verify certificate: x509: certificate signed by unknown authority", cause: "certificate signed by unknown authority",
		},
		"x509 wrong name": {
			msg: announce + "tls: failed to verify certificate: x509: certificate is valid for other.example, not smt-azure.susecloud.net", cause: "certificate not trusted",
		},
		"the operator's prefix without a code": {
			msg: nonRecoverable + "something else", cause: "an HTTP error the operator calls non-recoverable",
		},
		"failed during secret initialization": {
			msg: `secrets "scc-system-credentials-abc" is forbidden: User "system:serviceaccount:cattle-scc-system:scc" cannot create resource "secrets"`, cause: "unrecognised failure",
		},
		"empty": {
			msg: "", cause: "unrecognised failure",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v := Classify(tc.msg)
			assert.Equal(t, tc.recoverable, v.Recoverable, "recoverable")
			assert.Equal(t, tc.cause, v.Cause)
			assert.Equal(t, tc.status, v.HTTPStatus)
			assert.Equal(t, strings.HasPrefix(tc.cause, "certificate"), v.Untrusted, "untrusted certificate")
		})
	}
}
