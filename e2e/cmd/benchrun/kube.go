package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
)

// Bounds of the Kubernetes measurement.
const (
	planeStartBudget = 3 * time.Minute
	settleBudget     = 30 * time.Second
	engineNamespace  = "cattle-scc-system"
	secretName       = "scc-registration"
	// directRuns are the unchanged runs straight to the API server over
	// TLS and HTTP/2, as in a cluster, for wall time and peak RSS.
	directRuns = 5
)

// kubeRun is one engine run against the control plane.
type kubeRun struct {
	name   string
	sample sample
	// requests is every request the engine sent, in order, as the proxy
	// saw it: "VERB resource/name → status".
	requests []string
	// proxy counts the engine's requests by "VERB resource".
	proxy map[string]int
}

func (r kubeRun) writes() int {
	n := 0
	for k, v := range r.proxy {
		if isWrite(strings.Fields(k)[0]) {
			n += v
		}
	}
	return n
}

// kubeResult is the Kubernetes measurement, or why there is none.
type kubeResult struct {
	startup time.Duration
	// runs went through the counting proxy.
	runs []kubeRun
	// direct are unchanged runs straight to the API server (TLS, HTTP/2,
	// client certificate).
	direct []sample
	// directHeap is the Go heap of one more such run.
	directHeap        heapPeak
	secretUnchanged   bool
	corefileUnchanged bool
	err               error
}

// measureKube starts a control plane, prepares what a cluster has (the
// engine's namespace, a CoreDNS ConfigMap), and runs the engine twice
// against a healthy fake cloud through a counting proxy: the first run
// creates the Secret and the hosts entry, the second finds both unchanged.
func measureKube(ctx context.Context, testbin, engine string, log io.Writer) *kubeResult {
	res := &kubeResult{}
	startCtx, cancel := context.WithTimeout(ctx, planeStartBudget)
	defer cancel()
	p, err := controlplane.New(startCtx, testbin)
	if err != nil {
		res.err = err
		return res
	}
	defer func() {
		if err := p.Stop(); err != nil {
			fmt.Fprintf(log, "benchrun: stop control plane: %v\n", err)
		}
	}()
	res.startup = p.StartupTime
	fmt.Fprintf(log, "benchrun: control plane up in %.1fs\n", p.StartupTime.Seconds())
	if res.err = prepareCluster(ctx, p.Admin); res.err != nil {
		return res
	}

	dir, err := os.MkdirTemp("", "benchrun-kube-")
	if err != nil {
		res.err = err
		return res
	}
	defer func() { _ = os.RemoveAll(dir) }()
	cloud, err := fakecloud.Start(fakecloud.Options{Dir: filepath.Join(dir, "cloud")})
	if err != nil {
		res.err = fmt.Errorf("fake cloud: %w", err)
		return res
	}
	defer cloud.Stop()

	px, err := startProxy(p.Admin)
	if err != nil {
		res.err = err
		return res
	}
	defer px.stop()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if res.err = writeProxyKubeconfig(kubeconfig, px.url); res.err != nil {
		return res
	}
	cs, err := kubernetes.NewForConfig(p.Admin)
	if err != nil {
		res.err = err
		return res
	}

	env := append(cloud.Environ(), "REGISTRATION_CODE=BENCH-CODE", "POD_NAME=benchrun")
	var secretRV, corefileRV string
	for _, name := range []string{"first run (creates)", "second run (unchanged)"} {
		px.reset()
		s, stderr, err := runEngine(ctx, engine, env, "--kubeconfig", kubeconfig)
		if err != nil {
			res.err = err
			return res
		}
		if s.code != 0 {
			res.err = fmt.Errorf("%s: exit %d; last log lines:\n%s", name, s.code, lastLines(stderr, 3))
			return res
		}
		run := kubeRun{name: name, sample: s}
		run.requests, run.proxy = px.snapshot()
		res.runs = append(res.runs, run)

		sec, err := cs.CoreV1().Secrets(engineNamespace).Get(ctx, secretName, metav1.GetOptions{})
		if err != nil {
			res.err = fmt.Errorf("%s: the Secret: %w", name, err)
			return res
		}
		cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil {
			res.err = fmt.Errorf("%s: the CoreDNS ConfigMap: %w", name, err)
			return res
		}
		if secretRV != "" {
			res.secretUnchanged = sec.ResourceVersion == secretRV
			res.corefileUnchanged = cm.ResourceVersion == corefileRV
		}
		secretRV, corefileRV = sec.ResourceVersion, cm.ResourceVersion
	}

	for i := range directRuns {
		s, stderr, err := runEngine(ctx, engine, env, "--kubeconfig", p.AdminKubeconfig)
		if err != nil {
			res.err = err
			return res
		}
		if s.code != 0 {
			res.err = fmt.Errorf("direct run %d: exit %d; last log lines:\n%s", i+1, s.code, lastLines(stderr, 3))
			return res
		}
		res.direct = append(res.direct, s)
	}
	if res.directHeap, err = measureHeap(ctx, engine, env, "--kubeconfig", p.AdminKubeconfig); err != nil {
		res.err = err
	}
	return res
}

