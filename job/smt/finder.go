package smt

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/pause"
	"github.com/rancher/registration-engine/job/hostname"
	"github.com/rancher/registration-engine/job/regionconfig"
)

// Defaults applied by Find to zero Finder fields. They are cloudregister's
// values, except CertTimeout (it has none) and MaxBody (it has no limit).
var (
	DefaultPassTimeouts = []time.Duration{15 * time.Second, 7500 * time.Millisecond, 5 * time.Second}
	DefaultPassPauses   = []time.Duration{20 * time.Second, 10 * time.Second}
)

// DefaultDomains are the domains an update server's name must lie under
// when Finder.Domains is empty: the names SUSE's region data serves for
// Azure (smt-azure.susecloud.net and its siblings). UPDATE_SERVER_DOMAINS
// replaces it.
var DefaultDomains = []string{"susecloud.net"}

// ClusterDomain is the cluster DNS domain no update server's name may lie
// under, whatever Finder.Domains says, so region data cannot redirect a
// Service such as kubernetes.default.svc.cluster.local. It is AKS's, which
// cannot be changed there; the engine has no setting for another.
const ClusterDomain = "cluster.local"

// CheckDomain refuses an allowed domain (UPDATE_SERVER_DOMAINS, the chart's
// updateServerDomains) that is the cluster domain, lies under it
// (svc.cluster.local) or covers it (local): the chart copies the list into
// the CoreDNS admission policy, which would then admit, under the engine's
// token, an entry for kubernetes.default.svc.cluster.local. domain is
// normalised (hostname.Normalize). The error wraps ErrClusterDomain.
func CheckDomain(domain string) error {
	if hostname.Under(domain, ClusterDomain) || hostname.Under(ClusterDomain, domain) {
		return fmt.Errorf("%q: %w: it is, lies under or covers %s, where the cluster's Services resolve (kubernetes.default.svc.%s); list only the update servers' domains, such as %s",
			domain, ErrClusterDomain, ClusterDomain, ClusterDomain, strings.Join(DefaultDomains, ", "))
	}
	return nil
}

// Default ports, timeouts and body limit, applied like the pass defaults.
const (
	DefaultPort          = 443
	DefaultHTTPPort      = 80
	DefaultProbeTimeout  = 2 * time.Second
	DefaultHealthTimeout = 2 * time.Second
	DefaultCertTimeout   = 5 * time.Second
	DefaultMaxBody       = 1 << 20
)

// UpdateServer is the result of phase 4: the update server the cluster will
// register with, with a certificate that matched its advertised fingerprint.
type UpdateServer struct {
	// Name is the server's FQDN (SMTserverName): the registration URL is
	// https://<Name>, never an IP, because the cluster trusts CertPEM for
	// that name and the URL must not change when the address does.
	Name string
	// IPv4 and IPv6 are the server's addresses as the region data gave
	// them (zero when absent); Reached is the one the run uses.
	IPv4, IPv6 netip.Addr
	// Registry, Region and Fingerprint are as in the region data.
	Registry, Region, Fingerprint string
	// CertPEM is the server's certificate, the first PEM block only, whose
	// SHA-1 equals Fingerprint.
	CertPEM []byte
	// Reached is the address that answered the health check: with both an
	// IPv6 and an IPv4 address, the winner of the Happy Eyeballs race the
	// check runs first (IPv6 with a head start), or the other one when the
	// winner failed the check. It is the address the cluster reaches the
	// server by (phase 5), so the two families are raced once per run and
	// an IPv6 address that drops every packet costs one head start.
	Reached netip.Addr
}

