package smt

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/happyeyeballs"
	"github.com/rancher/registration-engine/job/hostname"
)

// choose returns the first entry that passes every check, trying siblings
// (entries in the first entry's region) before the rest.
func (f *Finder) choose(ctx context.Context, entries []Entry, source string, httpsOnly bool) (UpdateServer, error) {
	candidates := slices.Clone(entries)
	region := candidates[0].Region
	slices.SortStableFunc(candidates, func(a, b Entry) int {
		return boolRank(a.Region != region) - boolRank(b.Region != region)
	})

	// The update servers are asked by IP and their names are not in public
	// DNS, so their certificates cannot be verified on these connections
	// (cloudregister sends verify=False too). Nothing received here is
	// trusted as is: the health answer only decides which server to try,
	// and the certificate is accepted only when its SHA-1 matches the
	// fingerprint that came over the pinned region-server connection.
	tr := &http.Transport{
		DialContext:       f.Dial,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // see above
		DisableKeepAlives: true,
	}
	client := &http.Client{Transport: tr, CheckRedirect: noRedirect}

	var rejected []error
	for _, e := range candidates {
		if err := f.admit(e); err != nil {
			f.Log.Warn("update server refused", slog.String("server", e.Name), slog.String("region", e.Region), slog.Any("error", err))
			rejected = append(rejected, fmt.Errorf("%s (%s): %w", e.Name, addrList(e), err))
			continue
		}
		certPEM, answered, err := f.check(ctx, client, e, httpsOnly)
		if err == nil {
			return UpdateServer{
				Name: e.Name, IPv4: e.IPv4, IPv6: e.IPv6,
				Registry: e.Registry, Region: e.Region, Fingerprint: e.Fingerprint,
				CertPEM: certPEM, Reached: answered,
			}, nil
		}
		if ctx.Err() != nil {
			return UpdateServer{}, fmt.Errorf("smt: update servers: %w", ctx.Err())
		}
		f.Log.Warn("update server rejected", slog.String("server", e.Name), slog.String("region", e.Region), slog.Any("error", err))
		rejected = append(rejected, fmt.Errorf("%s (%s): %w", e.Name, addrList(e), err))
	}
	return UpdateServer{}, fmt.Errorf("smt: update servers from %s: %w: %w", source, ErrNoUpdateServer, failure.List(rejected))
}

