package controlplane

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Environment variables the test helpers read. They are the test binary's
// inputs (make test sets K8S_TESTBIN, CI sets CI), read only here.
const (
	// EnvTestbin names the directory holding etcd, kube-apiserver,
	// kube-controller-manager and kubectl (e2e/scripts/k8s-testbin.sh).
	EnvTestbin = "K8S_TESTBIN"
	// EnvCI, when non-empty, turns a missing binary from a skip into a
	// failure: CI must never pass by skipping the real-cluster tests.
	EnvCI = "CI"
)

const (
	startBudget    = 3 * time.Minute
	requestTimeout = 30 * time.Second
	// tokenSeconds is the lifetime of minted tokens; the API server's
	// minimum is ten minutes.
	tokenSeconds = 3600
)

// Binaries returns the directory named by K8S_TESTBIN after checking that it
// holds all four binaries. When it does not, the test is skipped, unless CI is
// set: then it fails, so a CI run cannot go green without these tests.
func Binaries(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(EnvTestbin)
	err := checkBinaries(dir)
	if err == nil {
		return dir
	}
	if os.Getenv(EnvCI) != "" {
		t.Fatalf("%v (%s=%q; CI is set, so the real-control-plane tests must run: make testbin)", err, EnvTestbin, dir)
	}
	t.Skipf("%v (%s=%q; make testbin builds them)", err, EnvTestbin, dir)
	return ""
}

// Start starts a plane for this test alone, with opts (WithAuditLog), and
// stops it when the test ends. Prefer Shared: every plane costs a few
// seconds and about 400 MB.
func Start(t testing.TB, opts ...Option) *Plane {
	t.Helper()
	dir := Binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), startBudget)
	defer cancel()
	p, err := New(ctx, dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("control plane started in %.1fs (kube-apiserver %s, %s)", p.StartupTime.Seconds(), p.Version, p.Dir)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control-plane logs:\n%s", p.LogTail(tailLines))
		}
		if err := p.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	return p
}

var shared struct {
	once  sync.Once
	plane *Plane
	err   error
}

// Shared returns the test binary's one plane, starting it on first use.
// The package's TestMain must call Main, which stops it after the last test;
// without it the components live until the test binary exits and are then
// killed by their parent-death signal. Tests sharing the plane must keep to
// their own namespaces. When the calling test fails, the tail of every
// component's log is added to its output.
func Shared(t testing.TB) *Plane {
	t.Helper()
	dir := Binaries(t)
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startBudget)
		defer cancel()
		shared.plane, shared.err = New(ctx, dir)
		if shared.err == nil {
			// Also on stdout, so a verbose run shows it once without -v
			// on every test.
			fmt.Printf("control plane started in %.1fs (kube-apiserver %s)\n", shared.plane.StartupTime.Seconds(), shared.plane.Version)
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	p := shared.plane
	t.Logf("control plane started in %.1fs (shared, kube-apiserver %s, %s)", p.StartupTime.Seconds(), p.Version, p.Dir)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control-plane logs:\n%s", p.LogTail(tailLines))
		}
	})
	return p
}

// Main runs the tests and then stops the shared plane, if one was started.
// Call it from TestMain: os.Exit(controlplane.Main(m)). A failed stop (a
// component that ignored SIGTERM) fails the run.
func Main(m *testing.M) int {
	code := m.Run()
	if p := shared.plane; p != nil {
		start := time.Now()
		err := p.Stop()
		fmt.Printf("control plane stopped in %.1fs\n", time.Since(start).Seconds())
		if err != nil {
			fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// AdminClient returns a clientset for the admin (system:masters). It
// bypasses RBAC: use it to arrange and inspect, never for a request whose
// authorization is under test.
func (p *Plane) AdminClient(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(p.Admin)
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	return cs
}

// Kubectl runs kubectl as the admin and returns its standard output; an
// error fails the test with kubectl's standard error.
func (p *Plane) Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	out, err := p.RunKubectl(ctx, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// Kustomize renders the kustomization in dir (`kubectl kustomize dir`).
func (p *Plane) Kustomize(t testing.TB, dir string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	out, err := p.RunKubectl(ctx, nil, "kustomize", dir)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Apply applies a YAML stream as the admin with server-side apply (field
// manager "controlplane-test"); conflicts with other managers are forced.
func (p *Plane) Apply(t testing.TB, yaml []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if _, err := p.RunKubectl(ctx, yaml, "apply", "--server-side", "--force-conflicts",
		"--field-manager=controlplane-test", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// ServiceAccountToken mints a token for ServiceAccount ns/sa through the
// TokenRequest API, valid for an hour. Without audiences it is valid for the
// API server, like the token a pod gets.
func (p *Plane) ServiceAccountToken(t testing.TB, ns, sa string, audiences ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	token, err := mintToken(ctx, p.AdminClient(t), ns, sa, audiences, nil)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// ClientAs returns a config that authenticates with the bearer token and
// trusts only the plane's CA: requests made with it are authorized as the
// token's subject.
func (p *Plane) ClientAs(t testing.TB, token string) *rest.Config {
	t.Helper()
	return &rest.Config{
		Host:            p.Admin.Host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: p.CAFile},
		QPS:             p.Admin.QPS,
		Burst:           p.Admin.Burst,
	}
}

func mintToken(ctx context.Context, cs kubernetes.Interface, ns, sa string, audiences []string, bound *authenticationv1.BoundObjectReference) (string, error) {
	exp := int64(tokenSeconds)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: &exp, BoundObjectRef: bound},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", ns, sa, err)
	}
	return tr.Status.Token, nil
}
