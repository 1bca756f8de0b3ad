package operator

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// Verdict is what the engine makes of the message rancher/scc-operator
// left on a Failed Registration: can another attempt with the same values
// succeed (Recoverable), and in a few words why (Cause).
type Verdict struct {
	// Recoverable: a passing cause (the network, DNS, a TLS handshake that
	// timed out, a reset connection, an update server answering 5xx or
	// 429). Deleting and rewriting the Secret, once the update server
	// answers again, registers the cluster.
	Recoverable bool
	// Cause is a short name of the cause for logs, Events and status:
	// "HTTP 503 Service Unavailable", "connection reset", ….
	Cause string
	// HTTPStatus is the update server's status code, 0 when the failure
	// was not an HTTP answer.
	HTTPStatus int
	// Untrusted: the operator did not trust the update server's
	// certificate (an operator revision that ignores registrationUrlCert).
	Untrusted bool
}

// RecoverableCauses names, for --help and the docs, the causes Classify
// calls recoverable; TestRecoverableCausesWording holds it to Classify.
const RecoverableCauses = "network, DNS, TLS handshake timeout, HTTP 5xx or 429"

// CodeRefused says the update server refused the registration code (401,
// 403, 422): a new code is the remedy, and the operator registers it
// afresh with no delete.
func (v Verdict) CodeRefused() bool {
	return v.HTTPStatus == http.StatusUnauthorized || v.HTTPStatus == http.StatusForbidden || v.HTTPStatus == http.StatusUnprocessableEntity
}

// The shapes of the operator's Failure message, as rancher/scc-operator
// (pkg/controllers/online.go, lifecycle.PrepareFailed) and SUSE/connect-ng
// write them. The Registration carries the cause only as this text, so the
// text is the contract here; nothing of ours is classified this way.
var (
	// connect-ng's ApiError: "Error: Registration server returned
	// '<message>' (<status>)" (v1.22, which both operator revisions use),
	// or "API error: <message> (code: <status>)" (later releases).
	apiErrorCode = regexp.MustCompile(`Registration server returned '.*' \((\d{3})\)|API error: .*\(code: (\d{3})\)`)
	// The operator's own prefix of a non-recoverable HTTP error
	// (isNonRecoverableHTTPError: 4xx except 429, and 501, 505, 510).
	nonRecoverablePrefix = "non-recoverable HTTP error encountered"
)

// Transport failures a later attempt can get past, as Go's net, net/http
// and crypto/tls spell them, each with the Cause it is reported as. Order
// matters: the first match names the cause.
var passingCauses = []struct{ text, cause string }{
	{"TLS handshake timeout", "TLS handshake timeout"},
	{"connection reset by peer", "connection reset"},
	{"no such host", "DNS: no such host"},
	{"server misbehaving", "DNS: server misbehaving"},
	{"Temporary failure in name resolution", "DNS: temporary failure"},
	{"connection refused", "connection refused"},
	{"no route to host", "no route to host"},
	{"network is unreachable", "network unreachable"},
	{"i/o timeout", "network timeout"},
	{"Client.Timeout exceeded", "request timeout"},
	{"context deadline exceeded", "request timeout"},
	{"broken pipe", "connection broken"},
	{"unexpected EOF", "connection closed early"},
	{": EOF", "connection closed early"},
	{"server closed idle connection", "connection closed early"},
	// An answer that is not SCC's JSON: connect-ng reads an error only from
	// a JSON body, so a proxy's or load balancer's error page (a 502, 503
	// or 504 in front of the update server) reaches the operator as a JSON
	// syntax error.
	{"invalid character '<' looking for beginning of value", "an HTML answer (a proxy's error page)"},
	{"unexpected end of JSON input", "an empty answer"},
}

// Certificate trust failures: the operator does not trust the update
// server's certificate. The same values fail the same way (on
// rancher/scc-operator main, which ignores registrationUrlCert, for ever).
var trustFailures = []string{"x509:", "tls: failed to verify certificate"}

// Classify decides from a Failed Registration's message
// whether a retry with the same values can succeed. It follows the
// operator's own split (isNonRecoverableHTTPError): an HTTP answer of 4xx
// other than 429, or 501, 505 or 510, is not recoverable; any other HTTP
// status (5xx, 429) is. Network, DNS and TLS-handshake-timeout errors are
// recoverable; certificate trust errors are not. A message of no known
// shape is not recoverable: deleting a Secret for a cause nobody understood
// could make things worse, so a person decides.
func Classify(msg string) Verdict {
	if m := apiErrorCode.FindAllStringSubmatch(msg, -1); len(m) > 0 {
		last := m[len(m)-1]
		code, _ := strconv.Atoi(last[1] + last[2])
		v := Verdict{HTTPStatus: code, Cause: httpCause(code)}
		v.Recoverable = !nonRecoverableStatus(code) && !strings.Contains(msg, nonRecoverablePrefix)
		return v
	}
	if strings.Contains(msg, nonRecoverablePrefix) {
		return Verdict{Cause: "an HTTP error the operator calls non-recoverable"}
	}
	for _, t := range trustFailures {
		if strings.Contains(msg, t) {
			cause := "certificate not trusted"
			if strings.Contains(msg, "unknown authority") {
				cause = "certificate signed by unknown authority"
			}
			return Verdict{Cause: cause, Untrusted: true}
		}
	}
	for _, p := range passingCauses {
		if strings.Contains(msg, p.text) {
			return Verdict{Recoverable: true, Cause: p.cause}
		}
	}
	return Verdict{Cause: "unrecognised failure"}
}

// nonRecoverableStatus is the operator's isNonRecoverableHTTPError over a
// status code; codes outside 4xx and 5xx are not recoverable either.
func nonRecoverableStatus(code int) bool {
	switch {
	case code == http.StatusTooManyRequests:
		return false
	case code >= 400 && code < 500:
		return true
	case code == http.StatusNotImplemented, code == http.StatusHTTPVersionNotSupported, code == http.StatusNotExtended:
		return true
	case code >= 500 && code < 600:
		return false
	default:
		return true
	}
}

func httpCause(code int) string {
	c := "HTTP " + strconv.Itoa(code)
	if t := http.StatusText(code); t != "" {
		c += " " + t
	}
	return c
}
