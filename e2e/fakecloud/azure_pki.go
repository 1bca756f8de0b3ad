package fakecloud

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"sync"
	"time"

	"github.com/smallstep/pkcs7"

	"github.com/rancher/registration-engine/internal/pki"
)

// azureCA is one root → intermediate pair of the fake attestation PKI. The
// fake keeps two: the trusted one (whose root a test injects into the
// verifier) and a look-alike whose root nobody trusts (fault UnknownRoot).
type azureCA struct {
	root, inter       *x509.Certificate
	rootKey, interKey crypto.Signer
}

// leafKind selects which signer certificate a document is signed with.
type leafKind int

const (
	leafGood        leafKind = iota // CN metadata.azure.com under the trusted root
	leafWrongSigner                 // trusted chain, but a name Azure never uses
	leafUnknownRoot                 // the right name under a root nobody trusts
	leafExpired                     // the right name, validity over a day ago
)

type leafKey struct {
	host string // the AIA host the leaf points at
	kind leafKind
}

// azurePKI signs attested documents the way Azure does: RSA leaf, one
// SignerInfo without authenticated attributes, digestAlgorithm set to
// sha256WithRSAEncryption (a signature OID where RFC 2315 wants a digest OID),
// digestEncryptionAlgorithm rsaEncryption, and only the leaf in the envelope.
type azurePKI struct {
	trusted, untrusted azureCA
	leafKey            *rsa.PrivateKey

	mu     sync.Mutex
	leaves map[leafKey]*x509.Certificate
}

// The CA validity starts well in the past so a leaf that has already expired
// (fault ExpiredLeaf) still chains at a time inside its own validity.
const caBackdate = 30 * 24 * time.Hour

