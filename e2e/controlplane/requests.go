package controlplane

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// RequestLog is a plain-HTTP reverse proxy on loopback in front of the
// plane's API server that authenticates as the admin and records every
// request. A program given its Kubeconfig has each of its requests counted
// exactly, whatever else talks to the API server (benchrun counts the
// engine's requests per run with it). It uses the admin's rights, not the
// program's: authorization changes no count.
type RequestLog struct {
	// Kubeconfig sends a client to the proxy, which authenticates for it.
	Kubeconfig string
	srv        *http.Server
	mu         sync.Mutex
	requests   Requests
}

// Requests are what a RequestLog recorded: every request in order, as
// "VERB resource/name → status", and their count by "VERB resource".
type Requests struct {
	Seq   []string
	Count map[string]int
}

// Writes counts the requests that write (POST, PUT, PATCH, APPLY, DELETE).
func (r Requests) Writes() int {
	n := 0
	for k, v := range r.Count {
		if verb, _, _ := strings.Cut(k, " "); slices.Contains([]string{"POST", "PUT", "PATCH", "DELETE", "APPLY"}, verb) {
			n += v
		}
	}
	return n
}

// RequestLog starts a RequestLog in front of p's API server and writes its
// kubeconfig into dir. Close stops it.
func (p *Plane) RequestLog(dir string) (*RequestLog, error) {
	target, err := url.Parse(p.Admin.Host)
	if err != nil {
		return nil, err
	}
	tr, err := rest.TransportFor(p.Admin)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rl := &RequestLog{Kubeconfig: filepath.Join(dir, "requests.kubeconfig"), requests: Requests{Count: map[string]int{}}}
	if err := writeKubeconfig(rl.Kubeconfig, "http://"+l.Addr().String(), "", "", ""); err != nil {
		_ = l.Close()
		return nil, err
	}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }, Transport: tr}
	rl.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		rp.ServeHTTP(rec, r)
		verb, resource, sub, name := classify(r.Method, r.Header.Get("Content-Type"), r.URL)
		key, obj := resource, resource
		if name != "" {
			obj += "/" + name
		}
		if sub != "" {
			key, obj = key+"/"+sub, obj+"/"+sub
		}
		rl.mu.Lock()
		defer rl.mu.Unlock()
		rl.requests.Count[verb+" "+key]++
		rl.requests.Seq = append(rl.requests.Seq, fmt.Sprintf("%s %s → %d", verb, obj, rec.code))
	})}
	go func() { _ = rl.srv.Serve(l) }()
	return rl, nil
}

// Take returns what was recorded since the last Take and starts afresh.
func (rl *RequestLog) Take() Requests {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	r := Requests{Seq: rl.requests.Seq, Count: maps.Clone(rl.requests.Count)}
	rl.requests = Requests{Count: map[string]int{}}
	return r
}

// Close stops the proxy.
func (rl *RequestLog) Close() { _ = rl.srv.Close() }

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// classify names a request as the API server's metrics do: the verb (GET of
// one object, LIST or WATCH of a collection, POST, PUT, PATCH, APPLY,
// DELETE), the resource, its subresource, and the object's name.
func classify(method, contentType string, u *url.URL) (verb, resource, sub, name string) {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return method, u.Path, "", ""
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	resource = rest[0]
	if len(rest) > 1 {
		name = rest[1]
	}
	if len(rest) > 2 {
		sub = rest[2]
	}
	verb = method
	if method == http.MethodPatch && strings.HasPrefix(contentType, "application/apply-patch") {
		verb = "APPLY" // server-side apply, as the API server counts it
	}
	if method == http.MethodGet && name == "" {
		verb = "LIST"
		if u.Query().Get("watch") == "true" {
			verb = "WATCH"
		}
	}
	return verb, resource, sub, name
}
