package fakecloud

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// The SCC API an update server (RMT, SMT, SCC itself) serves under /connect,
// as far as rancher/scc-operator uses it through SUSE/connect-ng: announce a
// system with a registration code, activate a product with the system's
// credentials, list the activations, keep alive and deregister. The routes,
// bodies and errors follow connect-ng's client; the fake keeps the systems it
// announced in memory and records every request.

// SCCPassword is the password of every system the fake announces.
const SCCPassword = "fake-password"

// SCCRequest is one request to the SCC API, as an UpdateServer recorded it.
type SCCRequest struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	// RegCode is the code of `Authorization: Token token=<code>` (announce);
	// Login the user of Basic authorization (every other call). The fake's
	// codes are test data, so it keeps them.
	RegCode string `json:"regCode,omitempty"`
	Login   string `json:"login,omitempty"`
	// Host is the request's Host header; ServerName the TLS server name
	// (SNI) the client asked for, "" over plain HTTP. Both are the update
	// server's name when the client dialled it by name.
	Host       string `json:"host"`
	ServerName string `json:"serverName,omitempty"`
	// LocalAddr is the address the request arrived at (which of the
	// update server's listeners).
	LocalAddr string `json:"localAddr,omitempty"`
	// Hostname is the body's "hostname" (announce and keepalive): what the
	// client calls itself; the operator sends Rancher's server-url.
	Hostname string `json:"hostname,omitempty"`
	// Status is what the fake answered.
	Status int `json:"status"`
}

// sccSystem is a system the fake announced.
type sccSystem struct {
	id       int
	regCode  string
	hostname string
	// product is the last product activated, nil before.
	product *sccProduct
}

type sccProduct struct {
	Identifier   string `json:"identifier"`
	Version      string `json:"version"`
	Arch         string `json:"arch"`
	FriendlyName string `json:"friendly_name"`
	ProductType  string `json:"product_type"`
}

// sccService is connect-ng's activateResponse: the product activation.
type sccService struct {
	ID            int        `json:"id"`
	URL           string     `json:"url"`
	Name          string     `json:"name"`
	ObsoletedName string     `json:"obsoleted_service_name"`
	Product       sccProduct `json:"product"`
}

// SetRegCode sets the one registration code the SCC API accepts at
// announce; any other is answered 401 "Unknown Registration Code.", as SCC
// does. "" (the default) accepts every non-empty code.
func (u *UpdateServer) SetRegCode(code string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.regCode = code
}

// SCCRequests returns every SCC API request the server received, in order.
func (u *UpdateServer) SCCRequests() []SCCRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]SCCRequest(nil), u.sccLog...)
}

// serveSCC answers a request under /connect/ and records it.
func (u *UpdateServer) serveSCC(w http.ResponseWriter, req *http.Request, f UpdateFaults) {
	rec := SCCRequest{Method: req.Method, Path: req.URL.Path, Host: req.Host}
	if req.TLS != nil {
		rec.ServerName = req.TLS.ServerName
	}
	if a, ok := req.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		rec.LocalAddr = a.String()
	}
	var body struct {
		Hostname   string `json:"hostname"`
		Identifier string `json:"identifier"`
		Version    string `json:"version"`
		Arch       string `json:"arch"`
	}
	if data, err := io.ReadAll(io.LimitReader(req.Body, 1<<20)); err == nil && len(data) > 0 {
		_ = json.Unmarshal(data, &body) // a body that is not JSON leaves the fields empty
	}
	rec.Hostname = body.Hostname
	if code, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Token token="); ok {
		rec.RegCode = code
	}
	login, password, basic := req.BasicAuth()
	rec.Login = login

	if reset, status := u.passingFault(req.Method + " " + req.URL.Path); reset || status != 0 {
		rec.Status = status
		u.mu.Lock()
		u.sccLog = append(u.sccLog, rec)
		u.mu.Unlock()
		if reset {
			resetConnection(w)
			return
		}
		writeJSON(w, status, sccError(http.StatusText(status)))
		return
	}

	status, answer := u.sccAnswer(req, f, rec.RegCode, login, password, basic, body.Hostname, sccProduct{
		Identifier: body.Identifier, Version: body.Version, Arch: body.Arch,
	})
	rec.Status = status
	u.mu.Lock()
	u.sccLog = append(u.sccLog, rec)
	u.mu.Unlock()

	if answer == nil {
		w.WriteHeader(status)
		return
	}
	writeJSON(w, status, answer)
}

