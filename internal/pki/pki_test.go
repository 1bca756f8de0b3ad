package pki

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A leaf signed by a CA made here verifies against that CA alone, for its
// DNS and IP names, and its PEM forms load as a TLS key pair.
func TestChainVerifies(t *testing.T) {
	now := time.Now()
	caKey, err := Key()
	require.NoError(t, err)
	caTmpl := CA("test CA", "tests", now.Add(-time.Hour), now.Add(time.Hour))
	ca, err := Sign(caTmpl, caTmpl, caKey.Public(), caKey)
	require.NoError(t, err)

	key, err := Key()
	require.NoError(t, err)
	leafTmpl := &x509.Certificate{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	SetHosts(leafTmpl, "smt.example.test", "::1")
	leaf, err := Sign(leafTmpl, ca, key.Public(), caKey)
	require.NoError(t, err)
	assert.NotEqual(t, ca.SerialNumber, leaf.SerialNumber)

	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range []string{"smt.example.test", "::1"} {
		_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name})
		assert.NoError(t, err, name)
	}
	keyPEM, err := KeyPEM(key)
	require.NoError(t, err)
	_, err = tls.X509KeyPair(CertPEM(leaf.Raw), keyPEM)
	assert.NoError(t, err)
}
