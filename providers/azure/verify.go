package azure

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/smallstep/pkcs7"
)

// maxDocumentBytes bounds an attested document (real ones are about 4 KiB of
// base64); anything larger is refused before it is decoded.
const maxDocumentBytes = 256 << 10

// signerDomains are the names Azure signs attested documents with; the
// signer's DNS SAN (its CN only when it has no SAN, see signerName) must be
// one of them or a subdomain ("westeurope.metadata.azure.com"). Public, US Gov, China and the retired
// German cloud.
var signerDomains = []string{"metadata.azure.com", "metadata.azure.us", "metadata.azure.cn", "metadata.microsoftazure.de"}

// timeLayout is the layout of timeStamp.createdOn/expiresOn, e.g.
// "02/21/20 14:53:22 -0000".
const timeLayout = "01/02/06 15:04:05 -0700"

// document is a parsed, not yet trusted attested document.
type document struct {
	p7      *pkcs7.PKCS7
	signer  *x509.Certificate
	content []byte
}

// signedContent is the part of the signed JSON the engine checks.
type signedContent struct {
	Nonce string `json:"nonce"`
	Plan  struct {
		Name      string `json:"name"`
		Product   string `json:"product"`
		Publisher string `json:"publisher"`
	} `json:"plan"`
	SubscriptionID string `json:"subscriptionId"`
	VMID           string `json:"vmId"`
	TimeStamp      struct {
		CreatedOn string `json:"createdOn"`
		ExpiresOn string `json:"expiresOn"`
	} `json:"timeStamp"`
}

// parseDocument decodes the base64 PKCS#7 of an attested document. It does
// not verify anything; it only makes sure there is exactly one signer whose
// certificate is in the envelope, and works around Azure's digest OID quirk.
func parseDocument(signature string) (doc *document, err error) {
	if len(signature) > maxDocumentBytes {
		return nil, fmt.Errorf("signature is %d bytes, more than %d", len(signature), maxDocumentBytes)
	}
	der, err := decodeBase64(signature)
	if err != nil {
		return nil, fmt.Errorf("signature is not base64: %w", err)
	}
	// The PKCS#7 parser is a third-party ASN.1/BER walker fed with bytes
	// from the network: if it ever trips over its own feet, that must be a
	// rejected document, not a crashed run.
	defer func() {
		if r := recover(); r != nil {
			doc, err = nil, fmt.Errorf("pkcs7: malformed envelope (%v)", r)
		}
	}()
	p7, err := pkcs7.Parse(der)
	if err != nil {
		return nil, fmt.Errorf("pkcs7: %w", err)
	}
	if len(p7.Signers) != 1 {
		return nil, fmt.Errorf("pkcs7: %d signers, want exactly 1", len(p7.Signers))
	}
	signer := p7.GetOnlySigner()
	if signer == nil {
		return nil, errors.New("pkcs7: the signer's certificate is not in the envelope")
	}
	if len(p7.Content) == 0 {
		return nil, errors.New("pkcs7: no signed content")
	}
	// Azure writes sha256WithRSAEncryption where RFC 2315 wants the digest
	// OID sha256. smallstep/pkcs7 accepts that when there are no
	// authenticated attributes (Azure's case); with attributes it would
	// look the OID up as a hash and fail, so normalise it here.
	for i := range p7.Signers {
		if len(p7.Signers[i].AuthenticatedAttributes) > 0 &&
			p7.Signers[i].DigestAlgorithm.Algorithm.Equal(pkcs7.OIDEncryptionAlgorithmRSASHA256) {
			p7.Signers[i].DigestAlgorithm.Algorithm = pkcs7.OIDDigestAlgorithmSHA256
		}
	}
	return &document{p7: p7, signer: signer, content: p7.Content}, nil
}

// decodeBase64 accepts standard base64 with or without padding and with
// line breaks, as documents arrive from files and e-mails.
func decodeBase64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\n', '\r', '\t':
			return -1
		}
		return r
	}, s)
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
}

