package azure

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// InspectOptions tune Inspect for a document a customer sent, possibly
// years old.
type InspectOptions struct {
	// At is the time the chain is checked at; zero means now. An old
	// document verifies at its createdOn even though its leaf has expired.
	At time.Time
	// Roots replace the pinned production roots when non-empty (old
	// documents chain to roots that have since been retired).
	Roots []*x509.Certificate
	// Intermediates complete the chain without fetching them.
	Intermediates []*x509.Certificate
	// Offline forbids fetching intermediates from the leaf's AIA URL; a
	// missing one is then reported as unavailable, not as a forgery.
	Offline bool
	// AIAClient and AIAAllowedHosts are as in Config.
	AIAClient       *http.Client
	AIAAllowedHosts []string
}

// Verdict is one of the four independent checks of a document.
type Verdict struct {
	OK bool
	// Unavailable: the check could not be made (an intermediate could not
	// be obtained); the document is neither proven nor disproven.
	Unavailable bool
	Detail      string
}

// InspectReport is what Inspect found. Content is the signed JSON; it is
// shown whatever the verdicts say, so treat it as unverified unless OK.
type InspectReport struct {
	Content   []byte
	Signature Verdict
	Signer    Verdict
	Chain     Verdict
	// Claims is the check Prove makes of the signed content: subscriptionId
	// and vmId present, createdOn not more than 5 minutes after At.
	Claims Verdict
	// SignerCert is the certificate in the envelope that signed the content.
	SignerCert *x509.Certificate
	// At is the time the chain was checked at.
	At time.Time
}

// OK reports whether all four verdicts hold: whether Prove would accept
// the document at At (the nonce and the subscription aside).
func (r *InspectReport) OK() bool {
	return r.Signature.OK && r.Signer.OK && r.Chain.OK && r.Claims.OK
}

// Inspect verifies an attested document offline or with AIA fetches, the
// way Prove does, but reports the signature over the content, the signer's
// name, the chain and the signed content's claims separately. input is the IMDS answer
// ({"encoding":"pkcs7","signature":…}), the bare base64 signature, or an
// instanceData <document>…</document>. The error is non-nil only when input
// is not a document at all; a forged or broken document is a report whose
// verdicts say so.
func Inspect(ctx context.Context, input []byte, opts InspectOptions) (*InspectReport, error) {
	sig, err := extractSignature(input)
	if err != nil {
		return nil, fmt.Errorf("azure: %w: %w", ErrAttestation, err)
	}
	doc, err := parseDocument(sig)
	if err != nil {
		return nil, fmt.Errorf("azure: %w: %w", ErrAttestation, err)
	}
	at := opts.At
	if at.IsZero() {
		at = time.Now()
	}
	r := &InspectReport{Content: doc.content, SignerCert: doc.signer, At: at}

	if err := doc.verifySignature(); err != nil {
		r.Signature = Verdict{Detail: err.Error()}
	} else {
		r.Signature = Verdict{OK: true, Detail: "the content is signed by the key of the envelope's certificate"}
	}
	if name, err := doc.checkSigner(); err != nil {
		r.Signer = Verdict{Detail: err.Error()}
	} else {
		r.Signer = Verdict{OK: true, Detail: name}
	}

	var tr trust
	if len(opts.Roots) > 0 {
		tr = trustFromCerts(opts.Roots)
	} else {
		roots, err := productionRoots()
		if err != nil {
			return nil, fmt.Errorf("azure: %w: pinned roots: %w", ErrConfig, err)
		}
		tr = trustFromCerts(roots)
	}
	v := &chainVerifier{trust: tr, intermediates: opts.Intermediates}
	if !opts.Offline {
		v.fetch = newAIAFetcher(opts.AIAClient, opts.AIAAllowedHosts)
	}
	res := v.verify(ctx, doc, at)
	switch {
	case res.unavailable():
		how := "run without --offline or pass it with --intermediates"
		if !opts.Offline {
			how = "pass it with --intermediates"
		}
		r.Chain = Verdict{Unavailable: true, Detail: fmt.Sprintf("intermediate unavailable: %v; %s", res.err, how)}
	case res.err != nil:
		r.Chain = Verdict{Detail: res.err.Error()}
	default:
		r.Chain = Verdict{OK: true, Detail: fmt.Sprintf("%s, valid at %s", describeChain(res.chain), at.UTC().Format(time.RFC3339))}
	}
	if c, err := doc.checkContent(at); err != nil {
		r.Claims = Verdict{Detail: err.Error()}
	} else {
		r.Claims = Verdict{OK: true, Detail: fmt.Sprintf("subscriptionId and vmId signed, createdOn %s", c.TimeStamp.CreatedOn)}
	}
	return r, nil
}

