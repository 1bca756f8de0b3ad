package fakecloud

import (
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"encoding/pem"
	"encoding/xml"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// SMTInfo is one <smtInfo> element a fake region server hands out: an update
// server as SUSE's region servers describe it. Empty IPv4 is printed as
// SMTserverIP="None" (what the real server does for IPv6-only regions); empty
// IPv6, Registry and Region leave their attribute out. Values are printed as
// given, so a test can put "None", garbage or a colon-free fingerprint in.
type SMTInfo struct {
	IPv4, IPv6, Name, Registry, Fingerprint, Region string
}

// RegionFaults are the ways a RegionServer can misbehave. The zero value is a
// healthy server.
type RegionFaults struct {
	// Down drops every connection without an answer, like a server whose
	// Apache is gone but whose TLS endpoint still accepts.
	Down bool
	// Status, when not 0 or 200, is answered instead of the data, with the
	// real server's "Not found" body.
	Status int
	// FailFirst fails the first N requests after SetFaults with 503, so a
	// test can make a client succeed only on a later pass.
	FailFirst int
	// GarbageXML answers 200 with a body that is not <regionSMTdata>.
	GarbageXML bool
	// NoneIPs prints SMTserverIP="None" and SMTserverIPv6="None" for every
	// entry, whatever the entries say.
	NoneIPs bool
	// Slow delays the answer this long, or until the client gives up.
	Slow time.Duration
	// EndlessBody answers 200 and streams XML-looking bytes until the
	// client hangs up.
	EndlessBody bool
}

// RegionServer is a fake SUSE region server: it answers GET /regionInfo with
// <regionSMTdata>, the only route the real Flask app has. Serve it over TLS
// with a certificate for the address it listens on (ServeRegionServers does
// that and writes the pinned <ip>.pem). Its settings may be changed while it
// serves.
type RegionServer struct {
	mu       sync.Mutex
	entries  []SMTInfo
	faults   RegionFaults
	requests int
	failed   int // requests failed for FailFirst since SetFaults
	hints    []string
}

// NewRegionServer returns a healthy region server handing out entries.
func NewRegionServer(entries ...SMTInfo) *RegionServer {
	return &RegionServer{entries: entries}
}

// SetEntries replaces the update servers the region server hands out.
func (r *RegionServer) SetEntries(entries ...SMTInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = entries
}

// SetFaults replaces the fault switches; RegionFaults{} heals the server.
func (r *RegionServer) SetFaults(f RegionFaults) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = f
	r.failed = 0
}

// Requests is how many /regionInfo requests the server has received.
func (r *RegionServer) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Hints are the regionHint values of every /regionInfo request, in order
// ("" for a request without one).
func (r *RegionServer) Hints() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.hints...)
}

