package azure

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// DefaultAIAAllowedHosts are the hosts Azure's metadata certificates name
// in their AIA caIssuers URLs (Microsoft PKI and DigiCert, per Microsoft's
// "Azure Certificate Authority details"). Nothing else is ever fetched: the
// URL comes from a certificate a peer sent, so an open fetch would let a
// forged document make the engine request arbitrary URLs (SSRF).
var DefaultAIAAllowedHosts = []string{"www.microsoft.com", "caissuers.microsoft.com", "cacerts.digicert.com", "cacerts.digicert.cn"}

const (
	// maxAIABytes bounds a fetched certificate (real ones are under 2 KiB).
	maxAIABytes = 64 << 10
	// aiaTimeout bounds one fetch, including redirects.
	aiaTimeout = 10 * time.Second
	// maxAIARedirects bounds redirects, each of which must stay on the allow-list.
	maxAIARedirects = 3
	// maxAIAURLs is how many caIssuers URLs of one certificate are tried:
	// Azure's name one, and a forged certificate could name dozens.
	maxAIAURLs = 2
	// aiaBudget bounds all fetches of one chain verification together.
	aiaBudget = 15 * time.Second
)

// errAIANotAllowed marks a caIssuers URL outside the allow-list. The chain
// then cannot be completed, and the document is rejected rather than
// reported as "unavailable": no genuine Azure certificate points there.
var errAIANotAllowed = errors.New("caIssuers URL not on the allow-list")

// errAIANotIssuer marks a certificate fetched from a caIssuers URL that did
// not sign the certificate naming the URL: the issuer Azure publishes is
// not the one that issued it, so the certificate is forged, not merely
// incomplete.
var errAIANotIssuer = errors.New("the certificate at the caIssuers URL did not issue it")

// aiaFetcher downloads issuing CA certificates from AIA URLs on the
// allow-list and caches them for the life of the process (one run).
type aiaFetcher struct {
	client  *http.Client
	allowed []string

	mu    sync.Mutex
	cache map[string]*x509.Certificate
}

func newAIAFetcher(client *http.Client, allowed []string) *aiaFetcher {
	if client == nil {
		client = &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment, // the internet may need the proxy; IMDS never does
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: 5 * time.Second,
		}}
	}
	if allowed == nil {
		allowed = DefaultAIAAllowedHosts
	}
	f := &aiaFetcher{allowed: allowed, cache: map[string]*x509.Certificate{}}
	c := *client
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxAIARedirects {
			return fmt.Errorf("more than %d redirects", maxAIARedirects)
		}
		if !f.isAllowed(req.URL) {
			return fmt.Errorf("redirect to %s: %w", req.URL.Redacted(), errAIANotAllowed)
		}
		return nil
	}
	f.client = &c
	return f
}

// isAllowed accepts http(s) URLs whose host is on the list. An entry
// without a port allows only the default ports; "host:port" allows exactly
// that port (tests serve intermediates from 127.0.0.1:port).
func (f *aiaFetcher) isAllowed(u *url.URL) bool {
	if u.Scheme != "http" && u.Scheme != "https" || u.User != nil {
		return false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	for _, a := range f.allowed {
		a = strings.ToLower(a)
		if h, p, err := net.SplitHostPort(a); err == nil {
			if h == host && p == port {
				return true
			}
			continue
		}
		if a == host && (port == "" || port == "80" || port == "443") {
			return true
		}
	}
	return false
}

// issuer fetches the issuing CA of c from its AIA URLs (the first that
// works, of at most maxAIAURLs) and checks that it really signed c.
func (f *aiaFetcher) issuer(ctx context.Context, c *x509.Certificate) (*x509.Certificate, error) {
	var errs []error
	for _, raw := range c.IssuingCertificateURL[:min(len(c.IssuingCertificateURL), maxAIAURLs)] {
		ic, err := f.get(ctx, raw)
		if err == nil {
			if err = c.CheckSignatureFrom(ic); err == nil {
				return ic, nil
			}
			err = fmt.Errorf("%s: %w %q: %w", raw, errAIANotIssuer, c.Subject.CommonName, err)
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%q names no caIssuers URL", c.Subject.CommonName)
	}
	return nil, errors.Join(errs...)
}

func (f *aiaFetcher) get(ctx context.Context, raw string) (*x509.Certificate, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("caIssuers URL: %w", err)
	}
	if !f.isAllowed(u) {
		return nil, fmt.Errorf("%s: %w", u.Redacted(), errAIANotAllowed)
	}
	f.mu.Lock()
	c, ok := f.cache[raw]
	f.mu.Unlock()
	if ok {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(ctx, aiaTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", u.Redacted(), err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch %s: status %d", u.Redacted(), resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAIABytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", u.Redacted(), err)
	}
	if len(body) > maxAIABytes {
		return nil, fmt.Errorf("fetch %s: more than %d bytes", u.Redacted(), maxAIABytes)
	}
	c, err = x509.ParseCertificate(body)
	if err != nil {
		// Some CAs serve PEM under .crt.
		certs, perr := ParsePEMCertificates(body)
		if perr != nil {
			return nil, fmt.Errorf("fetch %s: not a certificate: %w", u.Redacted(), err)
		}
		c = certs[0]
	}
	f.mu.Lock()
	f.cache[raw] = c
	f.mu.Unlock()
	return c, nil
}
