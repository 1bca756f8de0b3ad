package fakecloud

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"time"

	"github.com/rancher/registration-engine/internal/pki"
)

// CA is a throw-away certificate authority for the fakes. Nothing it issues is
// trusted anywhere but in the test or demo that created it.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// PEM is Cert in PEM form, ready to be written as a CA bundle.
	PEM []byte
}

// NewCA makes a self-signed CA valid from an hour ago for ten years.
func NewCA(commonName string) (*CA, error) {
	key, err := pki.Key()
	if err != nil {
		return nil, err
	}
	tmpl := pki.CA(commonName, "fakecloud", time.Now().Add(-time.Hour), time.Now().Add(10*365*24*time.Hour))
	cert, err := pki.Sign(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: pki.CertPEM(cert.Raw)}, nil
}

// Issue returns a TLS server certificate for hosts (IP literals become IP
// SANs, anything else DNS SANs), signed by the CA. The first host is the CN.
func (ca *CA) Issue(hosts ...string) (tls.Certificate, error) {
	key, err := pki.Key()
	if err != nil {
		return tls.Certificate{}, err
	}
	cert, err := pki.Sign(leafTemplate(hosts), ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key}, nil
}

// SelfSigned returns a self-signed server certificate for hosts and its PEM,
// shaped like the region servers' certificates that SLES pins one file per
// server (RSA, CN and SAN = the host).
func SelfSigned(hosts ...string) (tls.Certificate, []byte, error) {
	return selfSignedFor(leafValidity, hosts...)
}

// selfSignedFor is SelfSigned with a certificate that expires validity
// from now.
func selfSignedFor(validity time.Duration, hosts ...string) (tls.Certificate, []byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := leafTemplate(hosts)
	tmpl.NotAfter = time.Now().Add(validity)
	cert, err := pki.Sign(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key}, pki.CertPEM(cert.Raw), nil
}

// CertPEM returns the leaf of c in PEM form.
func CertPEM(c tls.Certificate) []byte { return pki.CertPEM(c.Certificate[0]) }

// leafValidity is how long a server certificate of the fake is valid.
const leafValidity = 365 * 24 * time.Hour

func leafTemplate(hosts []string) *x509.Certificate {
	t := &x509.Certificate{
		NotBefore:   time.Now().Add(-time.Hour),
		NotAfter:    time.Now().Add(leafValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if len(hosts) > 0 {
		t.Subject = pkix.Name{CommonName: hosts[0]}
	}
	pki.SetHosts(t, hosts...)
	return t
}
