package controlplane

import (
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rancher/registration-engine/internal/pki"
)

// pkiFiles holds the paths of the files the components are started with. Every
// key and certificate is made fresh for one plane and trusted nowhere else.
type pkiFiles struct {
	caCert, caKey         string
	serverCert, serverKey string
	adminCert, adminKey   string
	kcmCert, kcmKey       string
	saKey, saPub          string
}

// apiserverNames are the serving certificate's SANs: loopback, where the
// tests connect, and the in-cluster names a pod would use.
var apiserverNames = []string{
	"127.0.0.1", "10.0.0.1", "localhost",
	"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
}

// writePKI generates a CA, the API server's serving certificate, client
// certificates for the admin (group system:masters) and the
// controller-manager (user system:kube-controller-manager, which the
// bootstrap RBAC policy binds), and the service-account signing key, and
// writes them as PEM files under dir.
func writePKI(dir string) (*pkiFiles, error) {
	p := &pkiFiles{
		caCert: filepath.Join(dir, "ca.crt"), caKey: filepath.Join(dir, "ca.key"),
		serverCert: filepath.Join(dir, "apiserver.crt"), serverKey: filepath.Join(dir, "apiserver.key"),
		adminCert: filepath.Join(dir, "admin.crt"), adminKey: filepath.Join(dir, "admin.key"),
		kcmCert: filepath.Join(dir, "kcm.crt"), kcmKey: filepath.Join(dir, "kcm.key"),
		saKey: filepath.Join(dir, "sa.key"), saPub: filepath.Join(dir, "sa.pub"),
	}
	now := time.Now()
	caKey, err := pki.Key()
	if err != nil {
		return nil, err
	}
	caTmpl := pki.CA("registration-engine-test-ca", "", now.Add(-time.Hour), now.Add(24*time.Hour))
	ca, err := pki.Sign(caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	if err := writeCert(p.caCert, ca.Raw); err != nil {
		return nil, err
	}
	if err := writeKey(p.caKey, caKey); err != nil {
		return nil, err
	}

	leaves := []struct {
		cert, key string
		subject   pkix.Name
		usage     x509.ExtKeyUsage
		hosts     []string
	}{
		{p.serverCert, p.serverKey, pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth, apiserverNames},
		{p.adminCert, p.adminKey, pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}}, x509.ExtKeyUsageClientAuth, nil},
		{p.kcmCert, p.kcmKey, pkix.Name{CommonName: "system:kube-controller-manager"}, x509.ExtKeyUsageClientAuth, nil},
	}
	for _, l := range leaves {
		key, err := pki.Key()
		if err != nil {
			return nil, err
		}
		tmpl := &x509.Certificate{
			Subject:     l.subject,
			NotBefore:   now.Add(-time.Hour),
			NotAfter:    now.Add(24 * time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{l.usage},
		}
		pki.SetHosts(tmpl, l.hosts...)
		cert, err := pki.Sign(tmpl, ca, key.Public(), caKey)
		if err != nil {
			return nil, err
		}
		if err := writeCert(l.cert, cert.Raw); err != nil {
			return nil, err
		}
		if err := writeKey(l.key, key); err != nil {
			return nil, err
		}
	}

	saKey, err := pki.Key()
	if err != nil {
		return nil, err
	}
	if err := writeKey(p.saKey, saKey); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	if err := os.WriteFile(p.saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	return p, nil
}

func writeCert(path string, der []byte) error {
	if err := os.WriteFile(path, pki.CertPEM(der), 0o600); err != nil {
		return fmt.Errorf("write certificate: %w", err)
	}
	return nil
}

func writeKey(path string, key crypto.Signer) error {
	b, err := pki.KeyPEM(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write key: %w", err)
	}
	return nil
}