// prepareCluster creates what the engine expects of a cluster and waits
// until the controllers have finished reacting to the new namespace, so
// their requests do not fall into the measured runs.
func prepareCluster(ctx context.Context, admin *rest.Config) error {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: engineNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("namespace %s: %w", engineNamespace, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"}, Data: map[string]string{"Corefile": fakecloud.KubeadmCorefile}}
	if _, err := cs.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("coredns ConfigMap: %w", err)
	}
	deadline := time.Now().Add(settleBudget)
	for {
		_, errSA := cs.CoreV1().ServiceAccounts(engineNamespace).Get(ctx, "default", metav1.GetOptions{})
		_, errCA := cs.CoreV1().ConfigMaps(engineNamespace).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		switch {
		case errSA == nil && errCA == nil:
			return nil
		case (errSA != nil && !apierrors.IsNotFound(errSA)) || (errCA != nil && !apierrors.IsNotFound(errCA)):
			return errors.Join(errSA, errCA)
		case time.Now().After(deadline):
			return fmt.Errorf("namespace %s not settled after %s", engineNamespace, settleBudget)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// proxy is a plain-HTTP reverse proxy on loopback in front of the API
// server that adds the admin's client certificate and records every
// request. The engine is pointed at it by a kubeconfig, so each request it
// makes is counted exactly, whatever else talks to the API server.
type proxy struct {
	url  string
	srv  *http.Server
	mu   sync.Mutex
	seq  []string
	byVR map[string]int
}

func startProxy(admin *rest.Config) (*proxy, error) {
	target, err := url.Parse(admin.Host)
	if err != nil {
		return nil, err
	}
	tr, err := rest.TransportFor(admin)
	if err != nil {
		return nil, err
	}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: tr,
	}
	px := &proxy{byVR: map[string]int{}}
	px.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		px.mu.Lock()
		defer px.mu.Unlock()
		px.byVR[verb+" "+key]++
		px.seq = append(px.seq, fmt.Sprintf("%s %s → %d", verb, obj, rec.code))
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() { _ = px.srv.Serve(l) }()
	px.url = "http://" + l.Addr().String()
	return px, nil
}

func (px *proxy) reset() {
	px.mu.Lock()
	defer px.mu.Unlock()
	px.seq, px.byVR = nil, map[string]int{}
}

func (px *proxy) snapshot() ([]string, map[string]int) {
	px.mu.Lock()
	defer px.mu.Unlock()
	out := make(map[string]int, len(px.byVR))
	for k, v := range px.byVR {
		out[k] = v
	}
	return append([]string(nil), px.seq...), out
}

func (px *proxy) stop() { _ = px.srv.Close() }

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

func isWrite(verb string) bool {
	switch verb {
	case "POST", "PUT", "PATCH", "DELETE", "APPLY":
		return true
	}
	return false
}

// writeProxyKubeconfig writes a kubeconfig that sends the engine to the
// proxy, which authenticates for it.
func writeProxyKubeconfig(path, server string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bench"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["bench"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	cfg.CurrentContext = "bench"
	return clientcmd.WriteToFile(*cfg, path)
}
