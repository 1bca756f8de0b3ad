package azure

import (
	"crypto/x509"
	"embed"
	"encoding/pem"
	"fmt"
	"io/fs"
	"sync"
)

// The production trust anchors of attested documents. Azure signs with
// issuing CAs under DigiCert Global Root G2 (RSA) and G3 (ECC); Microsoft
// RSA/ECC Root CA 2017 are Microsoft's own roots, kept so a move of the
// metadata certificates onto them does not break every cluster at once.
// Intermediates are deliberately not pinned: Microsoft rotates them without
// notice; they come from the leaf's AIA URL (see aia.go).
//
// The PEM files are byte-for-byte the Mozilla store's copies as shipped in
// Debian's ca-certificates package (20230311+deb12u1, /usr/share/ca-certificates/mozilla);
// DigiCert Global Root G2 also matches the copy Coder embeds
// (coder/coder coderd/azureidentity/roots.go). SHA-256 fingerprints:
//
//	DigiCert Global Root G2                      CB:3C:CB:B7:60:31:E5:E0:13:8F:8D:D3:9A:23:F9:DE:47:FF:C3:5E:43:C1:14:4C:EA:27:D4:6A:5A:B1:CB:5F
//	DigiCert Global Root G3                      31:AD:66:48:F8:10:41:38:C7:38:F3:9E:A4:32:01:33:39:3E:3A:18:CC:02:29:6E:F9:7C:2A:C9:EF:67:31:D0
//	Microsoft RSA Root Certificate Authority 2017 C7:41:F7:0F:4B:2A:8D:88:BF:2E:71:C1:41:22:EF:53:EF:10:EB:A0:CF:A5:E6:4C:FA:20:F4:18:85:30:73:E0
//	Microsoft ECC Root Certificate Authority 2017 35:8D:F3:9D:76:4A:F9:E1:B7:66:E9:C9:72:DF:35:2E:E1:5C:FA:C2:27:AF:6A:D1:D7:0E:8E:4A:6E:DC:BA:02
//
//go:embed roots/*.pem
var rootFS embed.FS

// productionRoots returns the pinned roots, parsed once. Never the system
// pool: any CA a host trusts could otherwise vouch for a forged document.
var productionRoots = sync.OnceValues(func() ([]*x509.Certificate, error) {
	files, err := fs.Glob(rootFS, "roots/*.pem")
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for _, f := range files {
		b, err := rootFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		certs, err := ParsePEMCertificates(b)
		if err != nil || len(certs) != 1 {
			return nil, fmt.Errorf("azure: embedded root %s: %d certificates, %w", f, len(certs), err)
		}
		out = append(out, certs...)
	}
	return out, nil
})

// ParsePEMCertificates parses every CERTIFICATE block of a PEM bundle (for
// --roots and --intermediates). Other block types are skipped; a bundle
// without certificates is an error.
func ParsePEMCertificates(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no PEM certificate found")
	}
	return out, nil
}