// Config is what a person sets of phase 4: REGION_SERVER_PORT,
// UPDATE_SERVER_HTTPS_PORT, UPDATE_SERVER_HTTP_PORT, REGION_PASS_TIMEOUTS,
// REGION_PASS_PAUSES, UPDATE_SERVER_DOMAINS and
// UPDATE_SERVER_ALLOW_LOOPBACK (the settings table in job owns their names
// and help; Validate owns the rule that binds the passes and their
// pauses). Zero fields take the defaults below when Find runs.
type Config struct {
	// RegionPort is the region servers' HTTPS port; 0 means 443. It is
	// also the port of the IPv6 access probe.
	RegionPort int
	// HTTPSPort and HTTPPort are the update servers' ports for the health
	// check and certificate download; 0 means 443 and 80.
	HTTPSPort, HTTPPort int

	// PassTimeouts are the per-request timeouts of each pass over the
	// region servers; their number is the number of passes. Empty means
	// 15 s, 7.5 s, 5 s.
	PassTimeouts []time.Duration
	// PassPauses are the waits between passes (the last one repeats if
	// there are more passes); nil means 20 s, 10 s. They give a node whose
	// network is still coming up time to get there.
	PassPauses []time.Duration

	// Domains are the domains an update server's name must lie under (the
	// domain itself or a name below it); empty means DefaultDomains. The
	// region data decides what name the whole cluster resolves to the
	// update server's address (phase 6 writes it into CoreDNS ahead of the
	// kubernetes plugin), so a name outside them is refused like a bad
	// sibling. A name under the cluster domain (cluster.local) is refused
	// even when Domains includes it.
	Domains []string
	// AllowLoopback accepts update servers at loopback addresses, which
	// Find otherwise refuses like link-local ones. For tests and the fake
	// cloud only, whose update servers listen on 127.0.0.x and [::1]; Find
	// logs a warning on every run that has it.
	AllowLoopback bool
}

// Validate checks the passes as a person configured them (package job
// calls it at load, with the defaults filled in): at least one pass, and
// a pause before each pass after the first unless no pause is given at
// all. Code that builds a Finder may leave both empty for the defaults
// and need not call it.
func (c Config) Validate() error {
	var problems []error
	if len(c.PassTimeouts) == 0 {
		problems = append(problems, errors.New("REGION_PASS_TIMEOUTS needs at least one duration"))
	}
	if len(c.PassPauses) > 0 && len(c.PassPauses) < len(c.PassTimeouts)-1 {
		problems = append(problems, fmt.Errorf("REGION_PASS_PAUSES has %d pauses for %d passes; give %d", len(c.PassPauses), len(c.PassTimeouts), len(c.PassTimeouts)-1))
	}
	return errors.Join(problems...)
}

// Finder runs phase 4. The zero value has cloudregister's timing and talks
// to the real network; the fields beyond Config exist so tests can point
// it at loopback fakes and run in milliseconds. A Finder is not changed by
// Find and may be reused.
type Finder struct {
	Config
	// Log receives a warning for each region server, entry or update server
	// that is skipped, and debug detail per request; nil discards.
	Log *slog.Logger

	// ProbeTimeout bounds the TCP probe that decides whether IPv6 region
	// servers are tried at all; 0 means 2 s.
	ProbeTimeout time.Duration
	// HealthTimeout bounds each update-server health request; 0 means 2 s.
	HealthTimeout time.Duration
	// CertTimeout bounds each certificate download; 0 means 5 s.
	CertTimeout time.Duration
	// MaxBody bounds every response body; a larger one is an error wrapping
	// ErrBodyTooLarge. 0 means 1 MiB.
	MaxBody int64
	// FamilyDelay is how long the health check waits for an update
	// server's IPv6 address to connect before it tries IPv4 as well; 0
	// means happyeyeballs.DefaultDelay (RFC 8305's). An IPv6
	// address that drops every packet then costs this delay, not
	// HealthTimeout.
	FamilyDelay time.Duration

	// MetadataRoots verify a metadata_server's certificate; nil means the
	// system roots (which SSL_CERT_FILE replaces, as for every Go program).
	// Region servers never use them: each is pinned to its own file.
	MetadataRoots *x509.CertPool

	// Dial opens every TCP connection Find makes; nil means a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Proxy picks the egress proxy of the region servers' and the
	// metadata_server's requests; nil means HTTPS_PROXY, HTTP_PROXY and
	// NO_PROXY as Go's net/http reads them (regionProxy). The update
	// servers are always dialled directly: phase 4 checks, and CoreDNS
	// pins, the address the operator will reach.
	Proxy func(*http.Request) (*url.URL, error)
	// Sleep waits between passes; nil means a timer that stops early when
	// ctx ends. It must return ctx's error when ctx ends.
	Sleep func(ctx context.Context, d time.Duration) error
	// Shuffle randomises each bucket of region servers, so every cluster
	// does not hit the same one first; nil means math/rand/v2's Shuffle.
	Shuffle func(n int, swap func(i, j int))
}

