package smt

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/regionconfig"
)

// The test world: SUSE's servers on loopback. Region servers listen on
// 127.0.0.2, 127.0.0.3 and (when the machine has it) [::1], all on one port,
// with their pinned certificates in a temporary certLocation; 127.0.0.9 has
// a pinned certificate but nothing listening. Three update servers of one
// region listen on 127.0.0.11 (and [::1]), 127.0.0.12 and 127.0.0.13.
// Building it costs a dozen RSA keys, so one world serves every case and
// reset puts it back between them.
const (
	region1, region2, region6, regionDead = "127.0.0.2", "127.0.0.3", "::1", "127.0.0.9"

	nameA, nameB, nameC = "smt-a.susecloud.test", "smt-b.susecloud.test", "smt-c.susecloud.test"
	ipA, ipB, ipC       = "127.0.0.11", "127.0.0.12", "127.0.0.13"
	ip6A                = "::1"

	testRegion = "westeurope"
)

type world struct {
	certDir                         string
	regionPort, httpsPort, httpPort int
	pinned                          map[string][]byte // original <ip>.pem contents
	region                          map[string]*swappable
	update                          map[string]*fakecloud.UpdateServer // by name
	log                             *recorder

	mu     sync.Mutex
	dials  map[string]int  // host → dial attempts
	hole   map[string]bool // hosts whose dials hang until cancelled
	pauses testkit.Sleeps
	// hanging counts dials into a hole that have not given up yet;
	// dialsBesideHole counts, per host, dials that began while one did.
	hanging         int
	dialsBesideHole map[string]int
}

// swappable lets each case start with a fresh fake region server (fresh
// counters and faults) behind the same listener.
type swappable struct {
	mu sync.Mutex
	rs *fakecloud.RegionServer
}

func (s *swappable) get() *fakecloud.RegionServer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rs
}

func (s *swappable) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.get().ServeHTTP(w, r) }

func newWorld(t testing.TB) *world {
	t.Helper()
	w := &world{
		certDir: t.TempDir(),
		pinned:  map[string][]byte{},
		region:  map[string]*swappable{},
		update:  map[string]*fakecloud.UpdateServer{},
		log:     &recorder{},
	}
	handlers := map[string]http.Handler{}
	for _, ip := range []string{region1, region2, region6} {
		w.region[ip] = &swappable{}
		handlers[ip] = w.region[ip]
	}
	port, stop, err := fakecloud.ServeRegionServers(w.certDir, handlers)
	require.NoError(t, err)
	t.Cleanup(stop)
	w.regionPort = port

	_, deadPEM, err := fakecloud.SelfSigned(regionDead)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(w.certDir, regionDead+".pem"), deadPEM, 0o644))
	entries, err := os.ReadDir(w.certDir)
	require.NoError(t, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(w.certDir, e.Name()))
		require.NoError(t, err)
		w.pinned[e.Name()] = data
	}

	byIP := map[string]*fakecloud.UpdateServer{}
	for _, s := range []struct{ name, ip string }{{nameA, ipA}, {nameB, ipB}, {nameC, ipC}} {
		u, _, err := fakecloud.NewUpdateServer(s.name)
		require.NoError(t, err)
		w.update[s.name] = u
		byIP[s.ip] = u
	}
	byIP[ip6A] = w.update[nameA]
	w.httpsPort, w.httpPort, stop, err = fakecloud.ServeUpdateServers(byIP)
	require.NoError(t, err)
	t.Cleanup(stop)
	return w
}

// infos is what the region servers hand out by default: A (dual stack when
// the machine has IPv6), B and C, all siblings.
func (w *world) infos() []fakecloud.SMTInfo {
	v6 := ""
	if fakecloud.HasIPv6Loopback() {
		v6 = ip6A
	}
	return []fakecloud.SMTInfo{
		w.update[nameA].Info(ipA, v6, testRegion),
		w.update[nameB].Info(ipB, "", testRegion),
		w.update[nameC].Info(ipC, "", testRegion),
	}
}