// ServeHTTP implements the /regionInfo route. Entries whose Region equals
// the regionHint (case-insensitively, as the real server lower-cases it) are
// returned; without a hint, or when no entry matches, all entries are (the
// real server would look the requester's IP up instead).
func (r *RegionServer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/regionInfo" || req.Method != http.MethodGet {
		http.Error(w, "Not found", http.StatusNotFound)
		return
	}
	hint := strings.ToLower(req.URL.Query().Get("regionHint"))
	r.mu.Lock()
	r.requests++
	r.hints = append(r.hints, hint)
	f := r.faults
	failNow := r.failed < f.FailFirst
	if failNow {
		r.failed++
	}
	entries := append([]SMTInfo(nil), r.entries...)
	r.mu.Unlock()

	if !smtWait(req, f.Slow) {
		return
	}
	switch {
	case f.Down:
		smtHangUp(w)
		return
	case failNow:
		http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
		return
	case f.Status != 0 && f.Status != http.StatusOK:
		http.Error(w, "Not found", f.Status)
		return
	case f.GarbageXML:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<html><body>Internal error</body></html>"))
		return
	case f.EndlessBody:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		smtEndless(w, req, []byte("<regionSMTdata>\n"))
		return
	}
	if hint != "" {
		var matched []SMTInfo
		for _, e := range entries {
			if strings.EqualFold(e.Region, hint) {
				matched = append(matched, e)
			}
		}
		if len(matched) > 0 {
			entries = matched
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(RegionXML(entries, f.NoneIPs))
}

// RegionXML renders entries the way the real region server does: one
// element per line, SMTserverIP always present ("None" when empty). With
// noneIPs every address is printed as "None".
func RegionXML(entries []SMTInfo, noneIPs bool) []byte {
	var b strings.Builder
	b.WriteString("<regionSMTdata>\n")
	for _, e := range entries {
		v4, v6 := e.IPv4, e.IPv6
		if v4 == "" || noneIPs {
			v4 = "None"
		}
		if v6 != "" && noneIPs {
			v6 = "None"
		}
		b.WriteString("<smtInfo")
		smtAttr(&b, "SMTserverIP", v4)
		if v6 != "" {
			smtAttr(&b, "SMTserverIPv6", v6)
		}
		smtAttr(&b, "SMTserverName", e.Name)
		if e.Registry != "" {
			smtAttr(&b, "SMTregistryName", e.Registry)
		}
		smtAttr(&b, "fingerprint", e.Fingerprint)
		if e.Region != "" {
			smtAttr(&b, "region", e.Region)
		}
		b.WriteString("/>\n")
	}
	b.WriteString("</regionSMTdata>\n")
	return []byte(b.String())
}

func smtAttr(b *strings.Builder, name, value string) {
	b.WriteString(" " + name + `="`)
	_ = xml.EscapeText(b, []byte(value))
	b.WriteString(`"`)
}

// UpdateFaults are the ways an UpdateServer can misbehave. The zero value is
// a healthy RMT.
type UpdateFaults struct {
	// Offline answers the health check with {"state":"offline"}.
	Offline bool
	// Health404 answers the health check with 404, like an old SMT that
	// has no health API.
	Health404 bool
	// WrongCert serves, at /smt.crt and /rmt.crt, a certificate other than
	// the one whose fingerprint the region server advertises (a rotated or
	// substituted server). TLS still uses the real one.
	WrongCert bool
	// OnlyRMTCrt answers /smt.crt with 404, so only /rmt.crt works.
	OnlyRMTCrt bool
	// Slow delays every answer this long, or until the client gives up.
	Slow time.Duration
	// Status5xx answers every request with 503.
	Status5xx bool
	// EndlessBody answers every request with 200 and a body that never
	// ends.
	EndlessBody bool

	// SCCRefuseCode answers every announce (POST
	// /connect/subscriptions/systems) 401 "Unknown Registration Code.",
	// whatever the code.
	SCCRefuseCode bool
	// SCCAnnounce5xx answers every announce 500.
	SCCAnnounce5xx bool
	// SCCNoActivations answers GET /connect/systems/activations with an
	// empty list, as for a system whose product activation did not stick.
	SCCNoActivations bool

	// Passing faults, counted down across listeners: an update server that
	// fails a few requests and then answers again.
	//
	// SCCAnnounceFailures answers that many announces with
	// SCCAnnounceStatus (0: 503 Service Unavailable) and SCC's JSON error.
	SCCAnnounceFailures int
	SCCAnnounceStatus   int
	// SCCAnnounceResets resets the connection (TCP RST, no answer) of that
	// many announces.
	SCCAnnounceResets int
	// SCCActivateFailures answers that many product activations (POST
	// /connect/systems/products, the second call) 500.
	SCCActivateFailures int
}

// UpdateServer is a fake SMT/RMT update server: GET /api/health/status
// (answer {"state":"online"}), /smt.crt and /rmt.crt (its certificate, PEM),
// and the SCC API under /connect/ that rancher/scc-operator registers
// through (scc.go).
// Serve it over HTTPS with the certificate NewUpdateServer returned, and over
// plain HTTP too if the client is not httpsOnly (ServeUpdateServers does
// both). Its faults may be changed while it serves.
type UpdateServer struct {
	// Name is the FQDN the certificate is issued for, the region data's
	// SMTserverName.
	Name string
	// CertPEM is the certificate the server presents and publishes, the one
	// whose fingerprint the region server should advertise.
	CertPEM []byte

	cert    tls.Certificate
	wrong   []byte
	mu      sync.Mutex
	faults  UpdateFaults
	counter map[string]int
	// The SCC API's state (scc.go): the accepted code ("" any), the
	// announced systems by login, the last system number, the request log.
	regCode string
	systems map[string]*sccSystem
	nextID  int
	sccLog  []SCCRequest
}

// NewUpdateServer makes an update server whose self-signed certificate names
// name and any extra hosts (IP literals become IP SANs). The certificate is
// returned for serving TLS; it is also what /smt.crt publishes.
func NewUpdateServer(name string, hosts ...string) (*UpdateServer, tls.Certificate, error) {
	return newUpdateServer(name, leafValidity, hosts...)
}

// newUpdateServer is NewUpdateServer with a certificate valid for validity.
func newUpdateServer(name string, validity time.Duration, hosts ...string) (*UpdateServer, tls.Certificate, error) {
	cert, pemBytes, err := selfSignedFor(validity, append([]string{name}, hosts...)...)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("fakecloud: update server certificate: %w", err)
	}
	_, wrong, err := SelfSigned(append([]string{name}, hosts...)...)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("fakecloud: update server certificate: %w", err)
	}
	return &UpdateServer{Name: name, CertPEM: pemBytes, cert: cert, wrong: wrong, counter: map[string]int{}, systems: map[string]*sccSystem{}}, cert, nil
}