// Find asks the region servers of s (or its metadata server) for the update
// servers of regionHint's region ("" lets the region server go by the
// caller's IP), and returns the first one that is alive and whose
// certificate matches its fingerprint, preferring siblings in the region of
// the first entry.
//
// An entry whose name is outside Domains or under the cluster domain, or one of
// whose addresses is loopback (unless AllowLoopback) or link-local, is
// refused before anything is sent to it, and the next one is tried; one with
// an unspecified or multicast address is skipped when the region data is
// parsed.
//
// Errors wrap ErrNoRegionServer (nobody gave usable region data; permanent
// when no server could even be asked) or ErrNoUpdateServer (every update
// server was rejected, each listed with its reason, ErrRefused for those
// refused by name or address), or ctx's error.
func (f *Finder) Find(ctx context.Context, s regionconfig.Settings, regionHint string) (UpdateServer, error) {
	c, err := f.withDefaults()
	if err != nil {
		return UpdateServer{}, err
	}
	if c.AllowLoopback {
		c.Log.Warn("update servers at loopback addresses are accepted (UPDATE_SERVER_ALLOW_LOOPBACK): a setting for tests and the fake cloud only, never for a cluster")
	}
	entries, source, err := c.regionData(ctx, s, regionHint)
	if err != nil {
		return UpdateServer{}, err
	}
	return c.choose(ctx, entries, source, s.HTTPSOnly)
}

// withDefaults returns a copy of f with every zero field defaulted, so Find
// never writes to the caller's Finder.
func (f *Finder) withDefaults() (*Finder, error) {
	c := *f
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.RegionPort == 0 {
		c.RegionPort = DefaultPort
	}
	if c.HTTPSPort == 0 {
		c.HTTPSPort = DefaultPort
	}
	if c.HTTPPort == 0 {
		c.HTTPPort = DefaultHTTPPort
	}
	for _, p := range []int{c.RegionPort, c.HTTPSPort, c.HTTPPort} {
		if p < 1 || p > 65535 {
			return nil, failure.Permanent(fmt.Errorf("smt: port %d out of range", p))
		}
	}
	if len(c.PassTimeouts) == 0 {
		c.PassTimeouts = DefaultPassTimeouts
	}
	for _, d := range c.PassTimeouts {
		if d <= 0 {
			return nil, failure.Permanent(fmt.Errorf("smt: pass timeout %s is not positive", d))
		}
	}
	if c.PassPauses == nil {
		c.PassPauses = DefaultPassPauses
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	if c.HealthTimeout <= 0 {
		c.HealthTimeout = DefaultHealthTimeout
	}
	if c.CertTimeout <= 0 {
		c.CertTimeout = DefaultCertTimeout
	}
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultMaxBody
	}
	if len(c.Domains) == 0 {
		c.Domains = DefaultDomains
	}
	if c.Dial == nil {
		var d net.Dialer
		c.Dial = d.DialContext
	}
	if c.Sleep == nil {
		c.Sleep = pause.For
	}
	if c.Shuffle == nil {
		c.Shuffle = rand.Shuffle
	}
	return &c, nil
}

// get does one GET with its own timeout and returns the body of a 200,
// read up to MaxBody. Any other status is a *StatusError.
func (f *Finder) get(ctx context.Context, client *http.Client, url string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The transport dials on a context of its own, detached from the
	// request's; only this cancels a dial the request gave up on (a
	// black-holed address would otherwise hang on until the kernel's
	// connect timeout). No connection is reused anyway.
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	f.Log.Debug("response", slog.String("url", url), slog.Int("status", resp.StatusCode), slog.Int64("durationMs", time.Since(began).Milliseconds()))
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{URL: url, Code: resp.StatusCode}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: read body: %w", url, err)
	}
	if int64(len(body)) > f.MaxBody {
		return nil, fmt.Errorf("GET %s: %w (more than %d bytes)", url, ErrBodyTooLarge, f.MaxBody)
	}
	return body, nil
}

// hostPort is addr (an IP literal or a name) with port for a URL, bracketed
// when IPv6, and without the port when it is the scheme's default.
func hostPort(addr string, port, defaultPort int) string {
	a, err := netip.ParseAddr(addr)
	if err == nil && a.Zone() != "" {
		addr = strings.Replace(addr, "%", "%25", 1) // RFC 6874
	}
	if port != defaultPort {
		return net.JoinHostPort(addr, strconv.Itoa(port))
	}
	if err == nil && a.Is6() {
		return "[" + addr + "]"
	}
	return addr
}

// noRedirect stops the client at a redirect: region and update servers do
// not send them, and following one would leave the pinned host.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
