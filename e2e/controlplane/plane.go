package controlplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Bounds of the start-up and shut-down waits. A cold start measures 3–4 s on
// two cores; the bounds leave room for a machine busy compiling.
const (
	readyTimeout  = 90 * time.Second
	probeTimeout  = 2 * time.Second
	probeInterval = 100 * time.Millisecond
	stopGrace     = 10 * time.Second

	// startAttempts bounds the restarts after a component exits during
	// start-up, which happens when another process takes one of the free
	// ports between our probe and the component's bind.
	startAttempts = 3
	tailLines     = 30
)

// Controllers the controller-manager runs: the CronJob and Job path, the
// ServiceAccount machinery a pod's admission needs, namespace deletion and
// owner-reference garbage collection. Names end in -controller since 1.34.
var controllers = []string{
	"cronjob-controller", "job-controller", "serviceaccount-controller", "serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller", "namespace-controller", "garbage-collector-controller",
}

// Binary names New expects in its binary directory.
var binaryNames = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl"}

// Plane is a running control plane. Its fields are read-only; Stop ends it.
type Plane struct {
	// Dir holds the PKI, the kubeconfigs, etcd's data and each component's
	// log (<component>.log). Stop removes it.
	Dir string
	// Admin is a client-certificate config in group system:masters: it
	// bypasses RBAC, so never use it for a request whose authorization is
	// under test (use ClientAs with a ServiceAccount token).
	Admin *rest.Config
	// AdminKubeconfig is Admin as a kubeconfig file, for kubectl.
	AdminKubeconfig string
	// CAFile is the PEM file of the CA that signed the API server's serving
	// certificate (also the client CA).
	CAFile string
	// Host and Port are where the API server listens, the values of
	// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT for a process that
	// plays a pod.
	Host, Port string
	// KubectlPath is the kubectl built with the other binaries.
	KubectlPath string
	// StartupTime is how long New took, PKI included, until the API server
	// answered /readyz and the controller-manager /healthz.
	StartupTime time.Duration
	// Version is the Kubernetes version the API server reports (its
	// /version gitVersion), for the tests' "proved:" context.
	Version string
	// AuditLog is the API server's audit log (audit.log in Dir) when the
	// plane was started WithAuditLog, else empty. Audit reads it.
	AuditLog string

	comps    []*Process // start order: etcd, kube-apiserver, kube-controller-manager
	spawn    *spawner
	stopOnce sync.Once
	stopErr  error
}

// New starts etcd, kube-apiserver and kube-controller-manager from binDir on
// free loopback ports and returns when all three are healthy. ctx bounds the
// start-up only; the processes run until Stop. On error nothing is left
// running and the error carries the tail of the failing component's log
// (ErrExited, ErrNotReady, ErrBinaryMissing). opts turn on what a plane
// does not do by default (WithAuditLog).
func New(ctx context.Context, binDir string, opts ...Option) (*Plane, error) {
	return newPlane(ctx, binDir, readyTimeout, opts...)
}