// Fingerprint is the SHA-1 of CertPEM's DER in the form region servers
// publish it: upper-case hex pairs joined by colons.
func (u *UpdateServer) Fingerprint() string {
	return smtColonFingerprint(u.CertPEM)
}

// Info describes the server for a RegionServer: its name, the given
// addresses and region, its fingerprint, and the registry name SUSE derives
// from the FQDN.
func (u *UpdateServer) Info(ipv4, ipv6, region string) SMTInfo {
	return SMTInfo{IPv4: ipv4, IPv6: ipv6, Name: u.Name, Registry: "registry-" + u.Name, Fingerprint: u.Fingerprint(), Region: region}
}

// SetFaults replaces the fault switches; UpdateFaults{} heals the server.
func (u *UpdateServer) SetFaults(f UpdateFaults) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.faults = f
}

// Reset heals the server and forgets the requests it counted, the SCC
// requests it recorded, the systems it announced and its registration code,
// so one server can serve several test cases.
func (u *UpdateServer) Reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.faults = UpdateFaults{}
	u.counter = map[string]int{}
	u.regCode = ""
	u.systems = map[string]*sccSystem{}
	u.sccLog = nil
}

// setFault switches one fault on, keeping the others.
func (u *UpdateServer) setFault(on func(*UpdateFaults)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	on(&u.faults)
}

// Requests is how many requests for path (e.g. "/smt.crt") the server has
// received, over every listener.
func (u *UpdateServer) Requests(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.counter[path]
}

// Paths are the paths the server has received requests for, sorted.
func (u *UpdateServer) Paths() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	paths := make([]string, 0, len(u.counter))
	for p := range u.counter {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths
}

// ServeHTTP implements the three routes and the SCC API.
func (u *UpdateServer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	u.mu.Lock()
	u.counter[req.URL.Path]++
	f := u.faults
	u.mu.Unlock()

	if !smtWait(req, f.Slow) {
		return
	}
	if f.Status5xx {
		http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
		return
	}
	if strings.HasPrefix(req.URL.Path, "/connect/") {
		u.serveSCC(w, req, f)
		return
	}
	known := req.URL.Path == "/api/health/status" || req.URL.Path == "/smt.crt" || req.URL.Path == "/rmt.crt"
	if f.EndlessBody && known {
		smtEndless(w, req, []byte(`{"state":"online"`))
		return
	}
	switch req.URL.Path {
	case "/api/health/status":
		if f.Health404 {
			http.NotFound(w, req)
			return
		}
		state := "online"
		if f.Offline {
			state = "offline"
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"state":%q}`, state)
	case "/smt.crt", "/rmt.crt":
		if f.OnlyRMTCrt && req.URL.Path == "/smt.crt" {
			http.NotFound(w, req)
			return
		}
		body := u.CertPEM
		if f.WrongCert {
			body = u.wrong
		}
		w.Header().Set("Content-Type", "application/x-x509-ca-cert")
		_, _ = w.Write(body)
	default:
		http.NotFound(w, req)
	}
}

// smtColonFingerprint is the SHA-1 of the first PEM block's DER as
// "AA:BB:…"; "" when there is none. It is computed here rather than taken
// from the engine so the fake checks the engine instead of agreeing with it.
func smtColonFingerprint(pemBytes []byte) string {
	der := smtFirstDER(pemBytes)
	if der == nil {
		return ""
	}
	sum := sha1.Sum(der)
	h := strings.ToUpper(hex.EncodeToString(sum[:]))
	pairs := make([]string, 0, len(h)/2)
	for i := 0; i < len(h); i += 2 {
		pairs = append(pairs, h[i:i+2])
	}
	return strings.Join(pairs, ":")
}

func smtFirstDER(pemBytes []byte) []byte {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil
	}
	return block.Bytes
}

// smtWait sleeps d or until the request is abandoned; false means abandoned.
func smtWait(req *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-req.Context().Done():
		return false
	}
}

// smtHangUp closes the connection without writing a response.
func smtHangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	// Only HTTP/2 cannot be hijacked, and the Serve helpers never speak it.
	http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
}

// smtEndless writes prefix and then filler until the client goes away.
func smtEndless(w http.ResponseWriter, req *http.Request, prefix []byte) {
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(prefix); err != nil {
		return
	}
	chunk := []byte(strings.Repeat("<!-- filler -->\n", 256))
	for req.Context().Err() == nil {
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
}
