package handover

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
)

const updateServer = "smt-azure.susecloud.net"

// tlsServer serves TLS with cert on 127.0.0.1 and returns its port; every
// handshake is completed, then the connection closed.
func tlsServer(t *testing.T, cert tls.Certificate) int {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
	return l.Addr().(*net.TCPAddr).Port
}

// lookups answers name from answers, one per relative lookup, repeating
// the last; the absolute name (with the trailing dot, which each check
// asks after the relative one) gets the same answer, as a DNS server
// without a shadowing search-domain name gives.
type lookups struct {
	mu      sync.Mutex
	answers []func() ([]netip.Addr, error)
	calls   int
}

func (l *lookups) resolve(_ context.Context, host string) ([]netip.Addr, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch host {
	case updateServer:
		i := min(l.calls, len(l.answers)-1)
		l.calls++
		return l.answers[i]()
	case updateServer + ".":
		return l.answers[max(0, min(l.calls, len(l.answers))-1)]()
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func nxdomain() ([]netip.Addr, error) {
	return nil, &net.DNSError{Err: "no such host", Name: updateServer, IsNotFound: true}
}

func to(addrs ...string) func() ([]netip.Addr, error) {
	return func() ([]netip.Addr, error) {
		var out []netip.Addr
		for _, a := range addrs {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
}

func TestWaitUntil(t *testing.T) {
	good, goodPEM, err := fakecloud.SelfSigned(updateServer)
	require.NoError(t, err)
	other, _, err := fakecloud.SelfSigned(updateServer)
	require.NoError(t, err)
	loopback := netip.MustParseAddr("127.0.0.1")

	tests := map[string]struct {
		serve    tls.Certificate
		answers  []func() ([]netip.Addr, error)
		timeout  time.Duration
		attempts int // of a success
		check    func(t *testing.T, err *NotReadyError)
	}{
		"resolves and answers at once": {
			serve: good, answers: []func() ([]netip.Addr, error){to("127.0.0.1")}, timeout: time.Minute, attempts: 1,
		},
		"waits for CoreDNS to serve the entry, then hands over": {
			serve: good, answers: []func() ([]netip.Addr, error){nxdomain, nxdomain, to("127.0.0.1")}, timeout: time.Minute, attempts: 3,
		},
		"a second answer beside the mapped address is fine": {
			serve: good, answers: []func() ([]netip.Addr, error){to("::1", "127.0.0.1")}, timeout: time.Minute, attempts: 1,
		},
		"resolves elsewhere: times out naming the last answer": {
			serve: good, answers: []func() ([]netip.Addr, error){nxdomain, to("203.0.113.7")}, timeout: 2 * time.Second,
			check: func(t *testing.T, e *NotReadyError) {
				assert.Equal(t, StepResolve, e.Step)
				assert.Equal(t, []netip.Addr{netip.MustParseAddr("203.0.113.7")}, e.Answer)
				assert.NoError(t, e.Err)
				assert.Empty(t, e.Server, "the cluster's DNS Service answered")
			},
		},
		"never resolves: times out naming the lookup error": {
			serve: good, answers: []func() ([]netip.Addr, error){nxdomain}, timeout: 2 * time.Second,
			check: func(t *testing.T, e *NotReadyError) {
				assert.Equal(t, StepResolve, e.Step)
				var dnsErr *net.DNSError
				require.ErrorAs(t, e, &dnsErr)
				assert.True(t, dnsErr.IsNotFound)
			},
		},
		"wrong certificate: keeps waiting, then times out naming it": {
			serve: other, answers: []func() ([]netip.Addr, error){to("127.0.0.1")}, timeout: 2 * time.Second,
			check: func(t *testing.T, e *NotReadyError) {
				assert.Equal(t, StepTLS, e.Step)
				var unknown x509.UnknownAuthorityError
				require.ErrorAs(t, e, &unknown, "the pinned certificate is the only root: %v", e)
				assert.Greater(t, e.Attempts, 1, "it kept checking")
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			port := tlsServer(t, tc.serve)
			l := &lookups{answers: tc.answers}
			w := &Wait{Resolve: l.resolve, Port: port, Timeout: tc.timeout, Interval: 10 * time.Millisecond}
			waited, err := w.Until(context.Background(), updateServer, loopback, goodPEM, "kube-system/coredns")
			if tc.check == nil {
				require.NoError(t, err)
				assert.Equal(t, tc.attempts, l.calls, "lookups until it handed over")
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrNotReady)
			assert.False(t, failure.IsPermanent(err), "CoreDNS may serve the entry by the next run")
			assert.GreaterOrEqual(t, waited, tc.timeout, "it waited the whole bound")
			var e *NotReadyError
			require.ErrorAs(t, err, &e)
			assert.Equal(t, port, e.Port)
			assert.Equal(t, updateServer, e.Name)
			assert.Equal(t, loopback, e.Address)
			assert.Equal(t, "kube-system/coredns", e.Object)
			assert.Zero(t, e.Passing, "the last check failed")
			tc.check(t, e)
		})
	}
}

func TestWaitUntilRefusesAnUnusableCertificate(t *testing.T) {
	w := &Wait{Resolve: (&lookups{answers: []func() ([]netip.Addr, error){to("127.0.0.1")}}).resolve, Timeout: time.Minute}
	_, err := w.Until(context.Background(), updateServer, netip.MustParseAddr("127.0.0.1"), []byte("not PEM"), "")
	require.Error(t, err)
	assert.True(t, failure.IsPermanent(err), "no wait can fix the certificate")
	assert.NotErrorIs(t, err, ErrNotReady)
}

func TestWaitUntilEndsWithTheRun(t *testing.T) {
	good, goodPEM, err := fakecloud.SelfSigned(updateServer)
	require.NoError(t, err)
	port := tlsServer(t, good)
	cause := errors.New("run deadline")
	ctx, cancel := context.WithTimeoutCause(context.Background(), 100*time.Millisecond, cause)
	defer cancel()
	w := &Wait{Resolve: (&lookups{answers: []func() ([]netip.Addr, error){nxdomain}}).resolve, Port: port, Timeout: time.Hour, Interval: 10 * time.Millisecond}
	start := time.Now()
	_, err = w.Until(ctx, updateServer, netip.MustParseAddr("127.0.0.1"), goodPEM, "")
	require.ErrorIs(t, err, ErrNotReady)
	assert.Less(t, time.Since(start), time.Minute, "the run's deadline clips HANDOVER_TIMEOUT")
}

// TestServerResolver resolves through a real DNS server on loopback, the
// way the process tier stands in for the cluster's DNS.
func TestServerResolver(t *testing.T) {
	mapped := netip.MustParseAddr("127.0.0.9")
	srv, err := fakecloud.NewDNSServer(func(_ context.Context, name string) ([]netip.Addr, bool, error) {
		if name == updateServer {
			return []netip.Addr{mapped}, true, nil
		}
		return nil, false, nil
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	resolve := ServerResolver(srv.Addr)

	got, err := resolve(context.Background(), updateServer+".")
	require.NoError(t, err)
	assert.Equal(t, []netip.Addr{mapped}, got)

	_, err = resolve(context.Background(), "unknown.example.")
	var dnsErr *net.DNSError
	require.ErrorAs(t, err, &dnsErr)
	assert.True(t, dnsErr.IsNotFound, "NXDOMAIN, as for a name CoreDNS has no entry for")
	assert.NotEmpty(t, srv.Queries())
}

// TestWaitUntilSettles: with several CoreDNS replicas one right answer
// proves one replica. A stale replica answering in between starts the
// settling over, so the handover comes only after Settle of right answers.
func TestWaitUntilSettles(t *testing.T) {
	good, goodPEM, err := fakecloud.SelfSigned(updateServer)
	require.NoError(t, err)
	port := tlsServer(t, good)
	// Right answers for most of Settle, then one stale answer, then only
	// right: two replicas, the second still serving the old Corefile when
	// the first had long reloaded. The stale answer comes late, so a wait
	// that kept counting from the first right answer would hand over well
	// before Settle had passed since it.
	settle := 200 * time.Millisecond
	var (
		mu         sync.Mutex
		calls      int
		firstRight time.Time
		lastWrong  time.Time
	)
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		if strings.TrimSuffix(host, ".") != updateServer {
			return nxdomain()
		}
		mu.Lock()
		defer mu.Unlock()
		calls++
		now := time.Now()
		if firstRight.IsZero() {
			firstRight = now
		}
		if lastWrong.IsZero() && now.Sub(firstRight) >= settle*3/4 {
			lastWrong = now
			return nxdomain()
		}
		return to("127.0.0.1")()
	}
	w := &Wait{Resolve: resolve, Port: port, Timeout: time.Minute, Interval: 10 * time.Millisecond, Settle: settle}
	_, err = w.Until(context.Background(), updateServer, netip.MustParseAddr("127.0.0.1"), goodPEM, "kube-system/coredns")
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.False(t, lastWrong.IsZero(), "the stale answer came before the handover")
	assert.GreaterOrEqual(t, time.Since(lastWrong), settle, "it waited Settle after the stale answer, not after the first right one")

	// Settle 0 hands over at the first right answer, as before.
	l := &lookups{answers: []func() ([]netip.Addr, error){to("127.0.0.1"), nxdomain}}
	w = &Wait{Resolve: l.resolve, Port: port, Timeout: time.Minute, Interval: 10 * time.Millisecond}
	_, err = w.Until(context.Background(), updateServer, netip.MustParseAddr("127.0.0.1"), goodPEM, "kube-system/coredns")
	require.NoError(t, err)
	assert.Equal(t, 1, l.calls)
}

// TestWaitUntilEndsWhileSettling: when the wait ends while every check has
// been passing, but not yet for Settle (the run's deadline clipped it), the
// error says so and how long they passed, instead of "does not resolve"
// with a made-up last answer.
func TestWaitUntilEndsWhileSettling(t *testing.T) {
	good, goodPEM, err := fakecloud.SelfSigned(updateServer)
	require.NoError(t, err)
	port := tlsServer(t, good)
	l := &lookups{answers: []func() ([]netip.Addr, error){to("127.0.0.1")}}
	w := &Wait{Resolve: l.resolve, Port: port, Timeout: 200 * time.Millisecond, Interval: 10 * time.Millisecond, Settle: time.Minute}
	_, err = w.Until(context.Background(), updateServer, netip.MustParseAddr("127.0.0.1"), goodPEM, "kube-system/coredns")
	var nr *NotReadyError
	require.ErrorAs(t, err, &nr)
	assert.Positive(t, nr.Passing, "the checks were passing when the wait ended")
	assert.LessOrEqual(t, nr.Passing, nr.Waited)
	assert.Equal(t, time.Minute, nr.Settle)
	assert.NoError(t, nr.Err, "the last check passed: no older failure to report")
	assert.Equal(t, "kube-system/coredns", nr.Object)
	assert.False(t, failure.IsPermanent(err), "the next run may settle")
}

// dnsReplica is a CoreDNS replica on loopback that serves the update
// server's name once reloaded (ready), NXDOMAIN before.
type dnsReplica struct {
	srv   *fakecloud.DNSServer
	mu    sync.Mutex
	ready bool
}

func newDNSReplica(t *testing.T, ready bool) *dnsReplica {
	t.Helper()
	r := &dnsReplica{ready: ready}
	srv, err := fakecloud.NewDNSServer(func(_ context.Context, name string) ([]netip.Addr, bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if name == updateServer && r.ready {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, true, nil
		}
		return nil, false, nil
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	r.srv = srv
	return r
}

func (r *dnsReplica) reload() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ready = true
}

func (r *dnsReplica) addrPort() netip.AddrPort { return netip.MustParseAddrPort(r.srv.Addr) }

// TestWaitUntilAsksEveryReplica: the Service's answer comes from a replica
// that has reloaded, another has not. The handover waits for the stale one
// (no settling needed), names it when the wait ends first, and falls back
// to the Service alone, with one warning, when the replicas cannot be
// listed.
func TestWaitUntilAsksEveryReplica(t *testing.T) {
	good, goodPEM, err := fakecloud.SelfSigned(updateServer)
	require.NoError(t, err)
	port := tlsServer(t, good)
	addr := netip.MustParseAddr("127.0.0.1")
	service := &lookups{answers: []func() ([]netip.Addr, error){to("127.0.0.1")}}

	t.Run("waits for the stale replica", func(t *testing.T) {
		fresh, stale := newDNSReplica(t, true), newDNSReplica(t, false)
		var lists int
		w := &Wait{Resolve: service.resolve, Port: port, Timeout: time.Minute, Interval: 10 * time.Millisecond,
			Replicas: func(context.Context) ([]netip.AddrPort, error) {
				lists++
				if lists == 5 {
					stale.reload()
				}
				return []netip.AddrPort{fresh.addrPort(), stale.addrPort()}, nil
			}}
		_, err := w.Until(context.Background(), updateServer, addr, goodPEM, "kube-system/coredns")
		require.NoError(t, err)
		assert.Equal(t, 5, lists, "handed over at the first check after the stale replica reloaded, not before")
		assert.NotEmpty(t, stale.srv.Queries(), "the stale replica was asked directly")
	})

	t.Run("a replica that never reloads is named", func(t *testing.T) {
		fresh, stale := newDNSReplica(t, true), newDNSReplica(t, false)
		w := &Wait{Resolve: service.resolve, Port: port, Timeout: 200 * time.Millisecond, Interval: 10 * time.Millisecond,
			Replicas: func(context.Context) ([]netip.AddrPort, error) {
				return []netip.AddrPort{fresh.addrPort(), stale.addrPort()}, nil
			}}
		_, err := w.Until(context.Background(), updateServer, addr, goodPEM, "kube-system/coredns")
		var nr *NotReadyError
		require.ErrorAs(t, err, &nr)
		assert.Equal(t, stale.srv.Addr, nr.Server)
		assert.Equal(t, StepResolve, nr.Step)
		assert.False(t, failure.IsPermanent(err), "the next run may find it reloaded")
	})

	t.Run("replicas not listable: the Service alone, one warning", func(t *testing.T) {
		var logs bytes.Buffer
		w := &Wait{Resolve: service.resolve, Port: port, Timeout: time.Minute, Interval: 10 * time.Millisecond,
			Settle: 50 * time.Millisecond, Log: slog.New(slog.NewJSONHandler(&logs, nil)),
			Replicas: func(context.Context) ([]netip.AddrPort, error) {
				return nil, errors.New(`endpointslices.discovery.k8s.io is forbidden`)
			}}
		_, err := w.Until(context.Background(), updateServer, addr, goodPEM, "kube-system/coredns")
		require.NoError(t, err)
		assert.Equal(t, 1, strings.Count(logs.String(), "cannot list CoreDNS's replicas"), logs.String())
		assert.Contains(t, logs.String(), "forbidden")
	})
}

// podSearch is the search list the kubelet writes into a pod of
// cattle-scc-system, with the cluster's options ndots:5.
var podSearch = []string{"cattle-scc-system.svc.cluster.local", "svc.cluster.local", "cluster.local"}

// podResolver resolves through the DNS server at server as a pod's stub
// resolver does with podSearch and ndots:5: a name with fewer than five
// dots is tried with each search domain first, then as it is; a name with
// a trailing dot only as it is. (The process's own resolver would apply
// this machine's /etc/resolv.conf instead.)
func podResolver(server string) Resolver {
	ask := ServerResolver(server)
	return func(ctx context.Context, host string) ([]netip.Addr, error) {
		if strings.HasSuffix(host, ".") {
			return ask(ctx, host)
		}
		if strings.Count(host, ".") < 5 {
			for _, d := range podSearch {
				if addrs, err := ask(ctx, host+"."+d+"."); err == nil {
					return addrs, nil
				}
			}
		}
		return ask(ctx, host+".")
	}
}

// TestWaitUntilSeesAShadowingService: a tenant's headless Service
// susecloud in a namespace named net answers
// smt-azure.susecloud.net.svc.cluster.local, which a pod's resolver tries
// before the name itself. The handover fails at once, permanently, naming
// that name and the Service, instead of waiting out HANDOVER_TIMEOUT with
// "does not resolve … (entry in kube-system/coredns)". Without the
// Service, the same DNS server hands over.
func TestWaitUntilSeesAShadowingService(t *testing.T) {
	good, goodPEM, err := fakecloud.SelfSigned(updateServer)
	require.NoError(t, err)
	port := tlsServer(t, good)
	entry := netip.MustParseAddr("127.0.0.1")   // the engine's hosts entry
	tenant := netip.MustParseAddr("127.0.0.66") // the tenant's pod
	for name, tc := range map[string]struct {
		records map[string][]netip.Addr
		shadow  []netip.Addr // the shadow's answer; nil: none
	}{
		"a Service susecloud in namespace net shadows the name": {
			records: map[string][]netip.Addr{updateServer: {entry}, updateServer + ".svc.cluster.local": {tenant}},
			shadow:  []netip.Addr{tenant},
		},
		// Its answer holds the entry's address too (an endpoint of the
		// tenant's beside one copied from ours): every lookup "passes",
		// yet the operator may dial the tenant's pod.
		"a shadow that answers beside the entry's address": {
			records: map[string][]netip.Addr{updateServer: {entry}, updateServer + ".svc.cluster.local": {entry, tenant}},
			shadow:  []netip.Addr{entry, tenant},
		},
		"no shadowing Service: handed over": {
			records: map[string][]netip.Addr{updateServer: {entry}, "susecloud.net.svc.cluster.local": {tenant}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv, err := fakecloud.NewDNSServer(func(_ context.Context, name string) ([]netip.Addr, bool, error) {
				a, ok := tc.records[name]
				return a, ok, nil
			})
			require.NoError(t, err)
			t.Cleanup(func() { _ = srv.Close() })
			w := &Wait{Resolve: podResolver(srv.Addr), Search: func() []string { return podSearch }, Port: port,
				Timeout: time.Minute, Interval: 10 * time.Millisecond}

			start := time.Now()
			_, err = w.Until(context.Background(), updateServer, entry, goodPEM, "kube-system/coredns")
			if tc.shadow == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrShadowed)
			assert.True(t, failure.IsPermanent(err), "no wait helps: a person must remove the Service")
			assert.Less(t, time.Since(start), 10*time.Second, "failed at the first check, not after HANDOVER_TIMEOUT")
			var sh *ShadowedError
			require.ErrorAs(t, err, &sh)
			assert.Equal(t, updateServer+".svc.cluster.local", sh.SearchName)
			assert.Equal(t, tc.shadow, sh.Answer)
			assert.Equal(t, []netip.Addr{entry}, sh.Absolute)
			assert.Equal(t, "susecloud", sh.Service)
			assert.Equal(t, "net", sh.Namespace)
			assert.Equal(t, "smt-azure", sh.Host)
			var queried bool
			for _, q := range srv.Queries() {
				queried = queried || q.Name == updateServer
			}
			assert.True(t, queried, "the absolute name was asked")
		})
	}
}

func TestServiceBehind(t *testing.T) {
	tests := map[string]struct{ name, domain, host, service, namespace string }{
		"svc domain: a headless Service's pod": {updateServer, "svc.cluster.local", "smt-azure", "susecloud", "net"},
		"the pod's namespace domain":           {updateServer, "cattle-scc-system.svc.cluster.local", "smt-azure.susecloud", "net", "cattle-scc-system"},
		"the cluster domain alone: no Service": {updateServer, "cluster.local", "", "", ""},
		"another cluster domain":               {"susecloud.net", "svc.k8s.internal", "", "susecloud", "net"},
		"a corporate search domain":            {updateServer, "corp.example", "", "", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			host, service, namespace := serviceBehind(tc.name, tc.domain)
			assert.Equal(t, [3]string{tc.host, tc.service, tc.namespace}, [3]string{host, service, namespace})
		})
	}
}

func TestParseSearch(t *testing.T) {
	assert.Equal(t, podSearch, parseSearch("nameserver 10.96.0.10\nsearch cattle-scc-system.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"))
	assert.Equal(t, []string{"corp.example"}, parseSearch("domain corp.example\nnameserver 10.0.0.2\n"))
	assert.Empty(t, parseSearch("nameserver 10.0.0.2\n"))
}

// TestAbsoluteNameInTheURL pins what the choice to keep registrationUrl
// relative (https://smt-azure.susecloud.net, no trailing dot) rests on, in
// a Go client like rancher/scc-operator's: the absolute name would pass
// TLS (the SNI drops the dot, and name verification ignores it), so TLS
// does not forbid it; but the dot reaches the update server in the Host
// header, whose virtual-host matching is SUSE's and untested here, and a
// changed registrationUrl makes the operator deregister and register every
// existing cluster afresh. The handover's absolute lookup (ErrShadowed)
// guards the name instead.
func TestAbsoluteNameInTheURL(t *testing.T) {
	cert, certPEM, err := fakecloud.SelfSigned(updateServer)
	require.NoError(t, err)
	roots, err := pinnedRoots(certPEM)
	require.NoError(t, err)
	var host, sni string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, sni = r.Host, r.TLS.ServerName
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		},
	}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	resp, err := client.Get("https://" + updateServer + ".:" + port + "/connect/subscriptions/systems")
	require.NoError(t, err, "Go's TLS accepts the absolute name against a certificate for the name")
	_ = resp.Body.Close()
	assert.Equal(t, updateServer, sni, "the SNI carries the name without the dot")
	assert.Equal(t, updateServer+".:"+port, host, "the Host header carries the dot to the update server")
}

// TestErrorMessages: what an admin reads when the handover does not
// happen, one message per kind (the wait tests above assert the fields):
// the step that failed, where the entry is, the last answer or error, and
// for a shadowing Service the command that removes it.
func TestErrorMessages(t *testing.T) {
	addr := netip.MustParseAddr("20.38.0.87")
	wait := func(e NotReadyError) error {
		e.Name, e.Address, e.Port, e.Object = updateServer, addr, 443, "kube-system/coredns-custom"
		e.Waited, e.Attempts = 5*time.Minute, 120
		return &e
	}
	nxdomain := &net.DNSError{Err: "no such host", Name: updateServer, IsNotFound: true}
	msgs := testkit.NewMessages(t)
	for name, err := range map[string]error{
		"resolves elsewhere":     wait(NotReadyError{Step: StepResolve, Answer: []netip.Addr{netip.MustParseAddr("203.0.113.7")}}),
		"resolves to nothing":    wait(NotReadyError{Step: StepResolve}),
		"never resolves":         wait(NotReadyError{Step: StepResolve, Err: nxdomain}),
		"a replica not reloaded": wait(NotReadyError{Step: StepResolve, Server: "10.244.0.9:53", Answer: []netip.Addr{netip.MustParseAddr("20.38.0.1")}}),
		"another certificate":    wait(NotReadyError{Step: StepTLS, Err: errors.New("tls: failed to verify certificate: x509: certificate signed by unknown authority")}),
		"still settling":         wait(NotReadyError{Step: StepResolve, Passing: 12 * time.Second, Settle: 20 * time.Second}),
		"no CoreDNS object known": func() error {
			e := wait(NotReadyError{Step: StepResolve}).(*NotReadyError)
			e.Object = ""
			return e
		}(),
		"shadowed by a headless Service's pod": &ShadowedError{Name: updateServer, Address: addr,
			SearchName: updateServer + ".svc.cluster.local", Answer: []netip.Addr{netip.MustParseAddr("10.244.1.7")},
			Absolute: []netip.Addr{addr}, Service: "susecloud", Namespace: "net", Host: "smt-azure"},
		"shadowed by a Service": &ShadowedError{Name: updateServer, Address: addr,
			SearchName: "smt-azure.susecloud.net.svc.cluster.local", Answer: []netip.Addr{netip.MustParseAddr("10.96.0.50")},
			Absolute: []netip.Addr{addr}, Service: "susecloud", Namespace: "net"},
		"shadowed by another record, the name itself not resolving": &ShadowedError{Name: updateServer, Address: addr,
			SearchName: updateServer + ".corp.example", Answer: []netip.Addr{netip.MustParseAddr("192.0.2.1")}, AbsoluteErr: nxdomain},
	} {
		msgs.Add(name, err)
	}
}