// Algorithm identifiers that say SHA-1 (or DSA, which PKCS#7 only pairs
// with SHA-1 here) in a SignerInfo, as digest or as signature algorithm.
var sha1OIDs = []asn1.ObjectIdentifier{
	pkcs7.OIDDigestAlgorithmSHA1, pkcs7.OIDEncryptionAlgorithmRSASHA1, pkcs7.OIDDigestAlgorithmECDSASHA1,
	pkcs7.OIDDigestAlgorithmDSA, pkcs7.OIDDigestAlgorithmDSASHA1,
}

// sha2DigestOIDs are the digest algorithms a SignerInfo may name: SHA-2,
// bare or, as Azure writes it, as the RSA or ECDSA signature OID. The
// library reads bare rsaEncryption there as SHA-1, so it is not among them.
var sha2DigestOIDs = []asn1.ObjectIdentifier{
	pkcs7.OIDDigestAlgorithmSHA256, pkcs7.OIDDigestAlgorithmSHA384, pkcs7.OIDDigestAlgorithmSHA512,
	pkcs7.OIDEncryptionAlgorithmRSASHA256, pkcs7.OIDEncryptionAlgorithmRSASHA384, pkcs7.OIDEncryptionAlgorithmRSASHA512,
	pkcs7.OIDDigestAlgorithmECDSASHA256, pkcs7.OIDDigestAlgorithmECDSASHA384, pkcs7.OIDDigestAlgorithmECDSASHA512,
}

// verifySignature checks the signature over the content against the
// signer's public key, and nothing else. A document whose chain is perfect
// but whose content was swapped fails here (Coder's GHSA-6x44-w3xg-hqqf).
// A SHA-1 signature is refused: a SHA-1 collision would let a chosen
// content share a genuine document's signature.
func (d *document) verifySignature() error {
	for _, si := range d.p7.Signers {
		for _, alg := range []asn1.ObjectIdentifier{si.DigestAlgorithm.Algorithm, si.DigestEncryptionAlgorithm.Algorithm} {
			if slices.ContainsFunc(sha1OIDs, alg.Equal) {
				return fmt.Errorf("the content is signed with SHA-1 (%s); Azure signs with SHA-256", alg)
			}
		}
		if !slices.ContainsFunc(sha2DigestOIDs, si.DigestAlgorithm.Algorithm.Equal) {
			return fmt.Errorf("the content's digest algorithm %s is not SHA-256, SHA-384 or SHA-512", si.DigestAlgorithm.Algorithm)
		}
	}
	// A nil trust store makes the library skip the chain, not the signature.
	if err := d.p7.VerifyWithChainAtTime(nil, time.Now()); err != nil {
		return fmt.Errorf("signature over the content does not verify: %w", err)
	}
	return nil
}

// signerName returns the name that makes the signer an Azure metadata
// certificate, or false with the names it does carry. As for TLS, the DNS
// names of the SAN are the certificate's names when it has any, and the CN
// counts only without them: a CN of metadata.azure.com beside a SAN of
// another name does not make an Azure signer.
func signerName(c *x509.Certificate) (string, bool) {
	var names []string
	candidates := c.DNSNames
	if len(candidates) == 0 {
		candidates = []string{c.Subject.CommonName}
	}
	for _, n := range candidates {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, n := range names {
		n = strings.TrimSuffix(strings.ToLower(n), ".")
		for _, d := range signerDomains {
			if n == d || strings.HasSuffix(n, "."+d) {
				return n, true
			}
		}
	}
	return strings.Join(names, ", "), false
}

// checkSigner rejects a signer that is not an Azure metadata certificate:
// its name must be under signerDomains, and it must be what Azure's signer
// certificates are (testdata/realdoc: the 2020 and 2022 leaves alike), an
// end-entity TLS certificate: not a CA, key usage digitalSignature,
// extended key usage serverAuth. A CA or a certificate for another purpose
// that happens to chain to a trusted root is not Azure's signer.
func (d *document) checkSigner() (string, error) {
	c := d.signer
	name, ok := signerName(c)
	switch {
	case !ok:
		return name, fmt.Errorf("signer %q is not under %s", name, strings.Join(signerDomains, ", "))
	case c.BasicConstraintsValid && c.IsCA:
		return name, fmt.Errorf("signer %q is a CA certificate, not an end-entity one", name)
	case c.KeyUsage&x509.KeyUsageDigitalSignature == 0:
		return name, fmt.Errorf("signer %q lacks key usage digitalSignature", name)
	case !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth):
		return name, fmt.Errorf("signer %q lacks extended key usage serverAuth", name)
	}
	return name, nil
}

