package smt

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpproxy"

	"github.com/rancher/registration-engine/internal/proxyconnect"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/regionconfig"
)

// regionSource is one place region data can be asked for: a region server
// with its pinned client, or the metadata server.
type regionSource struct {
	name     string // the regionsrv entry as written, or the metadata URL
	url      string
	client   *http.Client
	metadata bool
}

// regionData asks the sources in turn, pass after pass, and returns the
// entries of the first usable answer and the name of the source that gave
// it. A success on the last pass is a success (cloudregister exits 1 there).
func (f *Finder) regionData(ctx context.Context, s regionconfig.Settings, hint string) ([]Entry, string, error) {
	sources, err := f.sources(ctx, s, hint)
	if err != nil {
		return nil, "", err
	}
	last := make([]error, len(sources))
	for pass, timeout := range f.PassTimeouts {
		if pass > 0 {
			if err := f.Sleep(ctx, f.pause(pass-1)); err != nil {
				return nil, "", fmt.Errorf("smt: region servers: %w", err)
			}
		}
		for i, src := range sources {
			entries, err := f.query(ctx, src, timeout)
			if err == nil {
				f.Log.Debug("region data received", slog.String("server", src.name), slog.Int("attempt", pass+1), slog.Int("entries", len(entries)))
				return entries, src.name, nil
			}
			if ctx.Err() != nil {
				return nil, "", fmt.Errorf("smt: region servers: %w", ctx.Err())
			}
			f.Log.Warn("region server failed", slog.String("server", src.name), slog.Int("attempt", pass+1), slog.Any("error", err))
			last[i] = fmt.Errorf("%s: %w", src.name, err)
		}
	}
	return nil, "", fmt.Errorf("smt: region servers: %w in %d pass(es): %w", ErrNoRegionServer, len(f.PassTimeouts), failure.List(last))
}

// pause is the wait after pass i (0-based); the last configured pause
// repeats when there are more passes than pauses.
func (f *Finder) pause(i int) time.Duration {
	if len(f.PassPauses) == 0 {
		return 0
	}
	return f.PassPauses[min(i, len(f.PassPauses)-1)]
}

func (f *Finder) query(ctx context.Context, src regionSource, timeout time.Duration) ([]Entry, error) {
	body, err := f.get(ctx, src.client, src.url, timeout)
	if err != nil {
		return nil, err
	}
	if src.metadata {
		e, err := ParseMetadata(body)
		if err != nil {
			return nil, err
		}
		return []Entry{e}, nil
	}
	entries, skipped, err := ParseRegionData(body)
	for _, p := range skipped {
		f.Log.Warn("update server entry skipped", slog.String("server", src.name), slog.Any("error", p))
	}
	if err != nil && len(skipped) > 0 {
		return nil, fmt.Errorf("%w: %w", err, failure.List(skipped))
	}
	return entries, err
}

// sources lists where to ask, in order. With a metadata server that is the
// only source, as in cloudregister. Otherwise region servers without a
// usable pinned certificate are skipped with a warning and the rest are
// ordered by regionOrder.
func (f *Finder) sources(ctx context.Context, s regionconfig.Settings, hint string) ([]regionSource, error) {
	if s.MetadataServer != "" {
		// No pinning: cloudregister trusts the system roots here, and the
		// URL is the operator's own choice. regionconfig takes it only as
		// https, and no redirect is followed, so the answer comes from the
		// host the operator named, verified by the system roots
		// (MetadataRoots in tests).
		tr := &http.Transport{
			Proxy:                  f.proxy(),
			OnProxyConnectResponse: proxyconnect.OnResponse,
			DialContext:            f.Dial,
			TLSClientConfig:        &tls.Config{RootCAs: f.MetadataRoots, MinVersion: tls.VersionTLS12},
			DisableKeepAlives:      true,
		}
		client := &http.Client{Transport: tr, CheckRedirect: noRedirect}
		return []regionSource{{name: s.MetadataServer, url: s.MetadataServer, client: client, metadata: true}}, nil
	}
	if len(s.RegionServers) == 0 {
		return nil, failure.Permanent(fmt.Errorf("smt: region servers: %w: none configured", ErrNoRegionServer))
	}

	clients := make(map[string]*http.Client, len(s.RegionServers))
	var usable []string
	var skipped []error
	for _, entry := range s.RegionServers {
		if _, dup := clients[entry]; dup {
			continue
		}
		client, err := f.pinnedClient(s.CertPath(entry))
		if err != nil {
			f.Log.Warn("region server skipped", slog.String("server", entry), slog.Any("error", err))
			skipped = append(skipped, fmt.Errorf("%s: %w", entry, err))
			continue
		}
		clients[entry] = client
		usable = append(usable, entry)
	}
	if len(usable) == 0 {
		return nil, failure.Permanent(fmt.Errorf("smt: region servers: %w: %w; each regionsrv entry needs its certificate as <certLocation>/<entry>.pem (%s): in the cluster, the ConfigMap region-server-certs (see manifests/README.md)",
			ErrNoRegionServer, failure.List(skipped), s.CertLocation))
	}

	ordered := f.regionOrder(ctx, usable)
	if len(ordered) == 0 {
		return nil, fmt.Errorf("smt: region servers: %w: only IPv6 servers are configured and none is reachable", ErrNoRegionServer)
	}
	out := make([]regionSource, len(ordered))
	for i, entry := range ordered {
		out[i] = regionSource{name: entry, url: f.regionURL(entry, s.API, hint), client: clients[entry]}
	}
	return out, nil
}

