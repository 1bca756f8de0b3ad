package handover

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/pause"
)

// Defaults of Wait.
const (
	// DefaultPort is where the operator dials the update server: it joins
	// the paths to https://<name>, with no port.
	DefaultPort = 443
	// DefaultInterval is the pause between two checks.
	DefaultInterval = 2 * time.Second
	// DefaultSettle is how long every check must keep passing before the
	// handover. CoreDNS runs as several replicas, each reloading the
	// changed Corefile on its own schedule (the kubelet's ConfigMap sync,
	// then the reload plugin), and the Service sends each query to any of
	// them: one right answer proves only one replica. Each check asks every
	// replica Replicas lists; the settling is the margin beside it (a
	// replica that started between two lists) and the whole defence where
	// the replicas cannot be listed: ten checks in a row each reach a
	// random replica, so a stale one is all but certain to answer one of
	// them wrongly and start the settling over.
	DefaultSettle = 20 * time.Second
	// DefaultTimeout is how long the engine waits for CoreDNS to serve the
	// name before it gives up for this run (HANDOVER_TIMEOUT's default):
	// minutes, because the kubelet syncs a changed ConfigMap into the
	// CoreDNS pods only every minute or so, and the reload plugin then
	// takes its own interval.
	DefaultTimeout = 3 * time.Minute
	// checkTimeout bounds one lookup plus one TLS handshake, so that one
	// DNS server that never answers cannot take the whole wait.
	checkTimeout = 10 * time.Second
)

// Resolver answers the addresses of a host name, as a process in the pod
// would get them.
type Resolver func(ctx context.Context, host string) ([]netip.Addr, error)

// SystemResolver is the pod's own resolver: /etc/resolv.conf, which in a
// pod names the cluster's DNS service, with its search domains.
func SystemResolver(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// ServerResolver asks the DNS server at server (ip:port) instead of the
// one /etc/resolv.conf names; for a process that stands in for a pod.
func ServerResolver(server string) Resolver {
	r := &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, server)
		},
	}
	return func(ctx context.Context, host string) ([]netip.Addr, error) {
		return r.LookupNetIP(ctx, "ip", host)
	}
}

// Wait checks, every Interval until Timeout (or the run's deadline, if
// sooner), what the operator will do with the Secret: resolve the update
// server's name and open TLS to it, trusting the pinned certificate and
// checking the name, as the operator revision that reads
// registrationUrlCert does.
type Wait struct {
	// Resolve answers the name; nil means SystemResolver.
	Resolve Resolver
	// Port is the update server's TLS port; 0 means DefaultPort. Tests
	// point it at a loopback server.
	Port int
	// Timeout bounds the whole wait; it must be positive (the engine uses
	// DefaultTimeout unless HANDOVER_TIMEOUT says otherwise).
	Timeout time.Duration
	// Interval is the pause between checks; 0 means DefaultInterval.
	Interval time.Duration
	// Settle is how long the checks must keep passing, every one of them,
	// before the handover (see DefaultSettle); 0 hands over at the first.
	Settle time.Duration
	// Replicas lists the CoreDNS pods behind the cluster's DNS Service
	// (address and DNS port), read again for every check. Each check asks
	// every one of them directly besides the Service, so the handover
	// waits for the last replica to serve the name, not for the first.
	// nil, an error (logged once) or an empty list: the Service alone,
	// and Settle must make up for it.
	Replicas func(ctx context.Context) ([]netip.AddrPort, error)
	// Search returns the search domains Resolve applies to a relative
	// name, in order; nil means those of /etc/resolv.conf (the pod's, as
	// the kubelet writes them: <namespace>.svc.<domain>, svc.<domain>,
	// <domain>). They name the search-domain name that shadows the update
	// server's (see ErrShadowed).
	Search func() []string
	Log    *slog.Logger
}