// admit refuses an entry whose name or addresses must never reach the
// cluster: phase 6 makes the name resolve to the address cluster-wide,
// ahead of every other source, so whoever controls region data would
// otherwise decide where a Service, Entra or a registry resolves. The error
// wraps ErrRefused and names the rule.
func (f *Finder) admit(e Entry) error {
	if hostname.Under(e.Name, ClusterDomain) {
		return fmt.Errorf("%w: SMTserverName %q is under the cluster domain %s", ErrRefused, e.Name, ClusterDomain)
	}
	if !slices.ContainsFunc(f.Domains, func(d string) bool { return hostname.Under(e.Name, d) }) {
		return fmt.Errorf("%w: SMTserverName %q is not under an allowed domain (%s; UPDATE_SERVER_DOMAINS)", ErrRefused, e.Name, strings.Join(f.Domains, ", "))
	}
	// ParseRegionData and ParseMetadata have already dropped unspecified
	// and multicast addresses and IPv4-mapped IPv6 ones.
	for _, a := range addrs(e) {
		switch {
		case a.IsLoopback() && !f.AllowLoopback:
			return fmt.Errorf("%w: address %s is loopback (UPDATE_SERVER_ALLOW_LOOPBACK is for tests only)", ErrRefused, a)
		case a.IsLinkLocalUnicast():
			return fmt.Errorf("%w: address %s is link-local (169.254.0.0/16, fe80::/10)", ErrRefused, a)
		}
	}
	return nil
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// addrs are the entry's addresses, IPv6 first as in cloudregister.
func addrs(e Entry) []netip.Addr {
	var out []netip.Addr
	for _, a := range []netip.Addr{e.IPv6, e.IPv4} {
		if a.IsValid() {
			out = append(out, a)
		}
	}
	return out
}

func addrList(e Entry) string {
	var parts []string
	for _, a := range addrs(e) {
		parts = append(parts, a.String())
	}
	return strings.Join(parts, ", ")
}

// check runs the health check and the certificate download for one entry
// and returns the verified certificate and the address that answered the
// health check.
func (f *Finder) check(ctx context.Context, client *http.Client, e Entry, httpsOnly bool) ([]byte, netip.Addr, error) {
	answered, body, err := f.health(ctx, client, e, httpsOnly)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	if body == nil {
		// Ask the address that answered the health check first: an
		// unroutable IPv6 would otherwise cost a timeout per file name.
		body, err = f.fetchCert(ctx, client, leading(answered, e), httpsOnly)
		if err != nil {
			return nil, netip.Addr{}, err
		}
	}
	cert, err := verifyCert(body, e.Fingerprint)
	return cert, answered, err
}

// health asks https://<ip>/api/health/status on each address, the one that
// connects first in a Happy Eyeballs race first (IPv6 with a head start of
// FamilyDelay), and returns the address that answered: phase 5 takes it
// rather than racing again. A 200 decides at once: "online" or not
// responsive, without trying the other address (as cloudregister). A 404 is
// an old SMT without the health API: it is alive if its certificate
// downloads, and that download is returned as body. Errors and other
// statuses move on to the next address.
func (f *Finder) health(ctx context.Context, client *http.Client, e Entry, httpsOnly bool) (answered netip.Addr, body []byte, err error) {
	order, err := f.raceOrder(ctx, e)
	if err != nil {
		return netip.Addr{}, nil, fmt.Errorf("%w: %w", ErrNotResponsive, err)
	}
	var failed []error
	for _, a := range order {
		u := "https://" + hostPort(a.String(), f.HTTPSPort, DefaultPort) + "/api/health/status"
		resp, err := f.get(ctx, client, u, f.HealthTimeout)
		var status *StatusError
		switch {
		case err == nil:
			var h struct {
				State string `json:"state"`
			}
			if err := json.Unmarshal(resp, &h); err != nil {
				return netip.Addr{}, nil, fmt.Errorf("%w: %s: %w", ErrNotResponsive, u, err)
			}
			if h.State != "online" {
				return netip.Addr{}, nil, fmt.Errorf("%w: %s: state %q", ErrNotResponsive, u, h.State)
			}
			return a, nil, nil
		case errors.As(err, &status) && status.Code == http.StatusNotFound:
			body, err := f.fetchCert(ctx, client, []netip.Addr{a}, httpsOnly)
			if err == nil {
				return a, body, nil
			}
			failed = append(failed, fmt.Errorf("no health API and %w", err))
		default:
			failed = append(failed, err)
		}
		if ctx.Err() != nil {
			return netip.Addr{}, nil, ctx.Err()
		}
	}
	return netip.Addr{}, nil, fmt.Errorf("%w: %w", ErrNotResponsive, failure.List(failed))
}

// raceOrder is the entry's addresses, the one that accepts a TCP connection
// first at the HTTPS port leading. The race gives IPv6 FamilyDelay before
// IPv4 starts too, so an IPv6 address that drops every packet costs that
// delay instead of HealthTimeout (cloudregister waits out the timeout on
// every request). With one address there is nothing to race. An error
// means neither address connected within HealthTimeout.
func (f *Finder) raceOrder(ctx context.Context, e Entry) ([]netip.Addr, error) {
	if !e.IPv6.IsValid() || !e.IPv4.IsValid() {
		return addrs(e), nil
	}
	r := happyeyeballs.Racer{Port: f.HTTPSPort, Delay: f.FamilyDelay, AttemptTimeout: f.HealthTimeout, Dial: f.Dial}
	first, err := r.Race(ctx, e.IPv6, e.IPv4)
	if err != nil {
		return nil, err
	}
	f.Log.Debug("update server address connected first", slog.String("server", e.Name), slog.String("address", first.String()))
	return leading(first, e), nil
}

// leading is e's addresses with a first.
func leading(a netip.Addr, e Entry) []netip.Addr {
	return append([]netip.Addr{a}, slices.DeleteFunc(addrs(e), func(b netip.Addr) bool { return b == a })...)
}

// fetchCert downloads smt.crt, then rmt.crt, from each address in order,
// over https when httpsOnly (http otherwise), and returns the first 200
// body. The body is unverified.
func (f *Finder) fetchCert(ctx context.Context, client *http.Client, order []netip.Addr, httpsOnly bool) ([]byte, error) {
	scheme, port, def := "http", f.HTTPPort, DefaultHTTPPort
	if httpsOnly {
		scheme, port, def = "https", f.HTTPSPort, DefaultPort
	}
	var failed []error
	for _, name := range []string{"smt.crt", "rmt.crt"} {
		for _, a := range order {
			body, err := f.get(ctx, client, scheme+"://"+hostPort(a.String(), port, def)+"/"+name, f.CertTimeout)
			if err == nil {
				return body, nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			failed = append(failed, err)
		}
	}
	return nil, fmt.Errorf("%w: %w", ErrNoCertificate, failure.List(failed))
}