// regionURL is https://<entry>/<api>?regionHint=<hint>, IPv6 in brackets,
// the port only when it is not 443, and no query without a hint.
func (f *Finder) regionURL(entry, api, hint string) string {
	u := "https://" + hostPort(entry, f.RegionPort, DefaultPort) + "/" + strings.TrimLeft(api, "/")
	if hint != "" {
		u += "?regionHint=" + url.QueryEscape(hint)
	}
	return u
}

// pinnedClient trusts exactly the certificate in path and nothing else: no
// system roots, so only the server SLES pins can answer. Host verification
// stays on; for an IP entry Go checks the certificate's IP SANs, which SUSE's
// region-server certificates carry.
func (f *Finder) pinnedClient(path string) (*http.Client, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPinnedCert, err)
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, f.MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrPinnedCert, path, err)
	}
	pool := x509.NewCertPool()
	if int64(len(data)) > f.MaxBody || !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%w: %s: no PEM certificate", ErrPinnedCert, path)
	}
	tr := &http.Transport{
		Proxy:                  f.proxy(),
		OnProxyConnectResponse: proxyconnect.OnResponse, // a refused tunnel names the proxy
		DialContext:            f.Dial,
		TLSClientConfig:        &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		DisableKeepAlives:      true,
	}
	return &http.Client{Transport: tr, CheckRedirect: noRedirect}, nil
}

// regionOrder sorts entries as cloudregister does: IPv4, IPv6 and names in
// separate buckets, each shuffled; IPv6 first, but only when one of them
// accepts a TCP connection (otherwise they are dropped: advertised IPv6 that
// the node cannot route would cost a timeout per server and pass); names
// last.
func (f *Finder) regionOrder(ctx context.Context, entries []string) []string {
	var v4, v6, names []string
	for _, e := range entries {
		a, err := netip.ParseAddr(e)
		switch {
		case err != nil:
			names = append(names, e)
		case a.Is4():
			v4 = append(v4, e)
		default:
			v6 = append(v6, e)
		}
	}
	for _, b := range [][]string{v4, v6, names} {
		f.Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] })
	}
	var out []string
	if len(v6) > 0 {
		if f.anyConnects(ctx, v6) {
			out = append(out, v6...)
		} else {
			f.Log.Warn("no IPv6 access, IPv6 region servers skipped", slog.Any("servers", v6))
		}
	}
	out = append(out, v4...)
	return append(out, names...)
}

// anyConnects reports whether a TCP connection to any of addrs on RegionPort
// succeeds within ProbeTimeout. The probes run in parallel; the first
// success cancels the rest, and it returns only after all have ended.
func (f *Finder) anyConnects(ctx context.Context, addrs []string) bool {
	ctx, cancel := context.WithTimeout(ctx, f.ProbeTimeout)
	defer cancel()
	results := make(chan bool, len(addrs)) // never blocks a probe
	var wg sync.WaitGroup
	for _, a := range addrs {
		wg.Go(func() {
			conn, err := f.Dial(ctx, "tcp", net.JoinHostPort(a, strconv.Itoa(f.RegionPort)))
			if err == nil {
				_ = conn.Close()
			}
			results <- err == nil
		})
	}
	ok := false
	for range addrs {
		if <-results {
			ok = true
			cancel()
			break
		}
	}
	wg.Wait()
	return ok
}

// proxy is Proxy, or regionProxy. A cluster behind an egress proxy reaches
// SUSE's region servers only through it; the pinned certificate is checked
// inside the tunnel as without one (a TLS-inspecting proxy must pass the
// region servers through uninspected, or the pin refuses its certificate).
func (f *Finder) proxy() func(*http.Request) (*url.URL, error) {
	if f.Proxy != nil {
		return f.Proxy
	}
	return regionProxy
}

// regionProxy applies HTTPS_PROXY, HTTP_PROXY and NO_PROXY (and their
// lower-case forms) as net/http's ProxyFromEnvironment does, reading the
// environment on each call rather than once per process.
func regionProxy(r *http.Request) (*url.URL, error) {
	return httpproxy.FromEnvironment().ProxyFunc()(r.URL)
}