func newAzurePKI() (*azurePKI, error) {
	trusted, err := newAzureCA("Fake Azure Root G2", "Fake Azure RSA TLS Issuing CA 01")
	if err != nil {
		return nil, err
	}
	untrusted, err := newAzureCA("Untrusted Look-alike Root", "Fake Azure RSA TLS Issuing CA 01")
	if err != nil {
		return nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	return &azurePKI{trusted: trusted, untrusted: untrusted, leafKey: key, leaves: map[leafKey]*x509.Certificate{}}, nil
}

func newAzureCA(rootCN, interCN string) (azureCA, error) {
	now := time.Now()
	rootKey, err := pki.Key()
	if err != nil {
		return azureCA{}, err
	}
	rootTmpl := &x509.Certificate{
		SerialNumber:          pki.Serial(),
		Subject:               pkix.Name{CommonName: rootCN, Organization: []string{"fakecloud"}},
		NotBefore:             now.Add(-caBackdate),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	root, err := pki.Sign(rootTmpl, rootTmpl, rootKey.Public(), rootKey)
	if err != nil {
		return azureCA{}, err
	}
	interKey, err := pki.Key()
	if err != nil {
		return azureCA{}, err
	}
	interTmpl := &x509.Certificate{
		SerialNumber:          pki.Serial(),
		Subject:               pkix.Name{CommonName: interCN, Organization: []string{"fakecloud"}},
		NotBefore:             now.Add(-caBackdate),
		NotAfter:              now.Add(5 * 365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	inter, err := pki.Sign(interTmpl, root, interKey.Public(), rootKey)
	if err != nil {
		return azureCA{}, err
	}
	return azureCA{root: root, inter: inter, rootKey: rootKey, interKey: interKey}, nil
}

// aiaPath is where IMDSHandler serves the intermediate of each chain; the
// leaf's AIA caIssuers URL points there, as Azure's leaves point at
// www.microsoft.com/pkiops or cacerts.digicert.com.
const (
	aiaPath          = "/aia/intermediate.crt"
	aiaUntrustedPath = "/aia/untrusted-intermediate.crt"
)

// leaf returns the signer certificate of kind for documents served on host,
// issuing it on first use. The leaf is per host because its AIA URL must name
// the address the client used to reach the fake.
func (p *azurePKI) leaf(host, region string, kind leafKind) (*x509.Certificate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := leafKey{host: host, kind: kind}
	if c, ok := p.leaves[k]; ok {
		return c, nil
	}
	now := time.Now()
	cn := "metadata.azure.com"
	ca := p.trusted
	path := aiaPath
	notBefore, notAfter := now.Add(-time.Hour), now.Add(365*24*time.Hour)
	switch kind {
	case leafWrongSigner:
		cn = "metadata.azure.com.attacker.example"
	case leafUnknownRoot:
		ca = p.untrusted
		path = aiaUntrustedPath
	case leafExpired:
		notBefore, notAfter = now.Add(-3*24*time.Hour), now.Add(-24*time.Hour)
	}
	dns := []string{cn}
	if kind != leafWrongSigner && region != "" {
		dns = []string{region + ".metadata.azure.com", cn}
	}
	tmpl := &x509.Certificate{
		SerialNumber:          pki.Serial(),
		Subject:               pkix.Name{CommonName: cn},
		DNSNames:              dns,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IssuingCertificateURL: []string{"http://" + host + path},
	}
	c, err := pki.Sign(tmpl, ca.inter, p.leafKey.Public(), ca.interKey)
	if err != nil {
		return nil, err
	}
	p.leaves[k] = c
	return c, nil
}

// Forgery describes an attested document the fake IMDS signs instead of a
// genuine one, each field one thing a genuine Azure document never does, so
// that tests can show the verifier refuses it. The zero value forges
// nothing. Every forged document gets a signer certificate of its own.
type Forgery struct {
	// SelfSigned makes the signer (named metadata.azure.com) its own issuer.
	SelfSigned bool
	// ForeignIssuer has the look-alike CA issue the signer, whose
	// intermediate carries the trusted one's name, while the signer's AIA
	// URL names the trusted intermediate, which did not sign it.
	ForeignIssuer bool
	// SignerIsCA makes the signer certificate a CA.
	SignerIsCA bool
	// NoUsage leaves key usage and extended key usage out of the signer.
	NoUsage bool
	// SAN, when set, replaces the signer's DNS names; its CN stays
	// metadata.azure.com.
	SAN []string
	// AIAPaths, when set, replace the signer's caIssuers URLs with these
	// paths on the fake IMDS (which answers 404 for any unknown one).
	AIAPaths []string
	// SHA1 signs the content with SHA-1 instead of SHA-256.
	SHA1 bool
	// CreatedAhead dates createdOn (and expiresOn with it) this far ahead;
	// negative dates both back, so that expiresOn may have passed.
	CreatedAhead time.Duration
	// Omit leaves these keys out of the signed content ("subscriptionId",
	// "vmId").
	Omit []string
}

// forgedLeaf issues a fresh signer certificate for f, for documents served
// on host; it carries the PKI's leaf key, which signs the document.
func (p *azurePKI) forgedLeaf(host, region string, f Forgery) (*x509.Certificate, error) {
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          pki.Serial(),
		Subject:               pkix.Name{CommonName: "metadata.azure.com"},
		DNSNames:              []string{region + ".metadata.azure.com", "metadata.azure.com"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IssuingCertificateURL: []string{"http://" + host + aiaPath},
	}
	if f.SAN != nil {
		tmpl.DNSNames = f.SAN
	}
	if f.AIAPaths != nil {
		tmpl.IssuingCertificateURL = nil
		for _, path := range f.AIAPaths {
			tmpl.IssuingCertificateURL = append(tmpl.IssuingCertificateURL, "http://"+host+path)
		}
	}
	if f.NoUsage {
		tmpl.KeyUsage, tmpl.ExtKeyUsage = 0, nil
	}
	if f.SignerIsCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	parent, parentKey := p.trusted.inter, p.trusted.interKey
	switch {
	case f.SelfSigned:
		tmpl.IssuingCertificateURL = nil
		parent, parentKey = tmpl, p.leafKey
	case f.ForeignIssuer:
		parent, parentKey = p.untrusted.inter, p.untrusted.interKey
	}
	return pki.Sign(tmpl, parent, p.leafKey.Public(), parentKey)
}

// signWith wraps content in a PKCS#7 SignedData shaped like Azure's, with
// SHA-1 in place of SHA-256 when sha1 is set.
func (p *azurePKI) signWith(content []byte, leaf *x509.Certificate, sha1 bool) ([]byte, error) {
	digest, quirkOID := pkcs7.OIDDigestAlgorithmSHA256, pkcs7.OIDEncryptionAlgorithmRSASHA256
	if sha1 {
		digest, quirkOID = pkcs7.OIDDigestAlgorithmSHA1, pkcs7.OIDEncryptionAlgorithmRSASHA1
	}
	sd, err := pkcs7.NewSignedData(content)
	if err != nil {
		return nil, err
	}
	sd.SetDigestAlgorithm(digest)
	sd.SetEncryptionAlgorithm(pkcs7.OIDEncryptionAlgorithmRSA)
	if err := sd.SignWithoutAttr(leaf, p.leafKey, pkcs7.SignerInfoConfig{}); err != nil {
		return nil, err
	}
	// Azure's quirk: the signature OID stands where the digest OID belongs,
	// both in the SignedData's digest set and in the SignerInfo.
	quirk := pkix.AlgorithmIdentifier{Algorithm: quirkOID, Parameters: asn1.NullRawValue}
	raw := sd.GetSignedData()
	for i := range raw.DigestAlgorithmIdentifiers {
		raw.DigestAlgorithmIdentifiers[i] = quirk
	}
	for i := range raw.SignerInfos {
		raw.SignerInfos[i].DigestAlgorithm = quirk
		raw.SignerInfos[i].DigestEncryptionAlgorithm = pkix.AlgorithmIdentifier{Algorithm: pkcs7.OIDEncryptionAlgorithmRSA, Parameters: asn1.NullRawValue}
	}
	return sd.Finish()
}

// tamper changes one byte of the signed content inside der: the first
// character of the vmId value, a hex digit, becomes another hex digit. The
// envelope and the JSON still parse; the signature no longer matches.
func tamper(der, content []byte) ([]byte, error) {
	i := bytes.Index(der, content)
	v := bytes.Index(content, []byte(`"vmId":"`))
	if i < 0 || v < 0 || v+len(`"vmId":"`) >= len(content) {
		return nil, errors.New("fakecloud: signed content not found in envelope")
	}
	j := i + v + len(`"vmId":"`)
	out := bytes.Clone(der)
	if out[j] == '0' {
		out[j] = '1'
	} else {
		out[j] = '0'
	}
	return out, nil
}

func derToPEM(c *x509.Certificate) []byte { return pki.CertPEM(c.Raw) }
