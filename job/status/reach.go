package status

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// VersionAsker asks an address's GET /version; *kube.Reader serves it.
type VersionAsker interface {
	ServerVersion(ctx context.Context) ([]byte, error)
}

// Reach asks server (the kubeconfig's address) the one question every
// Kubernetes API server answers to anyone, GET /version, before status
// reads anything: without it, an HTTPS server that answers 404 to every
// path looks like a cluster where every object is absent ("the engine is
// not installed"), and a refused connection like a cluster whose reads
// failed. It returns the verdict and true when server is no Kubernetes API
// server or cannot be reached; false when it answered as one (its refusals,
// a 401 or a 403 with a Kubernetes Status, are then Gather's to report).
func Reach(ctx context.Context, asker VersionAsker, server string, exits ExitCodes) (Verdict, bool) {
	body, err := asker.ServerVersion(ctx)
	var v Verdict
	var status apierrors.APIStatus
	switch {
	case err == nil:
		// What the API server answers: a version.Info with gitVersion.
		var info struct {
			GitVersion string `json:"gitVersion"`
		}
		if jerr := json.Unmarshal(body, &info); jerr == nil && info.GitVersion != "" {
			return Verdict{}, false
		}
		v = notAPIServer(server, "its GET /version answered 200 without a Kubernetes version")
	case apierrors.IsUnexpectedServerError(err) && errors.As(err, &status):
		// An HTTP answer whose body was no Kubernetes Status: a web server,
		// a proxy's error page, a load balancer with nothing behind it.
		v = notAPIServer(server, fmt.Sprintf("its GET /version answered HTTP %d, not as a Kubernetes API server does", status.Status().Code))
	case errors.As(err, &status):
		return Verdict{}, false
	default:
		v = cannotConnect(server, err)
	}
	v.ExitCode = exits.of(v.State)
	return v, true
}

// checkServer is the next step for an address that is not the cluster's
// API server: the kubeconfig's server, or another context or kubeconfig.
const checkServer = "check the server of your kubeconfig's context (kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}'), or choose the cluster's with --context or --kubeconfig"

func notAPIServer(server, why string) Verdict {
	return unknown(fmt.Sprintf("%s is not a Kubernetes API server: %s", server, why), checkServer)
}

// cannotConnect is the verdict for an address status could not get an
// HTTP answer from: refused, a name that does not resolve, a TLS handshake
// that failed, no answer in time. err, client-go's, names the address and
// the cause; the next step depends on which.
func cannotConnect(server string, err error) Verdict {
	var (
		dnsErr    *net.DNSError
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		record    tls.RecordHeaderError
		netErr    net.Error
	)
	var cause, next string
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		cause = "connection refused (nothing listens at that address and port)"
		next = "check that the cluster runs and that you reach it from here (network, VPN, firewall); " + checkServer
	case errors.As(err, &dnsErr):
		cause = fmt.Sprintf("the name %s does not resolve", dnsErr.Name)
		next = "check the name in the kubeconfig's server, your DNS, and the VPN the cluster needs; " + checkServer
	case errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalid), errors.As(err, &verify):
		cause = "the server's TLS certificate is not the cluster's (the kubeconfig's certificate-authority-data does not verify it, or it names another host)"
		next = "check that the kubeconfig's server is the cluster's API server and that its certificate-authority-data is current (fetch the kubeconfig again); " + checkServer
	case errors.As(err, &record):
		cause = "the server does not speak TLS"
		next = checkServer
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		cause = "no answer in time"
		next = "check the network, firewall or VPN between here and the cluster, and that the cluster runs; " + checkServer
	default:
		cause = "the request failed"
		next = "check the network, firewall or VPN between here and the cluster, and the kubeconfig; " + checkServer
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err // the address is in the line already
	}
	return unknown(fmt.Sprintf("cannot connect to the API server at %s: %s (%v)", server, cause, err), next)
}