// checkContent parses the signed content and checks it at now (check,
// then checkCreated): the claims verdict Inspect reports. Prove makes the
// same checks, the clock one after the nonce, as a transient failure. The
// content is returned also when a check fails.
func (d *document) checkContent(now time.Time) (*signedContent, error) {
	c, err := d.parseContent()
	if err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return c, err
	}
	return c, c.checkCreated(now)
}

func (d *document) parseContent() (*signedContent, error) {
	var c signedContent
	if err := json.Unmarshal(d.content, &c); err != nil {
		return nil, fmt.Errorf("signed content is not JSON: %w", err)
	}
	return &c, nil
}

// maxClockAhead is how far in the future a signed createdOn may lie: clocks
// of a node and of Azure's signer drift apart by seconds, not by minutes.
const maxClockAhead = 5 * time.Minute

// check rejects signed content that a genuine document of the pinned
// api-version (IMDSAPIVersion) never has: no subscriptionId or vmId (the
// fields the update server and the subscription cross-check rely on), or
// a createdOn or expiresOn that does not parse. It does not look at the
// clock (checkCreated and checkExpiry do).
func (c *signedContent) check() error {
	for _, f := range []struct{ name, value string }{{"subscriptionId", c.SubscriptionID}, {"vmId", c.VMID}} {
		if strings.TrimSpace(f.value) == "" {
			return fmt.Errorf("signed content has no %s (api-version %s always signs it)", f.name, IMDSAPIVersion)
		}
	}
	if _, err := c.createdOn(); err != nil {
		return err
	}
	_, err := c.expiresOn()
	return err
}

// checkCreated rejects a createdOn more than maxClockAhead after now: the
// clock now comes from is behind Azure's signer. The error wraps
// ErrDocumentNotYetValid.
func (c *signedContent) checkCreated(now time.Time) error {
	created, err := c.createdOn()
	if err != nil {
		return err
	}
	if created.After(now.Add(maxClockAhead)) {
		return fmt.Errorf("%w: timeStamp.createdOn %s is more than %s after %s (check the node clock: it is behind)",
			ErrDocumentNotYetValid, created.UTC().Format(time.RFC3339), maxClockAhead, now.UTC().Format(time.RFC3339))
	}
	return nil
}

