package kube_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http/httpproxy"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
)

// fakeAPIServer answers the two requests SecretStore makes, over real TLS on
// loopback, and records what arrived: the wire format is what RBAC and the
// API server judge, so it is checked here rather than trusted to the fake
// clientset.
type fakeAPIServer struct {
	mu       sync.Mutex
	secret   *corev1.Secret // nil: absent
	forbid   bool
	auth     []string
	requests []string
	apply    struct {
		contentType string
		query       url.Values
		body        map[string]any
	}
}

const secretPath = "/api/v1/namespaces/" + operator.Namespace + "/secrets/" + operator.SecretName

func (f *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	status := func(code int, reason metav1.StatusReason) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: int32(code), Reason: reason,
			Details: &metav1.StatusDetails{Name: operator.SecretName, Kind: "secrets"}})
	}
	object := func(code int, s *corev1.Secret) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(s)
	}
	switch {
	case r.URL.Path != secretPath:
		status(http.StatusNotFound, metav1.StatusReasonNotFound)
	case f.forbid:
		status(http.StatusForbidden, metav1.StatusReasonForbidden)
	case r.Method == http.MethodGet && f.secret == nil:
		status(http.StatusNotFound, metav1.StatusReasonNotFound)
	case r.Method == http.MethodGet:
		object(http.StatusOK, f.secret)
	case r.Method == http.MethodPatch:
		f.apply.contentType = r.Header.Get("Content-Type")
		f.apply.query = r.URL.Query()
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		_ = json.Unmarshal(body, &f.apply.body)
		var s corev1.Secret
		_ = json.Unmarshal(body, &s)
		s.TypeMeta = metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"}
		f.secret = &s
		object(http.StatusCreated, &s)
	default:
		status(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed)
	}
}

