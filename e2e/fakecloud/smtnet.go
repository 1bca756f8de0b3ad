package fakecloud

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// HasIPv6Loopback reports whether this machine can listen on [::1]. Some CI
// containers have no IPv6 at all; tests that need IPv6 skip or fall back
// when it is false.
func HasIPv6Loopback() bool { return smtHasIPv6Loopback() }

var smtHasIPv6Loopback = sync.OnceValue(func() bool {
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
})

// ListenSamePort listens on one TCP port on every address, the way the
// engine sees SUSE's servers: several IPs, one well-known port. The port is
// picked free on the first address and taken on the others; when another
// process holds it there, everything is closed and a new port is tried (a
// few times). IPv6 addresses are skipped, not an error, when the machine has
// no IPv6 loopback, so the listeners may be fewer than the addresses; each
// one's Addr says where it is. Addresses must be IP literals on loopback.
func ListenSamePort(addrs ...string) ([]net.Listener, int, error) {
	ls, port, err := smtListenSamePort(addrs)
	if err != nil {
		return nil, 0, err
	}
	return slices.DeleteFunc(ls, func(l net.Listener) bool { return l == nil }), port, nil
}

// smtListenSamePort returns one listener per address, nil where an IPv6 address
// was skipped, and the shared port (0 when nothing was bound).
func smtListenSamePort(addrs []string) ([]net.Listener, int, error) {
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil || !ip.IsLoopback() {
			return nil, 0, fmt.Errorf("fakecloud: listen: %q is not a loopback IP literal", a)
		}
	}
	var lastErr error
	for range 8 {
		ls := make([]net.Listener, len(addrs))
		port := 0
		retry := false
		for i, a := range addrs {
			if ip := netip.MustParseAddr(a); ip.Is6() && !ip.Is4In6() && !HasIPv6Loopback() {
				continue
			}
			l, err := net.Listen("tcp", net.JoinHostPort(a, strconv.Itoa(port)))
			if err != nil {
				smtCloseAll(ls)
				if port != 0 && errors.Is(err, syscall.EADDRINUSE) {
					lastErr, retry = err, true
					break
				}
				return nil, 0, fmt.Errorf("fakecloud: listen: %w", err)
			}
			ls[i] = l
			if port == 0 {
				port = l.Addr().(*net.TCPAddr).Port
			}
		}
		if !retry {
			return ls, port, nil
		}
	}
	return nil, 0, fmt.Errorf("fakecloud: listen: no port free on all of %v: %w", addrs, lastErr)
}

func smtCloseAll(ls []net.Listener) {
	for _, l := range ls {
		if l != nil {
			_ = l.Close()
		}
	}
}

// ServeRegionServers serves each handler over TLS on its IP, all on one
// port, each with a fresh self-signed certificate for that IP, and writes
// that certificate to certDir/<ip>.pem: the layout of SLES's
// regionServiceCerts packages, so the directory is a working certLocation.
// IPv6 entries are left out (no listener, no file) when the machine has no
// IPv6 loopback. stop shuts every server down and waits for them.
func ServeRegionServers(certDir string, servers map[string]http.Handler) (port int, stop func(), err error) {
	ips := smtSortedKeys(servers)
	ls, port, err := smtListenSamePort(ips)
	if err != nil {
		return 0, nil, err
	}
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	for i, l := range ls {
		if l == nil {
			continue
		}
		cert, pemBytes, err := SelfSigned(ips[i])
		if err == nil {
			err = os.WriteFile(filepath.Join(certDir, ips[i]+".pem"), pemBytes, 0o644)
		}
		if err != nil {
			smtCloseAll(ls[i:])
			stop()
			return 0, nil, fmt.Errorf("fakecloud: region server %s: %w", ips[i], err)
		}
		stops = append(stops, smtServe(l, servers[ips[i]], &cert))
	}
	return port, stop, nil
}

// ServeUpdateServers serves each update server on its IPs (a server may be
// listed under its IPv4 and its IPv6 address): HTTPS with its own
// certificate on one shared port, plain HTTP on another, as an RMT does on
// 443 and 80. IPv6 addresses are left out when the machine has no IPv6
// loopback. stop shuts every server down and waits for them.
func ServeUpdateServers(servers map[string]*UpdateServer) (httpsPort, httpPort int, stop func(), err error) {
	ips := smtSortedKeys(servers)
	tlsLs, httpsPort, err := smtListenSamePort(ips)
	if err != nil {
		return 0, 0, nil, err
	}
	plainLs, httpPort, err := smtListenSamePort(ips)
	if err != nil {
		smtCloseAll(tlsLs)
		return 0, 0, nil, err
	}
	var stops []func()
	for i, ip := range ips {
		u := servers[ip]
		if tlsLs[i] != nil {
			stops = append(stops, smtServe(tlsLs[i], u, &u.cert))
		}
		if plainLs[i] != nil {
			stops = append(stops, smtServe(plainLs[i], u, nil))
		}
	}
	return httpsPort, httpPort, func() {
		for _, s := range stops {
			s()
		}
	}, nil
}

// smtServe runs h on l (TLS when cert is set) until the returned func is
// called; that func closes every connection and waits for Serve to return.
// HTTP/2 is off so fault handlers can always hijack the connection.
func smtServe(l net.Listener, h http.Handler, cert *tls.Certificate) func() {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
		// Refused handshakes are what several tests are about; they are
		// not worth a line on stderr.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	if cert != nil {
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	return func() {
		_ = srv.Close()
		<-done
	}
}

func smtSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