// newPlane is New with the bound of each health wait.
func newPlane(ctx context.Context, binDir string, ready time.Duration, opts ...Option) (*Plane, error) {
	if err := checkBinaries(binDir); err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	start := time.Now()
	var errs []error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		p, err := start1(ctx, binDir, ready, o)
		if err == nil {
			p.StartupTime = time.Since(start)
			if p.Version, err = serverVersion(p.Admin); err != nil {
				_ = p.Stop()
				return nil, fmt.Errorf("control plane: %w", err)
			}
			return p, nil
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
		if !errors.Is(err, ErrExited) || ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("control plane: %w", errors.Join(errs...))
}

func checkBinaries(dir string) error {
	if dir == "" {
		return fmt.Errorf("control plane: no binary directory: %w", ErrBinaryMissing)
	}
	for _, b := range binaryNames {
		fi, err := os.Stat(filepath.Join(dir, b))
		if err != nil {
			return fmt.Errorf("control plane: %w: %w", ErrBinaryMissing, err)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("control plane: %s in %s is not executable: %w", b, dir, ErrBinaryMissing)
		}
	}
	return nil
}

func start1(ctx context.Context, binDir string, ready time.Duration, o options) (_ *Plane, err error) {
	dir, err := os.MkdirTemp("", "controlplane-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	p := &Plane{Dir: dir, Host: "127.0.0.1", KubectlPath: filepath.Join(binDir, "kubectl"), spawn: newSpawner()}
	defer func() {
		if err != nil {
			_ = p.Stop()
		}
	}()
	pk, err := writePKI(dir)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	p.CAFile = pk.caCert
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort, kcmPort := ports[0], ports[1], ports[2], ports[3]
	p.Port = apiPort
	server := "https://" + net.JoinHostPort(p.Host, apiPort)
	p.Admin = &rest.Config{
		Host:            server,
		TLSClientConfig: rest.TLSClientConfig{CAFile: pk.caCert, CertFile: pk.adminCert, KeyFile: pk.adminKey},
		QPS:             100,
		Burst:           200,
	}
	p.AdminKubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := writeKubeconfig(p.AdminKubeconfig, server, pk.caCert, pk.adminCert, pk.adminKey); err != nil {
		return nil, err
	}
	kcmKubeconfig := filepath.Join(dir, "kcm.kubeconfig")
	if err := writeKubeconfig(kcmKubeconfig, server, pk.caCert, pk.kcmCert, pk.kcmKey); err != nil {
		return nil, err
	}

	etcdURL := "http://127.0.0.1:" + etcdClient
	peerURL := "http://127.0.0.1:" + etcdPeer
	// etcd and the API server start together: the API server retries etcd.
	if err := p.run(binDir, "etcd",
		"--name=plane", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=plane="+peerURL, "--unsafe-no-fsync",
	); err != nil {
		return nil, err
	}
	apiArgs := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + apiPort,
		"--cert-dir=" + filepath.Join(dir, "apiserver"),
		"--tls-cert-file=" + pk.serverCert, "--tls-private-key-file=" + pk.serverKey, "--client-ca-file=" + pk.caCert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pk.saPub, "--service-account-signing-key-file=" + pk.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=Node,RBAC",
		// The loopback advertise address cannot be an Endpoints IP; without
		// this the API server logs a failed reconcile every 10 s.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}
	if o.audit {
		p.AuditLog = filepath.Join(dir, "audit.log")
		more, err := auditArgs(dir, p.AuditLog)
		if err != nil {
			return nil, err
		}
		apiArgs = append(apiArgs, more...)
	}
	if err := p.run(binDir, "kube-apiserver", apiArgs...); err != nil {
		return nil, err
	}
	apiClient, err := httpClient(pk.caCert, pk.adminCert, pk.adminKey)
	if err != nil {
		return nil, err
	}
	if err := p.waitHTTP(ctx, ready, p.comps[1], apiClient, server+"/readyz"); err != nil {
		return nil, err
	}
	// The controller-manager exits at once when the API server's bootstrap
	// RBAC policy (part of /readyz) does not yet let it read its
	// authentication ConfigMap, so it starts only now.
	if err := p.run(binDir, "kube-controller-manager",
		"--kubeconfig="+kcmKubeconfig, "--authentication-kubeconfig="+kcmKubeconfig,
		"--authorization-kubeconfig="+kcmKubeconfig,
		// The API server has no request-header CA; without this the
		// controller-manager logs its absence several times a second.
		"--authentication-skip-lookup=true",
		"--bind-address=127.0.0.1", "--secure-port="+kcmPort, "--cert-dir="+filepath.Join(dir, "kcm"),
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+pk.saKey, "--root-ca-file="+pk.caCert,
		"--leader-elect=false", "--profiling=false",
		"--controllers="+strings.Join(controllers, ","),
	); err != nil {
		return nil, err
	}
	// The controller-manager serves /healthz with a self-signed certificate
	// it makes at start; the probe stays on loopback and reads no secret.
	kcmClient := &http.Client{Timeout: probeTimeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	if err := p.waitHTTP(ctx, ready, p.comps[2], kcmClient, "https://127.0.0.1:"+kcmPort+"/healthz"); err != nil {
		return nil, err
	}
	return p, nil
}

// Stop ends the controller-manager, the API server and etcd in that order,
// each with SIGTERM and, after a bound, SIGKILL, then removes Dir. It is safe
// to call more than once; later calls return the first result.
func (p *Plane) Stop() error {
	p.stopOnce.Do(func() {
		var errs []error
		for i := len(p.comps) - 1; i >= 0; i-- {
			if err := p.comps[i].Stop(stopGrace); err != nil {
				errs = append(errs, err)
			}
		}
		p.spawn.close()
		if err := os.RemoveAll(p.Dir); err != nil {
			errs = append(errs, fmt.Errorf("control plane: remove dir: %w", err))
		}
		p.stopErr = errors.Join(errs...)
	})
	return p.stopErr
}

// LogTail returns the last lines of each component's log, headed by the
// component's name, for a failure message.
func (p *Plane) LogTail(lines int) string {
	var b strings.Builder
	for _, c := range p.comps {
		fmt.Fprintf(&b, "--- %s (%s)\n%s\n", c.Name, c.LogPath, c.Tail(lines))
	}
	return b.String()
}

// RunKubectl runs kubectl as the admin with stdin (nil for none) and returns
// its standard output. The error carries kubectl's standard error.
func (p *Plane) RunKubectl(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	all := append([]string{"--kubeconfig=" + p.AdminKubeconfig, "--cache-dir=" + filepath.Join(p.Dir, "kubectl-cache")}, args...)
	cmd := exec.CommandContext(ctx, p.KubectlPath, all...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

func (p *Plane) run(binDir, name string, args ...string) error {
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	c, err := p.StartProcess(name, filepath.Join(p.Dir, name+".log"), cmd)
	if err != nil {
		return err
	}
	p.comps = append(p.comps, c)
	return nil
}

// failure is the error of a component that exited or never answered, with
// the tail of its log.
func failure(c *Process, class error, detail string) error {
	if err := c.ExitErr(); err != nil {
		detail = fmt.Sprintf("%s (%v)", detail, err)
	}
	return fmt.Errorf("%s: %w%s; last log lines:\n%s", c.Name, class, detail, c.Tail(tailLines))
}

// waitHTTP polls url, served by c, until it answers 200, any component
// exits, or the bounded wait ends.
func (p *Plane) waitHTTP(ctx context.Context, bound time.Duration, c *Process, client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	tick := time.NewTicker(probeInterval)
	defer tick.Stop()
	last := "no answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("%s: probe: %w", c.Name, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		for _, o := range p.comps {
			if o.Exited() {
				return failure(o, ErrExited, "")
			}
		}
		select {
		case <-ctx.Done():
			return failure(c, ErrNotReady, fmt.Sprintf(" (%s: %s)", url, last))
		case <-tick.C:
		}
	}
}

// freePorts returns n distinct loopback ports the kernel just handed out.
// They are free when returned; a process can still take one before the
// component binds it, which New answers with a fresh attempt.
func freePorts(n int) ([]string, error) {
	var ports []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		_, port, _ := net.SplitHostPort(l.Addr().String())
		ports = append(ports, port)
	}
	return ports, nil
}

func writeKubeconfig(path, server, ca, cert, key string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["plane"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: ca}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificate: cert, ClientKey: key}
	cfg.Contexts["plane"] = &clientcmdapi.Context{Cluster: "plane", AuthInfo: "user"}
	cfg.CurrentContext = "plane"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	return nil
}

func httpClient(caFile, certFile, keyFile string) (*http.Client, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read ca: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	return &http.Client{Timeout: probeTimeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}}, nil
}

// serverVersion asks the API server which Kubernetes it is.
func serverVersion(cfg *rest.Config) (string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("kube-apiserver /version: %w", err)
	}
	return v.GitVersion, nil
}
