package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the paths of the files the components are started with. Every
// key and certificate is made fresh for one plane and trusted nowhere else.
type pki struct {
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
func writePKI(dir string) (*pki, error) {
	p := &pki{
		caCert: filepath.Join(dir, "ca.crt"), caKey: filepath.Join(dir, "ca.key"),
		serverCert: filepath.Join(dir, "apiserver.crt"), serverKey: filepath.Join(dir, "apiserver.key"),
		adminCert: filepath.Join(dir, "admin.crt"), adminKey: filepath.Join(dir, "admin.key"),
		kcmCert: filepath.Join(dir, "kcm.crt"), kcmKey: filepath.Join(dir, "kcm.key"),
		saKey: filepath.Join(dir, "sa.key"), saPub: filepath.Join(dir, "sa.pub"),
	}
	now := time.Now()
	caKey, err := newKey()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "registration-engine-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	caDER, ca, err := sign(caTmpl, caTmpl, caKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("ca: %w", err)
	}
	if err := writeCert(p.caCert, caDER); err != nil {
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
		key, err := newKey()
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
		for _, h := range l.hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
		der, _, err := sign(tmpl, ca, key, caKey)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.subject.CommonName, err)
		}
		if err := writeCert(l.cert, der); err != nil {
			return nil, err
		}
		if err := writeKey(l.key, key); err != nil {
			return nil, err
		}
	}

	saKey, err := newKey()
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

func newKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return k, nil
}

func sign(tmpl, parent *x509.Certificate, key, parentKey crypto.Signer) ([]byte, *x509.Certificate, error) {
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, fmt.Errorf("serial: %w", err)
	}
	tmpl.SerialNumber = sn
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parse: %w", err)
	}
	return der, cert, nil
}

func writeCert(path string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("write certificate: %w", err)
	}
	return nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("marshal key: %w", err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("write key: %w", err)
	}
	return nil
}