func startAPIServer(t *testing.T) (*fakeAPIServer, *httptest.Server, []byte) {
	t.Helper()
	f := &fakeAPIServer{}
	srv := httptest.NewTLSServer(f)
	t.Cleanup(srv.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return f, srv, caPEM
}

// inClusterOptions are the options of a pod reaching the API server at
// srvURL with token, verified by caPEM.
func inClusterOptions(t *testing.T, srvURL string, caPEM []byte, token string) kube.ClientOptions {
	t.Helper()
	u, err := url.Parse(srvURL)
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(u.Host)
	require.NoError(t, err)
	return kube.ClientOptions{Host: host, Port: port, TokenFile: writeFile(t, "token", token), CACert: writeFile(t, "ca.crt", string(caPEM))}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// The in-cluster path and the kubeconfig path both reach the API server with
// the token and verify it with the CA; the Secret goes out as a server-side
// apply of data (not stringData) with our field manager and force.
func TestSecretStoreOverTLS(t *testing.T) {
	tests := map[string]func(t *testing.T, srvURL string, caPEM []byte) kube.ClientOptions{
		"in cluster": func(t *testing.T, srvURL string, caPEM []byte) kube.ClientOptions {
			return inClusterOptions(t, srvURL, caPEM, "sa-token")
		},
		"kubeconfig": func(t *testing.T, srvURL string, caPEM []byte) kube.ClientOptions {
			kc := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: ` + srvURL + `
    certificate-authority: ` + writeFile(t, "ca.crt", string(caPEM)) + `
users:
- name: u
  user:
    token: sa-token
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`
			return kube.ClientOptions{Kubeconfig: writeFile(t, "kubeconfig", kc), Host: "ignored.invalid"}
		},
		"KUBECONFIG list with a missing file": func(t *testing.T, srvURL string, caPEM []byte) kube.ClientOptions {
			kc := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "` + srvURL + `", certificate-authority-data: "` + base64.StdEncoding.EncodeToString(caPEM) + `"}
users:
- name: u
  user: {token: sa-token}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`
			missing := filepath.Join(t.TempDir(), "missing")
			return kube.ClientOptions{Kubeconfig: missing + string(filepath.ListSeparator) + writeFile(t, "kubeconfig", kc)}
		},
	}
	for name, opts := range tests {
		t.Run(name, func(t *testing.T) {
			f, srv, caPEM := startAPIServer(t)
			cfg, err := kube.RESTConfig(opts(t, srv.URL, caPEM), nil)
			require.NoError(t, err)
			clients, err := kube.NewClients(cfg)
			require.NoError(t, err)
			store := &operator.SecretStore{Secrets: clients.Secrets}

			changed, err := store.Write(context.Background(), testValues())
			require.NoError(t, err)
			assert.True(t, changed)
			changed, err = store.Write(context.Background(), testValues())
			require.NoError(t, err)
			assert.False(t, changed)

			f.mu.Lock()
			defer f.mu.Unlock()
			assert.Equal(t, []string{"GET " + secretPath, "PATCH " + secretPath, "GET " + secretPath}, f.requests, "no POST, no PUT")
			for _, a := range f.auth {
				assert.Equal(t, "Bearer sa-token", a)
			}
			assert.Equal(t, "application/apply-patch+yaml", f.apply.contentType)
			assert.Equal(t, kube.FieldManager, f.apply.query.Get("fieldManager"))
			assert.Equal(t, "false", f.apply.query.Get("force"), "creating, the apply does not force: a Secret created since the read is a conflict")
			assert.NotContains(t, f.apply.body, "stringData")
			assert.Contains(t, f.apply.body, "data")
			assert.NotContains(t, f.apply.body["metadata"], "labels")
			assert.NotContains(t, f.apply.body["metadata"], "annotations")
		})
	}
}

func TestSecretStoreForbiddenOverTLS(t *testing.T) {
	f, srv, caPEM := startAPIServer(t)
	f.forbid = true
	cfg, err := kube.RESTConfig(inClusterOptions(t, srv.URL, caPEM, "t"), nil)
	require.NoError(t, err)
	clients, err := kube.NewClients(cfg)
	require.NoError(t, err)

	_, err = (&operator.SecretStore{Secrets: clients.Secrets, Sleep: (&testkit.Sleeps{}).Sleep}).Write(context.Background(), testValues())

	require.ErrorIs(t, err, kube.ErrForbidden)
	assert.True(t, failure.IsPermanent(err))
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Len(t, f.requests, 1, "a 403 is not retried")
}

func TestRESTConfig(t *testing.T) {
	_, _, caPEM := startAPIServer(t)
	ca := writeFile(t, "ca.crt", string(caPEM))
	token := writeFile(t, "token", "t")

	tests := map[string]struct {
		opts      kube.ClientOptions
		permanent error // when set, the sentinel of the expected permanent error
		failed    bool  // a permanent failure without a sentinel of ours
		check     func(t *testing.T, host string, insecure bool, caFile string)
		warned    bool
	}{
		"in cluster": {
			opts: kube.ClientOptions{Host: "10.0.0.1", Port: "443", TokenFile: token, CACert: ca},
			check: func(t *testing.T, host string, insecure bool, caFile string) {
				assert.Equal(t, "https://10.0.0.1:443", host)
				assert.False(t, insecure)
				assert.Equal(t, ca, caFile)
			},
		},
		"IPv6 service host": {
			opts: kube.ClientOptions{Host: "fd00::1", Port: "6443", TokenFile: token, CACert: ca},
			check: func(t *testing.T, host string, _ bool, _ string) {
				assert.Equal(t, "https://[fd00::1]:6443", host)
			},
		},
		"CA False: verification off, with a warning": {
			opts:   kube.ClientOptions{Host: "10.0.0.1", TokenFile: token, CACert: "False"},
			warned: true,
			check: func(t *testing.T, host string, insecure bool, caFile string) {
				assert.Equal(t, "https://10.0.0.1:443", host)
				assert.True(t, insecure)
				assert.Empty(t, caFile)
			},
		},
		"not in a cluster, no kubeconfig": {opts: kube.ClientOptions{}, permanent: kube.ErrNotInCluster},
		"token file missing":              {opts: kube.ClientOptions{Host: "10.0.0.1", TokenFile: filepath.Join(t.TempDir(), "none"), CACert: ca}, failed: true},
		"CA file missing":                 {opts: kube.ClientOptions{Host: "10.0.0.1", TokenFile: token, CACert: filepath.Join(t.TempDir(), "none")}, failed: true},
		"CA file not PEM":                 {opts: kube.ClientOptions{Host: "10.0.0.1", TokenFile: token, CACert: token}, failed: true},
		"kubeconfig missing":              {opts: kube.ClientOptions{Kubeconfig: filepath.Join(t.TempDir(), "none")}, failed: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))

			cfg, err := kube.RESTConfig(tc.opts, log)

			if tc.permanent != nil || tc.failed {
				require.Error(t, err)
				assert.True(t, failure.IsPermanent(err))
				if tc.permanent != nil {
					assert.ErrorIs(t, err, tc.permanent)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, kube.RequestTimeout, cfg.Timeout)
			assert.Equal(t, tc.opts.TokenFile, cfg.BearerTokenFile)
			tc.check(t, cfg.Host, cfg.Insecure, cfg.CAFile)
			assert.Equal(t, tc.warned, strings.Contains(logs.String(), `"level":"WARN"`))
		})
	}
}