// sccAnswer is the status and JSON body (nil: none) of one SCC API call.
func (u *UpdateServer) sccAnswer(req *http.Request, f UpdateFaults, regCode, login, password string, basic bool, hostname string, product sccProduct) (int, any) {
	route := req.Method + " " + req.URL.Path
	if route == "POST /connect/subscriptions/systems" {
		switch {
		case f.SCCAnnounce5xx:
			return http.StatusInternalServerError, sccError("Internal Server Error")
		case regCode == "" || f.SCCRefuseCode:
			return http.StatusUnauthorized, sccError("Unknown Registration Code.")
		}
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.regCode != "" && regCode != u.regCode {
			return http.StatusUnauthorized, sccError("Unknown Registration Code.")
		}
		u.nextID++
		sys := &sccSystem{id: 4241 + u.nextID, regCode: regCode, hostname: hostname}
		loginName := fmt.Sprintf("SCC_fake%04d", u.nextID)
		u.systems[loginName] = sys
		return http.StatusCreated, map[string]any{"id": sys.id, "login": loginName, "password": SCCPassword}
	}

	u.mu.Lock()
	defer u.mu.Unlock()
	sys := u.systems[login]
	if !basic || sys == nil || password != SCCPassword {
		return http.StatusUnauthorized, sccError("Invalid system credentials")
	}
	switch route {
	case "POST /connect/systems/products":
		product.FriendlyName = "Rancher Prime " + product.Version
		product.ProductType = "base"
		sys.product = &product
		return http.StatusCreated, sccServiceOf(product)
	case "GET /connect/systems/activations":
		activations := []any{}
		if sys.product != nil && !f.SCCNoActivations {
			now := time.Now().UTC().Truncate(time.Second)
			activations = append(activations, map[string]any{
				"regcode":    sys.regCode,
				"type":       "full",
				"status":     "ACTIVE",
				"starts_at":  now.Add(-time.Hour).Format(time.RFC3339),
				"expires_at": now.AddDate(1, 0, 0).Format(time.RFC3339),
				"service":    sccServiceOf(*sys.product),
			})
		}
		return http.StatusOK, activations
	case "PUT /connect/systems":
		if hostname != "" {
			sys.hostname = hostname
		}
		return http.StatusNoContent, nil
	case "DELETE /connect/systems":
		delete(u.systems, login)
		return http.StatusNoContent, nil
	}
	return http.StatusNotFound, sccError("Not found")
}

func sccServiceOf(p sccProduct) sccService {
	name := strings.ReplaceAll(p.FriendlyName, " ", "_")
	return sccService{ID: 77, URL: "https://updates.example/" + name, Name: name, Product: p}
}

// sccError is SCC's error body, which connect-ng turns into "Error:
// Registration server returned '<localized_error>' (<status>)".
func sccError(msg string) map[string]string {
	return map[string]string{"type": "error", "error": msg, "localized_error": msg}
}

// passingFault counts down the passing faults that apply to route: reset
// the connection, or answer status; neither when none is left.
func (u *UpdateServer) passingFault(route string) (reset bool, status int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f := &u.faults
	switch route {
	case "POST /connect/subscriptions/systems":
		switch {
		case f.SCCAnnounceResets > 0:
			f.SCCAnnounceResets--
			return true, 0
		case f.SCCAnnounceFailures > 0:
			f.SCCAnnounceFailures--
			if f.SCCAnnounceStatus != 0 {
				return false, f.SCCAnnounceStatus
			}
			return false, http.StatusServiceUnavailable
		}
	case "POST /connect/systems/products":
		if f.SCCActivateFailures > 0 {
			f.SCCActivateFailures--
			return false, http.StatusInternalServerError
		}
	}
	return false, 0
}

// resetConnection ends the request's connection with a TCP RST: the
// client reads "connection reset by peer", as from a load balancer that
// drops a backend mid-request.
func resetConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	raw := conn
	if tc, ok := conn.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = raw.Close()
}
