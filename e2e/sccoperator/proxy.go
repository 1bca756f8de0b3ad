package sccoperator

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoRoute means the proxy refused a CONNECT: the name has no address
// (like NXDOMAIN in a pod) or the port is not one it forwards.
var ErrNoRoute = errors.New("no route")

// ErrNotLoopback means the proxy refused a CONNECT because its route gave
// an address off loopback: the proxy never dials out of the machine.
var ErrNotLoopback = errors.New("route not on loopback")

// Route maps the host:port a client asked to CONNECT to the address:port
// the proxy dials, which must be on loopback. An error refuses the tunnel
// with 502 Bad Gateway.
type Route func(ctx context.Context, hostport string) (string, error)

// Tunnel is one CONNECT the proxy answered.
type Tunnel struct {
	// Target is what the client asked for (name:port).
	Target string
	// Dialed is the loopback address the proxy connected to; "" when
	// refused.
	Dialed string
	// Err is why the tunnel was refused or failed, nil when it opened.
	Err error
}

// Proxy is an HTTP CONNECT proxy on 127.0.0.1 that stands in for the
// cluster's DNS for one client: a process given HTTPS_PROXY=Proxy.URL
// reaches a name through it, and the TLS inside the tunnel is the client's
// own, so the certificate is checked against the name as usual. Only
// CONNECT is served, and only to loopback addresses.
type Proxy struct {
	// URL is http://127.0.0.1:<port>, the value of HTTPS_PROXY.
	URL string

	route Route
	srv   *http.Server
	wg    sync.WaitGroup

	mu      sync.Mutex
	tunnels []Tunnel
	conns   map[net.Conn]struct{}
	closed  bool
}

// NewProxy starts a proxy that sends each CONNECT where route says. Close
// stops it.
func NewProxy(route Route) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p := &Proxy{URL: "http://" + l.Addr().String(), route: route, conns: map[net.Conn]struct{}{}}
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.serve),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = p.srv.Serve(l)
	}()
	return p, nil
}

// Tunnels returns every CONNECT the proxy answered, in order.
func (p *Proxy) Tunnels() []Tunnel {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Tunnel(nil), p.tunnels...)
}

// Close stops the proxy, closes every open tunnel and waits for them.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) record(t Tunnel) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tunnels = append(p.tunnels, t)
}

// track registers conns for Close; false when the proxy is closing.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	p.wg.Add(1)
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
		_ = c.Close()
	}
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "only CONNECT is served", http.StatusMethodNotAllowed)
		return
	}
	t := Tunnel{Target: r.Host}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	addr, err := p.route(ctx, r.Host)
	if err == nil {
		err = checkLoopback(addr)
	}
	if err != nil {
		t.Err = err
		p.record(t)
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	t.Dialed = addr
	var d net.Dialer
	upstream, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Err = err
		p.record(t)
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = upstream.Close()
		http.Error(w, "cannot hijack", http.StatusInternalServerError)
		return
	}
	client, buf, err := hj.Hijack()
	if err != nil {
		_ = upstream.Close()
		return
	}
	p.record(t)
	if !p.track(client, upstream) {
		_ = client.Close()
		_ = upstream.Close()
		return
	}
	go func() {
		defer p.wg.Done()
		defer p.untrack(client, upstream)
		if _, err := client.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
			return
		}
		splice(client, buf.Reader, upstream)
	}()
}

// splice copies both ways until either side ends; bytes the client sent
// after its CONNECT request are still in buffered.
func splice(client net.Conn, buffered *bufio.Reader, upstream net.Conn) {
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(upstream, buffered)
		closeWrite(upstream)
		done <- struct{}{}
	}()
	go func() {
		_, err := io.Copy(client, upstream)
		if errors.Is(err, syscall.ECONNRESET) {
			// Pass a reset on as a reset, as a pod's own connection would
			// see it, rather than as an orderly end of the stream.
			resetConn(client)
		} else {
			closeWrite(client)
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}

// resetConn closes c with a TCP RST.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

func checkLoopback(addr string) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return fmt.Errorf("proxy: route gave %q, not an IP and port: %w", addr, err)
	}
	if !ap.Addr().Unmap().IsLoopback() {
		return fmt.Errorf("proxy: route gave %s: %w", addr, ErrNotLoopback)
	}
	return nil
}

// StaticRoute routes each host:port key to its address and refuses every
// other target.
func StaticRoute(routes map[string]string) Route {
	return func(_ context.Context, hostport string) (string, error) {
		if a, ok := routes[strings.ToLower(hostport)]; ok {
			return a, nil
		}
		return "", fmt.Errorf("proxy: %s: %w", hostport, ErrNoRoute)
	}
}