// The status subcommand's configuration: a person's kubeconfig, in the
// context they name, with every request bounded like the engine's.
func TestWorkstationConfig(t *testing.T) {
	kubeconfig := writeFile(t, "config", `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://10.0.0.1:6443"}
- name: b
  cluster: {server: "https://10.0.0.2:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: ctx-a
  context: {cluster: a, user: u}
- name: ctx-b
  context: {cluster: b, user: u}
current-context: ctx-a
`)
	tests := map[string]struct {
		path, context string
		host          string
	}{
		"the current context":   {path: kubeconfig, host: "https://10.0.0.1:6443"},
		"the context named":     {path: kubeconfig, context: "ctx-b", host: "https://10.0.0.2:6443"},
		"a context not in it":   {path: kubeconfig, context: "ctx-c"},
		"a kubeconfig not here": {path: filepath.Join(t.TempDir(), "none")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, err := kube.WorkstationConfig(tc.path, tc.context)
			if tc.host == "" {
				require.Error(t, err)
				assert.True(t, failure.IsPermanent(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.host, cfg.Host)
			assert.Equal(t, kube.RequestTimeout, cfg.Timeout)
		})
	}
}

// The status subcommand's Reader goes out through the engine's own clients:
// the token and the CA reach the API server, and a refused read comes back
// as the API server's 403, so status can tell it from an absent object.
func TestReaderOverTLS(t *testing.T) {
	f, srv, caPEM := startAPIServer(t)
	f.secret = &corev1.Secret{TypeMeta: metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: operator.SecretName, Namespace: operator.Namespace},
		Data: map[string][]byte{operator.KeyRegistrationType: []byte("online")}}
	cfg, err := kube.RESTConfig(inClusterOptions(t, srv.URL, caPEM, "reader-token"), nil)
	require.NoError(t, err)
	r, err := kube.NewReader(cfg)
	require.NoError(t, err)

	got, err := r.Secret(context.Background(), operator.Namespace, operator.SecretName)
	require.NoError(t, err)
	assert.Equal(t, "online", string(got.Data[operator.KeyRegistrationType]))

	_, err = r.ConfigMap(context.Background(), "kube-system", "coredns")
	assert.True(t, apierrors.IsNotFound(err), "an absent object is the API server's 404: %v", err)

	f.mu.Lock()
	f.forbid = true
	f.mu.Unlock()
	_, err = r.Secret(context.Background(), operator.Namespace, operator.SecretName)
	assert.True(t, apierrors.IsForbidden(err), "a refused read is the API server's 403, unwrapped: %v", err)

	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Equal(t, []string{"Bearer reader-token", "Bearer reader-token", "Bearer reader-token"}, f.auth)
}

// An egress proxy in the pod's environment (HTTPS_PROXY without the Service
// IP in NO_PROXY, as a cluster-wide proxy setting leaves it) never carries
// the engine's requests to the API server: client-go would apply it.
func TestInClusterNeverUsesProxy(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://proxy.corp:3128")
	t.Setenv("https_proxy", "")
	t.Setenv("NO_PROXY", "cluster.local,.svc")
	t.Setenv("no_proxy", "")
	_, _, caPEM := startAPIServer(t)
	cfg, err := kube.RESTConfig(kube.ClientOptions{Host: "10.0.0.1", Port: "443", TokenFile: writeFile(t, "token", "t"), CACert: writeFile(t, "ca.crt", string(caPEM))}, nil)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodGet, cfg.Host+"/api", nil)
	require.NoError(t, err)
	viaEnv, err := httpproxy.FromEnvironment().ProxyFunc()(req.URL)
	require.NoError(t, err)
	require.NotNil(t, viaEnv, "the environment would send the API server's requests to the proxy")
	require.NotNil(t, cfg.Proxy, "client-go uses ProxyFromEnvironment when Proxy is nil")
	p, err := cfg.Proxy(req)
	require.NoError(t, err)
	assert.Nil(t, p, "the API server is reached directly")
}

// testValues are the Secret's values the client tests write through the
// operator's store: any will do, the tests look at the requests.
func testValues() operator.Values {
	return operator.Values{URL: "https://smt-azure.susecloud.net", RegCode: "INTERNAL-USE-ONLY-0000-0000", InstanceData: "<document>c2lnbmVk</document>", CertPEM: []byte("PEM")}
}
