// Package pki is the one certificate helper of the test harness: the fake
// cloud's CAs, its attestation chain and the control plane's certificates
// are all made with it. Every key is fresh and trusted nowhere but in the
// test or demo that made it. The product never imports it.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Key is a fresh P-256 key.
func Key() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generate key: %w", err)
	}
	return k, nil
}

// Serial is a random positive 63-bit serial number.
func Serial() *big.Int {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails: since Go 1.24 the runtime aborts instead of returning an error
	return new(big.Int).SetUint64(binary.BigEndian.Uint64(b[:]) >> 1)
}

// CA is the template of a certificate authority valid from notBefore to
// notAfter, named cn (organisation org, when given).
func CA(cn, org string, notBefore, notAfter time.Time) *x509.Certificate {
	t := &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	if org != "" {
		t.Subject.Organization = []string{org}
	}
	return t
}

// SetHosts adds hosts to tmpl's subject alternative names: IP literals as
// IP SANs, anything else as DNS SANs.
func SetHosts(tmpl *x509.Certificate, hosts ...string) {
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
}

// Sign issues tmpl for pub, signed by parentKey as parent (tmpl itself
// for a self-signed certificate), with a fresh serial number when tmpl
// has none, and returns the parsed certificate (its Raw is the DER).
func Sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, parentKey crypto.Signer) (*x509.Certificate, error) {
	if tmpl.SerialNumber == nil {
		tmpl.SerialNumber = Serial()
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
	if err != nil {
		return nil, fmt.Errorf("pki: sign %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: parse %q: %w", tmpl.Subject.CommonName, err)
	}
	return cert, nil
}

// CertPEM is a DER certificate in PEM form.
func CertPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// KeyPEM is key in PKCS #8 PEM form.
func KeyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