// checkExpiry rejects an expiresOn that is not after now. The error wraps
// ErrDocumentExpired.
func (c *signedContent) checkExpiry(now time.Time) error {
	exp, err := c.expiresOn()
	if err != nil {
		return err
	}
	if !exp.After(now) {
		return fmt.Errorf("%w: timeStamp.expiresOn %s is not after %s (check the node clock: it is ahead, unless IMDS served an old document)",
			ErrDocumentExpired, exp.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return nil
}

// createdOn parses the signed creation time.
func (c *signedContent) createdOn() (time.Time, error) {
	t, err := time.Parse(timeLayout, c.TimeStamp.CreatedOn)
	if err != nil {
		return time.Time{}, fmt.Errorf("timeStamp.createdOn %q: %w", c.TimeStamp.CreatedOn, err)
	}
	return t, nil
}

// expiresOn parses the signed expiry.
func (c *signedContent) expiresOn() (time.Time, error) {
	t, err := time.Parse(timeLayout, c.TimeStamp.ExpiresOn)
	if err != nil {
		return time.Time{}, fmt.Errorf("timeStamp.expiresOn %q: %w", c.TimeStamp.ExpiresOn, err)
	}
	return t, nil
}

// trust is a set of trust anchors: the pool for x509, the subjects to tell
// "issuer is a root" from "issuer is missing".
type trust struct {
	pool     *x509.CertPool
	subjects map[string]bool
}

func trustFromCerts(certs []*x509.Certificate) trust {
	t := trust{pool: x509.NewCertPool(), subjects: map[string]bool{}}
	for _, c := range certs {
		t.pool.AddCert(c)
		t.subjects[string(c.RawSubject)] = true
	}
	return t
}

func trustFromPool(p *x509.CertPool) trust {
	t := trust{pool: p, subjects: map[string]bool{}}
	//lint:ignore SA1019 the pool is never the system pool here; Subjects is exact for pools built with AddCert.
	for _, s := range p.Subjects() { //nolint:staticcheck // see above
		t.subjects[string(s)] = true
	}
	return t
}

// chainResult is the outcome of a chain check: err nil means verified;
// missing non-nil means a link could not be found (nothing about the
// document is known to be wrong, the chain simply could not be built).
type chainResult struct {
	chain   []*x509.Certificate
	missing *x509.Certificate // the certificate whose issuer is unavailable
	err     error
}

// chainVerifier checks the signer's chain to the trust anchors at a given
// time, completing it from the leaf's AIA URL when fetch is non-nil.
type chainVerifier struct {
	trust         trust
	intermediates []*x509.Certificate
	fetch         *aiaFetcher // nil: offline
}

// missingLink walks from the leaf towards a root through the known
// certificates and returns the first certificate whose issuer is neither a
// root nor known, provided that certificate names where to get its issuer
// (an AIA URL). A chain ending in a self-signed or AIA-less certificate
// that is not trusted is an unknown root, not a missing link.
func (v *chainVerifier) missingLink(leaf *x509.Certificate, known []*x509.Certificate) *x509.Certificate {
	cur := leaf
	for range 8 {
		if v.trust.subjects[string(cur.RawIssuer)] {
			return nil
		}
		var next *x509.Certificate
		for _, c := range known {
			if bytes.Equal(c.RawSubject, cur.RawIssuer) && !c.Equal(cur) && cur.CheckSignatureFrom(c) == nil {
				next = c
				break
			}
		}
		if next == nil {
			if bytes.Equal(cur.RawIssuer, cur.RawSubject) || len(cur.IssuingCertificateURL) == 0 {
				return nil
			}
			return cur
		}
		cur = next
	}
	return nil
}

// unavailable reports whether the chain could not be checked for want of an
// intermediate that could not be fetched, rather than found wrong: nothing
// then says the document is forged. A caIssuers URL off the allow-list, or
// one that served a certificate which did not sign the link, says it is.
func (r chainResult) unavailable() bool {
	return r.missing != nil && !errors.Is(r.err, errAIANotAllowed) && !errors.Is(r.err, errAIANotIssuer)
}

// verify checks d's signer chain at time at. Certificates fetched from AIA
// are added to d.p7 so that the final library check sees them too. All
// fetches of one verification share aiaBudget.
func (v *chainVerifier) verify(ctx context.Context, d *document, at time.Time) chainResult {
	ctx, cancel := context.WithTimeout(ctx, aiaBudget)
	defer cancel()
	known := append([]*x509.Certificate{}, d.p7.Certificates...)
	known = append(known, v.intermediates...)
	if v.fetch != nil {
		for range 3 {
			m := v.missingLink(d.signer, known)
			if m == nil {
				break
			}
			c, err := v.fetch.issuer(ctx, m)
			if err != nil {
				return chainResult{missing: m, err: err}
			}
			known = append(known, c)
		}
	}
	if m := v.missingLink(d.signer, known); m != nil {
		return chainResult{missing: m, err: fmt.Errorf("issuer %q of %q is not available (caIssuers %s)",
			m.Issuer.CommonName, m.Subject.CommonName, strings.Join(m.IssuingCertificateURL, " "))}
	}
	inter := x509.NewCertPool()
	for _, c := range known {
		inter.AddCert(c)
	}
	chains, err := d.signer.Verify(x509.VerifyOptions{
		Roots:         v.trust.pool,
		Intermediates: inter,
		CurrentTime:   at,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		return chainResult{err: fmt.Errorf("chain of %q: %w", d.signer.Subject.CommonName, err)}
	}
	d.p7.Certificates = known
	return chainResult{chain: chains[0]}
}

// describeChain names the certificates of a verified chain, leaf first.
func describeChain(chain []*x509.Certificate) string {
	names := make([]string, 0, len(chain))
	for _, c := range chain {
		names = append(names, c.Subject.CommonName)
	}
	return strings.Join(names, " → ")
}
