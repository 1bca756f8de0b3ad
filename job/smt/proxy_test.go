package smt

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/proxyconnect"
)

// connectProxy is a forward proxy on loopback that serves CONNECT only, to
// loopback only, and logs every target it passed.
type connectProxy struct {
	url *url.URL
	// refuse, when set, is the status line every CONNECT gets ("502 Bad
	// Gateway"), as a proxy that cannot or will not open the tunnel.
	refuse  string
	mu      sync.Mutex
	targets []string
}

func startConnectProxy(t *testing.T) *connectProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &connectProxy{url: &url.URL{Scheme: "http", Host: l.Addr().String()}}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { p.serve(c) })
		}
	})
	return p
}

func (p *connectProxy) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		_, _ = io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	if p.refuse != "" {
		_, _ = io.WriteString(c, "HTTP/1.1 "+p.refuse+"\r\n\r\n")
		return
	}
	host, _, err := net.SplitHostPort(req.Host)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		_, _ = io.WriteString(c, "HTTP/1.1 403 Forbidden\r\n\r\n") // never off the machine
		return
	}
	up, err := net.Dial("tcp", req.Host)
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer up.Close()
	p.mu.Lock()
	p.targets = append(p.targets, req.Host)
	p.mu.Unlock()
	_, _ = io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n")
	done := make(chan struct{})
	go func() { _, _ = io.Copy(up, br); close(done) }()
	_, _ = io.Copy(c, up)
	_ = c.Close()
	<-done
}

func (p *connectProxy) passed() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

// Behind an egress proxy the region servers are asked through it (their
// pinned certificate checked inside the tunnel), and the update servers
// directly: phase 4 checks the address CoreDNS will pin.
func TestRegionServersThroughProxy(t *testing.T) {
	w := newWorld(t)
	w.reset(t)
	p := startConnectProxy(t)
	f := w.finder()
	f.Proxy = http.ProxyURL(p.url) // Go exempts loopback from HTTPS_PROXY; the default is tested below
	got, err := f.Find(t.Context(), w.settings(), testRegion)
	require.NoError(t, err)
	assert.Equal(t, nameA, got.Name)
	passed := p.passed()
	require.NotEmpty(t, passed, "the region server was asked through the proxy")
	for _, target := range passed {
		host, _, _ := net.SplitHostPort(target)
		assert.Contains(t, []string{region1, region2, region6}, host, "only region servers pass the proxy, not %s", target)
	}
	t.Logf("proved: behind a CONNECT proxy the region servers were asked through it (%v) with their pins, the update servers directly", passed)
}

// A proxy that refuses the tunnel is named in the error, with its
// host:port, its credentials masked and its answer; before, the run said
// "Bad Gateway" from the region server's address.
func TestRegionServersProxyRefusesTheTunnel(t *testing.T) {
	tests := map[string]struct {
		refuse string
		code   int
	}{
		"502: the proxy cannot reach the region server": {refuse: "502 Bad Gateway", code: 502},
		"403: the proxy's policy forbids it":            {refuse: "403 Forbidden", code: 403},
		"407: the proxy wants other credentials":        {refuse: "407 Proxy Authentication Required", code: 407},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			w.reset(t)
			p := startConnectProxy(t)
			p.refuse = tc.refuse
			withCredentials := *p.url
			withCredentials.User = url.UserPassword("engine", "s3cret-proxy-password")
			f := w.finder()
			f.Proxy = http.ProxyURL(&withCredentials)
			_, err := f.Find(t.Context(), w.settings(), testRegion)
			require.Error(t, err)
			var refused *proxyconnect.RefusedError
			require.ErrorAs(t, err, &refused, "%v", err)
			assert.Equal(t, tc.code, refused.StatusCode)
			msg := err.Error()
			assert.Contains(t, msg, "the proxy http://engine:xxxxx@"+p.url.Host+" refused to open a tunnel (CONNECT) to ")
			assert.Contains(t, msg, ": "+tc.refuse)
			assert.NotContains(t, msg, "s3cret-proxy-password")
			t.Logf("proved: a proxy answering %s to CONNECT: the run says %q", tc.refuse, msg)
		})
	}
}

// The default follows HTTPS_PROXY and NO_PROXY as Go's net/http does,
// read when the request is made.
func TestRegionProxyFollowsEnvironment(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://proxy.corp:3128")
	t.Setenv("https_proxy", "")
	t.Setenv("NO_PROXY", "40.121.202.140")
	t.Setenv("no_proxy", "")
	for target, want := range map[string]string{
		"https://23.100.36.229/regionInfo":  "proxy.corp:3128",
		"https://40.121.202.140/regionInfo": "",
	} {
		u, err := url.Parse(target)
		require.NoError(t, err)
		p, err := (&Finder{}).proxy()(&http.Request{URL: u})
		require.NoError(t, err)
		if want == "" {
			assert.Nil(t, p, target)
		} else {
			require.NotNil(t, p, target)
			assert.Equal(t, want, p.Host, target)
		}
	}
}