// Until returns once name resolves to addr and addr answers TLS with
// certPEM's certificate for name; object names the CoreDNS object holding
// the entry, for the messages. When Timeout passes first it returns a
// *NotReadyError (transient) naming the last answer, or how long the checks
// had been passing when they had not yet for Settle. A certPEM without a
// certificate is a permanent error: no wait can fix it.
func (w *Wait) Until(ctx context.Context, name string, addr netip.Addr, certPEM []byte, object string) (time.Duration, error) {
	roots, err := pinnedRoots(certPEM)
	if err != nil {
		return 0, failure.Permanent(fmt.Errorf("handover: %w", err))
	}
	log := w.logger().With(slog.String("server", name), slog.String("address", addr.String()))
	if object != "" {
		log = log.With(slog.String("coredns", object))
	}
	port := cmp.Or(w.Port, DefaultPort)
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()

	last := &NotReadyError{Name: name, Address: addr.Unmap(), Port: port, Object: object, Step: StepResolve}
	var passingSince time.Time
	replicasWarned := false
	for {
		last.Attempts++
		replicas, err := w.replicas(wctx)
		if err != nil && !replicasWarned && wctx.Err() == nil {
			replicasWarned = true
			log.Warn("cannot list CoreDNS's replicas: asking the cluster's DNS Service only, so a replica that has not reloaded yet can go unnoticed",
				slog.Any("error", err))
		}
		st := w.check(wctx, name, addr.Unmap(), port, roots, replicas)
		if st.shadow != nil {
			log.Error("the update server's name is shadowed in the cluster: not writing the Secret", slog.String("searchName", st.shadow.SearchName),
				slog.String("answer", answerString(st.shadow.Answer)), slog.String("service", st.shadow.Namespace+"/"+st.shadow.Service))
			return time.Since(start), failure.Permanent(fmt.Errorf("handover: %w", st.shadow))
		}
		if st.step == "" {
			if passingSince.IsZero() {
				passingSince = time.Now()
			}
			if time.Since(passingSince) >= w.Settle {
				log.Info("update server reachable through the cluster: handing over",
					slog.Int("attempts", last.Attempts), slog.Int64("waitedMs", time.Since(start).Milliseconds()),
					slog.String("settled", w.Settle.String()), slog.Int("replicasAsked", len(replicas)))
				return time.Since(start), nil
			}
		} else {
			// A check cut short by the end of the wait says nothing about
			// CoreDNS; keep the one before it and the passing streak,
			// unless there is none. A dial bounded by the wait's deadline
			// can fail with "i/o timeout" a moment before wctx's own timer
			// marks it done, so the deadline is read, not only wctx.Err.
			if !ended(wctx) || last.Attempts == 1 {
				passingSince = time.Time{}
				last.Step, last.Server, last.Answer, last.Err = st.step, st.server, st.answer, st.err
			}
			attrs := []any{slog.String("step", st.step), slog.String("dnsServer", serverString(st.server)),
				slog.String("answer", answerString(st.answer)), slog.Any("error", st.err)}
			if last.Attempts == 1 {
				log.Info("waiting until the update server's name resolves in the cluster and answers TLS before writing the Secret",
					append([]any{slog.String("timeout", w.Timeout.String())}, attrs...)...)
			} else {
				log.Debug("update server not reachable through the cluster yet",
					append([]any{slog.Int("attempt", last.Attempts)}, attrs...)...)
			}
		}
		if pause.For(wctx, cmp.Or(w.Interval, DefaultInterval)) != nil {
			last.Waited = time.Since(start)
			if !passingSince.IsZero() {
				last.Passing, last.Settle = time.Since(passingSince), w.Settle
			}
			return last.Waited, last
		}
	}
}

// ended reports whether ctx is done or its deadline has passed.
func ended(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ctx.Err() != nil || (ok && !time.Now().Before(deadline))
}

// state is one check's outcome: step is "" when everything worked; server
// is the replica that answered wrongly ("" for the Service).
type state struct {
	step   string
	server string
	answer []netip.Addr
	err    error
	// shadow, when set, ends the wait: a search-domain name answers for
	// the update server's.
	shadow *ShadowedError
}

// replicas is Replicas' answer; none when there is no Replicas.
func (w *Wait) replicas(ctx context.Context) ([]netip.AddrPort, error) {
	if w.Replicas == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	return w.Replicas(ctx)
}

// check asks the Service (Resolve) and then each replica for name, and
// dials addr once every answer holds it.
func (w *Wait) check(ctx context.Context, name string, addr netip.Addr, port int, roots *x509.CertPool, replicas []netip.AddrPort) state {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	resolve := w.Resolve
	if resolve == nil {
		resolve = SystemResolver
	}
	// The name as the operator's resolver takes it (relative: with a
	// pod's ndots:5 the search domains come first) and as it is
	// (absolute). Both must hold addr; when they differ, a search-domain
	// name may be answering in the name's stead.
	st := lookup(ctx, resolve, name, addr, "")
	abs := lookup(ctx, resolve, name+".", addr, "")
	// A shadow may also answer beside addr (a tenant's Service with an
	// endpoint of its own next to ours), so any difference is looked at,
	// not only a failed lookup.
	if !sameAnswer(st, abs) {
		if sh := w.shadowed(ctx, resolve, name, addr, st, abs); sh != nil {
			return state{shadow: sh}
		}
	}
	if st.step != "" {
		return st
	}
	if abs.step != "" {
		return abs
	}
	answer := st.answer
	for _, r := range replicas {
		if st := lookup(ctx, ServerResolver(r.String()), name, addr, r.String()); st.step != "" {
			return st
		}
	}
	d := tls.Dialer{Config: &tls.Config{ServerName: name, RootCAs: roots, MinVersion: tls.VersionTLS12}}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(addr.String(), strconv.Itoa(port)))
	if err != nil {
		return state{step: StepTLS, answer: answer, err: err}
	}
	_ = conn.Close()
	return state{answer: answer}
}