// extractSignature finds the base64 PKCS#7 in any of the three input forms.
func extractSignature(input []byte) (string, error) {
	if len(input) > 4*maxDocumentBytes {
		return "", fmt.Errorf("input is %d bytes, more than %d", len(input), 4*maxDocumentBytes)
	}
	s := bytes.TrimSpace(input)
	if rest, ok := bytes.CutPrefix(s, []byte("<document>")); ok {
		// The VM client appends a <repoformat> line after </document>.
		end := bytes.Index(rest, []byte("</document>"))
		if end < 0 {
			return "", errors.New("<document> without </document>")
		}
		s = bytes.TrimSpace(rest[:end])
	}
	if len(s) > 0 && s[0] == '{' {
		var v struct {
			Encoding     string `json:"encoding"`
			Signature    string `json:"signature"`
			AttestedData struct {
				Signature string `json:"signature"`
			} `json:"attestedData"`
		}
		if err := json.Unmarshal(s, &v); err != nil {
			return "", fmt.Errorf("input looks like JSON but is not: %w", err)
		}
		switch {
		case v.AttestedData.Signature != "":
			return v.AttestedData.Signature, nil
		case v.Signature != "" && (v.Encoding == "" || v.Encoding == "pkcs7"):
			return v.Signature, nil
		default:
			return "", errors.New("JSON without attestedData.signature or a pkcs7 signature")
		}
	}
	if len(s) == 0 {
		return "", errors.New("empty input")
	}
	return string(s), nil
}

// WriteText prints the report for a person: the signer certificate, the
// signed JSON pretty-printed, then one line per verdict.
func (r *InspectReport) WriteText(w io.Writer) error {
	var b strings.Builder
	if c := r.SignerCert; c != nil {
		fmt.Fprintf(&b, "signer certificate: %s\n  issued by: %s\n  valid:     %s to %s\n  names:     %s\n",
			c.Subject.String(), c.Issuer.String(), c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339),
			strings.Join(c.DNSNames, ", "))
		if len(c.IssuingCertificateURL) > 0 {
			fmt.Fprintf(&b, "  caIssuers: %s\n", strings.Join(c.IssuingCertificateURL, " "))
		}
	}
	b.WriteString("signed content:\n")
	var pretty bytes.Buffer
	if json.Indent(&pretty, r.Content, "", "  ") == nil {
		b.Write(pretty.Bytes())
	} else {
		fmt.Fprintf(&b, "%q (not JSON)", r.Content)
	}
	b.WriteString("\n")
	var c signedContent
	if json.Unmarshal(r.Content, &c) == nil && c.TimeStamp.ExpiresOn != "" {
		if exp, err := time.Parse(timeLayout, c.TimeStamp.ExpiresOn); err == nil && !exp.After(r.At) {
			fmt.Fprintf(&b, "note: the document expired at %s, before %s\n", exp.UTC().Format(time.RFC3339), r.At.UTC().Format(time.RFC3339))
		}
	}
	for _, v := range []struct {
		name string
		v    Verdict
	}{{"signature", r.Signature}, {"signer", r.Signer}, {"chain", r.Chain}, {"claims", r.Claims}} {
		fmt.Fprintf(&b, "%-10s %-11s %s\n", v.name+":", v.v.State(), v.v.Detail)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// State is the verdict in one word: OK, UNAVAILABLE or FAILED.
func (v Verdict) State() string {
	switch {
	case v.OK:
		return "OK"
	case v.Unavailable:
		return "UNAVAILABLE"
	default:
		return "FAILED"
	}
}
