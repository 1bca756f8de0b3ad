package sccoperator

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
)

// The pinned revisions of rancher/scc-operator (e2e/scripts/scc-operator.sh
// builds both).
const (
	// CommitRMT is branch add-rmt-support (PR #112): the first revision that
	// trusts the first certificate of registrationUrlCert besides the
	// system roots, so it can register with an RMT whose certificate is
	// self-signed or from a private CA. The engine needs it.
	CommitRMT = "dad26bb7a9102580bc74747e4159e83f528a25b8"
	// CommitMain is main (2026-11): it ignores registrationUrlCert and
	// trusts only the system roots.
	CommitMain = "cee65c0860b6dd26db22363181730b88d4330e5e"
)

// Environment variables the test helpers read (make test sets them).
const (
	// EnvDir names the directory holding <commit>/operator, the cache of
	// e2e/scripts/scc-operator.sh ($CACHE_DIR/scc-operator).
	EnvDir = "SCC_OPERATOR_DIR"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

const (
	readyTimeout = 90 * time.Second
	stopGrace    = 15 * time.Second
	logTailLines = 60
	// lockFile orders operators on this machine (see the package comment).
	lockFile = "registration-engine-scc-operator.lock"
)

// Binary returns the operator built for commit, from $SCC_OPERATOR_DIR.
// When it is missing the test is skipped, unless CI is set: then it fails,
// so a CI run cannot go green without the operator tests.
func Binary(t testing.TB, commit string) string {
	t.Helper()
	dir := os.Getenv(EnvDir)
	var err error
	if dir == "" {
		err = fmt.Errorf("%s is not set", EnvDir)
	} else {
		bin := filepath.Join(dir, commit, "operator")
		var fi os.FileInfo
		if fi, err = os.Stat(bin); err == nil && fi.Mode()&0o111 != 0 {
			return bin
		} else if err == nil {
			err = fmt.Errorf("%s is not executable", bin)
		}
	}
	msg := fmt.Sprintf("rancher/scc-operator %.7s not built: %v (make scc-operator builds it)", commit, err)
	if os.Getenv(controlplane.EnvCI) != "" {
		t.Fatalf("%s; CI is set, so the operator tests must run", msg)
	}
	t.Skip(msg)
	return ""
}

// Options shape one operator process.
type Options struct {
	// Binary is the operator to run (see Binary).
	Binary string
	// ProxyURL, when set, is the operator's HTTPS_PROXY and HTTP_PROXY
	// (see Proxy). The API server is on loopback, which Go never proxies.
	ProxyURL string
	// SystemRoots is the PEM bundle the operator finds as the system's
	// trusted roots (SSL_CERT_FILE). Empty: a throw-away CA that signs
	// nothing, so the operator trusts only what the Secret hands it
	// (registrationUrlCert, on revisions that read it), whatever this
	// machine's own bundle holds.
	SystemRoots []byte
	// Env is added to the operator's environment (e.g. DEV_MODE=true).
	Env []string
	// Debug runs it with --debug.
	Debug bool
}

// Operator is one running rancher/scc-operator process.
type Operator struct {
	// LogPath is the file receiving its standard output and error.
	LogPath string
	// Dir holds its kubeconfig, its roots and its log.
	Dir string
	// StartupTime is how long Run waited for it to lead and to have
	// installed the Registration CRD.
	StartupTime time.Duration

	proc    *controlplane.Process
	unlock  func()
	stopped bool
}

// Run starts the operator against plane p as ServiceAccount
// cattle-scc-system/rancher-scc-operator (Install is called first) and
// returns once it holds its leader Lease and its Registration CRD is
// established. It stops with SIGTERM when the test ends; if the test
// failed, the tail of its log is added to the test's output. Only one
// operator runs at a time on a machine: Run waits for the previous one.
func Run(t testing.TB, p *controlplane.Plane, opts Options) *Operator {
	t.Helper()
	Install(t, p)
	unlock, err := lockMachine()
	if err != nil {
		t.Fatalf("scc-operator: %v", err)
	}
	o := &Operator{Dir: t.TempDir(), unlock: unlock}
	o.LogPath = filepath.Join(o.Dir, "operator.log")
	t.Cleanup(func() {
		if err := o.Stop(); err != nil {
			t.Errorf("scc-operator: %v", err)
		}
		if t.Failed() {
			t.Logf("scc-operator log (%s), last %d lines:\n%s", o.LogPath, logTailLines, o.LogTail(logTailLines))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := clearLease(ctx, p, t); err != nil {
		t.Fatalf("scc-operator: %v", err)
	}
	if err := o.start(p, opts, p.ServiceAccountToken(t, Namespace, ServiceAccount)); err != nil {
		t.Fatalf("scc-operator: %v", err)
	}
	start := time.Now()
	if err := o.waitReady(ctx, p, t); err != nil {
		t.Fatalf("scc-operator: %v\n%s", err, o.LogTail(logTailLines))
	}
	o.StartupTime = time.Since(start)
	t.Logf("scc-operator %s leads and serves registrations after %.1fs (log %s)", opts.Binary, o.StartupTime.Seconds(), o.LogPath)
	return o
}

// start writes the kubeconfig and the roots and starts the process.
func (o *Operator) start(p *controlplane.Plane, opts Options, token string) error {
	kubeconfig := filepath.Join(o.Dir, "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["plane"] = &clientcmdapi.Cluster{Server: p.Admin.Host, CertificateAuthority: p.CAFile}
	cfg.AuthInfos[ServiceAccount] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["operator"] = &clientcmdapi.Context{Cluster: "plane", AuthInfo: ServiceAccount, Namespace: Namespace}
	cfg.CurrentContext = "operator"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	roots := opts.SystemRoots
	if len(roots) == 0 {
		ca, err := fakecloud.NewCA("nothing-trusted CA")
		if err != nil {
			return err
		}
		roots = ca.PEM
	}
	rootsFile := filepath.Join(o.Dir, "system-roots.pem")
	if err := os.WriteFile(rootsFile, roots, 0o644); err != nil {
		return err
	}
	args := []string{"--kubeconfig=" + kubeconfig, "--operator-namespace=" + Namespace, "--lease-namespace=" + LeaseNamespace}
	if opts.Debug {
		args = append(args, "--debug")
	}
	cmd := exec.Command(opts.Binary, args...)
	// Nothing of the test's environment: no KUBECONFIG, no proxy, no
	// bundle of this machine leaks in.
	cmd.Env = append([]string{
		"PATH=/usr/bin:/bin",
		"HOME=" + o.Dir,
		"SSL_CERT_FILE=" + rootsFile,
		"SSL_CERT_DIR=" + o.Dir,
	}, opts.Env...)
	if opts.ProxyURL != "" {
		cmd.Env = append(cmd.Env, "HTTPS_PROXY="+opts.ProxyURL, "HTTP_PROXY="+opts.ProxyURL, "NO_PROXY=127.0.0.1,localhost")
	}
	proc, err := p.StartProcess("rancher/scc-operator", o.LogPath, cmd)
	if err != nil {
		return fmt.Errorf("start %s: %w", opts.Binary, err)
	}
	o.proc = proc
	return nil
}

// waitReady polls until the operator holds its Lease and its Registration
// CRD is established, or it exits.
func (o *Operator) waitReady(ctx context.Context, p *controlplane.Plane, t testing.TB) error {
	admin := p.AdminClient(t)
	dyn, err := dynamic.NewForConfig(p.Admin)
	if err != nil {
		return err
	}
	var state string
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-o.proc.Done():
			return false, fmt.Errorf("exited: %w", o.proc.ExitErr())
		default:
		}
		var ok bool
		ok, state, err = Serving(ctx, admin, dyn)
		return ok, err
	})
	if err != nil {
		return fmt.Errorf("not ready within %s (%s): %w", readyTimeout, state, err)
	}
	return nil
}

// Serving reports whether an operator, wherever it runs, is ready for a
// Secret: it holds its leader Lease and its Registration CRD is
// established. state says what is still missing ("no leader yet", …); err
// is an API error other than NotFound.
func Serving(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) (ok bool, state string, err error) {
	const crd = "registrations.scc.cattle.io"
	l, err := cs.CoordinationV1().Leases(LeaseNamespace).Get(ctx, LeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && (l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "")) {
		return false, "no leader yet", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("lease %s/%s: %w", LeaseNamespace, LeaseName, err)
	}
	u, err := dyn.Resource(crdResource).Get(ctx, crd, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, "leads, no " + crd + " yet", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("crd %s: %w", crd, err)
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true, "serving", nil
		}
	}
	return false, "leads, " + crd + " not established", nil
}

// Stop sends SIGTERM (a graceful stop releases the leader Lease), waits,
// and kills the process if it is still there after a grace period, which
// is an error. Safe to call more than once.
func (o *Operator) Stop() error {
	if o.stopped {
		return nil
	}
	o.stopped = true
	defer o.unlock()
	if o.proc == nil {
		return nil
	}
	if o.proc.Exited() {
		return fmt.Errorf("operator had exited before Stop: %w", o.proc.ExitErr())
	}
	return o.proc.Stop(stopGrace)
}

// Log returns the operator's whole log so far.
func (o *Operator) Log() string {
	if o.proc == nil {
		return "(not started)"
	}
	return o.proc.Log()
}

// LogTail returns the last n lines of the operator's log.
func (o *Operator) LogTail(n int) string {
	if o.proc == nil {
		return "(not started)"
	}
	return o.proc.Tail(n)
}

// lockMachine takes the machine-wide operator lock (flock on a file in the
// temporary directory), waiting for the holder; the returned func releases
// it. The kernel releases it too when the test binary dies.
func lockMachine() (func(), error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() { _ = f.Close() }, nil
}
