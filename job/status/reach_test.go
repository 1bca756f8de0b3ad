package status

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// kubeconfigFor writes a kubeconfig whose server is server, trusting the
// certificate of ca (nil: no CA data).
func kubeconfigFor(t *testing.T, server string, ca *httptest.Server) string {
	t.Helper()
	caData := ""
	if ca != nil {
		pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Certificate().Raw})
		caData = "certificate-authority-data: " + base64.StdEncoding.EncodeToString(pemBytes)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, %s}
users:
- name: u
  user: {token: t}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`, server, caData), 0o600))
	return path
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// TestStatusAtTheWrongAddress: an address that is no Kubernetes API server,
// or that cannot be reached, is said as such with the next step, never
// taken for a cluster without the engine ("not installed … install it") nor
// for refused reads.
func TestStatusAtTheWrongAddress(t *testing.T) {
	notFound := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(notFound.Close)
	html := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "<html>welcome</html>")
	}))
	t.Cleanup(html.Close)
	plain := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(plain.Close)
	refused := "https://" + closedPort(t)
	tests := map[string]struct {
		kubeconfig string
		verdict    string
		says       []string
	}{
		"an HTTPS server that answers 404 to everything": {
			kubeconfig: kubeconfigFor(t, notFound.URL, notFound),
			verdict:    "Unknown: " + notFound.URL + " is not a Kubernetes API server: its GET /version answered HTTP 404, not as a Kubernetes API server does — check the server of your kubeconfig's context",
			says:       []string{"--context"},
		},
		"an HTTPS server that answers 200 with a web page": {
			kubeconfig: kubeconfigFor(t, html.URL, html),
			verdict:    "Unknown: " + html.URL + " is not a Kubernetes API server: its GET /version answered 200 without a Kubernetes version",
		},
		"a port where nothing listens": {
			kubeconfig: kubeconfigFor(t, refused, nil),
			verdict:    "Unknown: cannot connect to the API server at " + refused + ": connection refused (nothing listens at that address and port) (dial tcp " + strings.TrimPrefix(refused, "https://"),
			says:       []string{"check that the cluster runs and that you reach it from here (network, VPN, firewall)"},
		},
		"a TLS certificate the kubeconfig does not trust": {
			kubeconfig: kubeconfigFor(t, notFound.URL, nil), // the system's roots do not know httptest's
			verdict:    "Unknown: cannot connect to the API server at " + notFound.URL + ": the server's TLS certificate is not the cluster's",
			says:       []string{"certificate-authority-data is current"},
		},
		"an HTTP server at an https:// address": {
			kubeconfig: kubeconfigFor(t, strings.Replace(plain.URL, "http://", "https://", 1), nil),
			verdict:    "Unknown: cannot connect to the API server at " + strings.Replace(plain.URL, "http://", "https://", 1) + ": the request failed (http: server gave HTTP response to HTTPS client)",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, output := range []string{"text", "json"} {
				var stdout, stderr bytes.Buffer
				err := Command{Version: "test", Exits: testExits}.Run(context.Background(), []string{"--kubeconfig", tc.kubeconfig, "-o", output}, func(string) string { return "" }, &stdout, &stderr)
				assert.ErrorIs(t, err, ErrActionNeeded, "exit 2")
				out := stdout.String()
				assert.NotContains(t, out, "not installed")
				assert.Empty(t, stderr.String(), "the verdict says it all")
				if output == "json" {
					assert.Contains(t, out, `"state": "unknown"`)
					continue
				}
				assert.True(t, strings.HasPrefix(out, tc.verdict), "verdict:\n%s\nwant it to start with:\n%s", out, tc.verdict)
				for _, s := range tc.says {
					assert.Contains(t, out, s)
				}
				t.Logf("proved: status against %s: %s", name, strings.TrimSpace(out))
			}
		})
	}
}

// TestTroubleshootQuotesTheAddressVerdicts: docs/troubleshoot.md quotes the
// verdicts for a wrong address in the words status prints.
func TestTroubleshootQuotesTheAddressVerdicts(t *testing.T) {
	b, err := os.ReadFile("../../docs/troubleshoot.md")
	require.NoError(t, err)
	doc := strings.Join(strings.Fields(string(b)), " ")
	for _, want := range []string{
		"is not a Kubernetes API server: its GET /version answered HTTP 404, not as a Kubernetes API server does — " + checkServer,
		"connection refused (nothing listens at that address and port)",
		"check that the cluster runs and that you reach it from here (network, VPN, firewall)",
		"Not registered: the engine is not installed: no CronJob cattle-scc-system/registration-engine — install it",
	} {
		assert.Contains(t, doc, want)
	}
}

// bare404 answers every read with a 404 whose body is no Kubernetes Status,
// as something in front of the API server would.
type bare404 struct{ *source }

func bare404Err(resource, name string) error {
	return apierrors.NewGenericServerResponse(http.StatusNotFound, "GET", schema.GroupResource{Resource: resource}, name, "404 page not found", 0, true)
}

func (bare404) Secret(_ context.Context, _, name string) (*corev1.Secret, error) {
	return nil, bare404Err("secrets", name)
}

func (bare404) CronJob(_ context.Context, _, name string) (*batchv1.CronJob, error) {
	return nil, bare404Err("cronjobs", name)
}

// TestGatherBare404IsNoProofOfAbsence: only the API server's own NotFound
// (a Kubernetes Status) makes an object absent; a bare 404 is a failed
// read, so the verdict is never "the engine is not installed".
func TestGatherBare404IsNoProofOfAbsence(t *testing.T) {
	r := Gather(context.Background(), bare404{&source{}}, Options{Exits: testExits, Now: time.Now()})
	assert.Equal(t, Failed, r.Secret.Access)
	assert.Equal(t, Failed, r.CronJob.Access)
	assert.Equal(t, StateUnknown, r.Verdict.State, r.Verdict.Line)
	assert.NotContains(t, r.Verdict.Line, "not installed")
}