// lookup is one DNS server's answer for name: a failed state unless it
// holds addr.
func lookup(ctx context.Context, resolve Resolver, name string, addr netip.Addr, server string) state {
	answer, err := resolve(ctx, name)
	for i := range answer {
		answer[i] = answer[i].Unmap()
	}
	switch {
	case err != nil:
		return state{step: StepResolve, server: server, err: err}
	case !slices.Contains(answer, addr):
		return state{step: StepResolve, server: server, answer: answer}
	}
	return state{answer: answer}
}

// shadowed finds the search-domain name whose answer is the relative
// lookup's (rel) and not the absolute one's (abs); nil when none is, as
// when the two differ only because they reached two CoreDNS replicas, one
// not reloaded yet.
func (w *Wait) shadowed(ctx context.Context, resolve Resolver, name string, addr netip.Addr, rel, abs state) *ShadowedError {
	if rel.err != nil || len(rel.answer) == 0 {
		return nil
	}
	search := w.Search
	if search == nil {
		search = resolvConfSearch
	}
	for _, domain := range search() {
		domain = strings.Trim(domain, ".")
		if domain == "" {
			continue
		}
		fq := name + "." + domain
		answer, err := resolve(ctx, fq+".")
		if err != nil || !sameAddrs(unmapAll(answer), rel.answer) {
			continue
		}
		e := &ShadowedError{Name: name, Address: addr, SearchName: fq, Answer: rel.answer, Absolute: abs.answer, AbsoluteErr: abs.err}
		e.Host, e.Service, e.Namespace = serviceBehind(name, domain)
		return e
	}
	return nil
}

// serviceBehind reads the Service from name.domain when domain is a
// cluster search domain ([<namespace>.]svc.<cluster domain>): the labels
// before "svc" are [<host>.]<service>.<namespace>; "" when it is not.
func serviceBehind(name, domain string) (host, service, namespace string) {
	labels := strings.Split(name+"."+domain, ".")
	nameLabels := strings.Count(name, ".") + 1
	for i := nameLabels; i < len(labels)-1; i++ {
		if labels[i] != "svc" || i < 2 {
			continue
		}
		namespace, service = labels[i-1], labels[i-2]
		if i >= 3 {
			host = strings.Join(labels[:i-2], ".")
		}
		return host, service, namespace
	}
	return "", "", ""
}

// resolvConfSearch is the search list of /etc/resolv.conf: its last
// search line (or, without one, its domain line), as the resolver reads it.
func resolvConfSearch() []string {
	data, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	return parseSearch(string(data))
}

func parseSearch(conf string) []string {
	var search, domain []string
	for _, line := range strings.Split(conf, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "search":
			search = f[1:]
		case "domain":
			domain = f[1:2]
		}
	}
	if search != nil {
		return search
	}
	return domain
}

// sameAnswer: both lookups failed, or both answered the same addresses.
func sameAnswer(a, b state) bool {
	if (a.err != nil) != (b.err != nil) {
		return false
	}
	return a.err != nil || sameAddrs(a.answer, b.answer)
}

func sameAddrs(a, b []netip.Addr) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.SortFunc(x, func(p, q netip.Addr) int { return p.Compare(q) })
	slices.SortFunc(y, func(p, q netip.Addr) int { return p.Compare(q) })
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

func unmapAll(addrs []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		out[i] = a.Unmap()
	}
	return out
}

// pinnedRoots is what the operator trusts besides the system roots: the
// first certificate of registrationUrlCert. The system roots are left out on
// purpose: the pinned certificate is what the Secret hands over, and it is
// what must work.
func pinnedRoots(certPEM []byte) (*x509.CertPool, error) {
	for rest := certPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("the update server's certificate is not PEM")
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("the update server's certificate: %w", err)
		}
		pool := x509.NewCertPool()
		pool.AddCert(cert)
		return pool, nil
	}
}

func (w *Wait) logger() *slog.Logger {
	if w.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return w.Log
}