// reset heals everything: fresh region servers with the default entries,
// the original pinned certificates, healthy update servers, no dial faults.
func (w *world) reset(t testing.TB) {
	t.Helper()
	for _, s := range w.region {
		s.mu.Lock()
		s.rs = fakecloud.NewRegionServer(w.infos()...)
		s.mu.Unlock()
	}
	files, err := os.ReadDir(w.certDir)
	require.NoError(t, err)
	for _, f := range files {
		require.NoError(t, os.Remove(filepath.Join(w.certDir, f.Name())))
	}
	for name, data := range w.pinned {
		require.NoError(t, os.WriteFile(filepath.Join(w.certDir, name), data, 0o644))
	}
	for _, u := range w.update {
		u.Reset()
	}
	w.mu.Lock()
	w.dials, w.hole = map[string]int{}, map[string]bool{}
	w.pauses.Reset()
	w.hanging, w.dialsBesideHole = 0, map[string]int{}
	w.mu.Unlock()
	w.log.reset()
}

func (w *world) rs(ip string) *fakecloud.RegionServer { return w.region[ip].get() }

// named is server's IPv4-only entry under another SMTserverName, as a
// region server under someone else's control would hand it out.
func (w *world) named(server, name string) fakecloud.SMTInfo {
	ips := map[string]string{nameA: ipA, nameB: ipB, nameC: ipC}
	info := w.update[server].Info(ips[server], "", testRegion)
	info.Name = name
	return info
}

func (w *world) settings() regionconfig.Settings {
	return regionconfig.Settings{
		API:           "regionInfo",
		CertLocation:  w.certDir,
		RegionServers: []string{region1, region2},
	}
}

// finder has test timing: timeouts short enough for a fast suite and long
// enough for RSA handshakes under -race on a busy machine; pauses are
// recorded, not slept; shuffling is off so the configured order holds.
func (w *world) finder() *Finder {
	return &Finder{
		Config: Config{
			RegionPort:   w.regionPort,
			HTTPSPort:    w.httpsPort,
			HTTPPort:     w.httpPort,
			PassTimeouts: []time.Duration{3 * time.Second, 3 * time.Second, 3 * time.Second},
			PassPauses:   []time.Duration{20 * time.Second, 10 * time.Second},
			// The world's update servers are named under susecloud.test and
			// listen on loopback, both of which a production Finder refuses.
			Domains:       []string{"susecloud.test"},
			AllowLoopback: true,
		},
		Log:           slog.New(w.log),
		ProbeTimeout:  500 * time.Millisecond,
		HealthTimeout: time.Second,
		CertTimeout:   time.Second,
		Dial:          w.dial,
		Sleep:         w.pauses.Sleep,
		Shuffle:       func(int, func(i, j int)) {},
	}
}

// dial counts attempts per host and makes hosts in w.hole hang until the
// attempt is cancelled: an unroutable address, without a packet leaving the
// machine.
func (w *world) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.dials[host]++
	hole := w.hole[host]
	if w.hanging > 0 {
		w.dialsBesideHole[host]++
	}
	if hole {
		w.hanging++
	}
	w.mu.Unlock()
	if hole {
		<-ctx.Done()
		w.mu.Lock()
		w.hanging--
		w.mu.Unlock()
		return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func (w *world) dialsTo(host string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dials[host]
}

// dialsWhileHoleHung is how many dials to host began while a dial into a
// black hole was still hanging: what tells a race from one try after the
// other.
func (w *world) dialsWhileHoleHung(host string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dialsBesideHole[host]
}

func (w *world) blackHole(hosts ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range hosts {
		w.hole[h] = true
	}
}

// recorder is a slog.Handler that keeps warnings, which is how an operator
// learns which server was skipped and why.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	return nil
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = nil
}

// servers returns the "server" attribute of every record with message msg.
func (r *recorder) servers(msg string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.records {
		if rec.Message != msg {
			continue
		}
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "server" {
				out = append(out, a.Value.String())
			}
			return true
		})
	}
	return out
}
