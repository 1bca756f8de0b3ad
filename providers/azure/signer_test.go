package azure

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/testkit"
)

// TestCheckSigner holds each rule of checkSigner on its own: a certificate
// that breaks exactly one of them is refused with that rule's reason, so no
// rule hides behind another (the fake cloud's forgeries break several at
// once).
func TestCheckSigner(t *testing.T) {
	azureLike := func(mutate func(c *x509.Certificate)) *x509.Certificate {
		c := &x509.Certificate{
			Subject:               pkix.Name{CommonName: "metadata.azure.com"},
			DNSNames:              []string{"westeurope.metadata.azure.com"},
			BasicConstraintsValid: true,
			KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		}
		if mutate != nil {
			mutate(c)
		}
		return c
	}
	tests := map[string]struct {
		cert     *x509.Certificate
		wantName string
		refused  bool // the message is in the golden file
	}{
		"Azure's shape":                    {cert: azureLike(nil), wantName: "westeurope.metadata.azure.com"},
		"sovereign cloud name":             {cert: azureLike(func(c *x509.Certificate) { c.DNSNames = []string{"metadata.azure.us"} }), wantName: "metadata.azure.us"},
		"CN counts only without a SAN":     {cert: azureLike(func(c *x509.Certificate) { c.DNSNames = nil }), wantName: "metadata.azure.com"},
		"CN of Azure beside a foreign SAN": {cert: azureLike(func(c *x509.Certificate) { c.DNSNames = []string{"login.attacker.example"} }), refused: true},
		"a look-alike suffix":              {cert: azureLike(func(c *x509.Certificate) { c.DNSNames = []string{"evilmetadata.azure.com.example"} }), refused: true},
		"a CA":                             {cert: azureLike(func(c *x509.Certificate) { c.IsCA = true }), refused: true},
		"no digitalSignature key usage":    {cert: azureLike(func(c *x509.Certificate) { c.KeyUsage = x509.KeyUsageKeyEncipherment }), refused: true},
		"no serverAuth extended key usage": {cert: azureLike(func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth} }), refused: true},
		"code signing only":                {cert: azureLike(func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning} }), refused: true},
	}
	msgs := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := (&document{signer: tc.cert}).checkSigner()
			if !tc.refused {
				require.NoError(t, err)
				assert.Equal(t, tc.wantName, got)
				return
			}
			require.Error(t, err)
			msgs.Add(name, err)
		})
	}
}
