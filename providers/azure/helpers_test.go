package azure_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/providers"
	"github.com/rancher/registration-engine/providers/azure"
)

// env is a complete fake Azure on loopback: Entra and ARM over TLS with a
// throw-away CA, IMDS over plain HTTP, and a Config that points at them.
type env struct {
	fake     *fakecloud.Azure
	cfg      azure.Config
	imds     *httptest.Server
	imdsHost string

	// served and check let a reliability case count what a fake sent
	// and assert on it after the run.
	served atomic.Int64
	check  func(t *testing.T)
	// afterNew runs between New and Prove: what breaks only after New
	// checked the settings.
	afterNew func(t *testing.T)

	mu       sync.Mutex
	sleeps   testkit.Sleeps
	armTimes []time.Time
	logs     []byte
}

func newEnv(t *testing.T) *env {
	t.Helper()
	// A managed identity of its own per test: azidentity's managed identity
	// tokens are cached per process, keyed by client ID, and each fake
	// issues another token.
	fake, err := fakecloud.NewAzure(fakecloud.AzureConfig{ManagedIdentityClientID: randomClientID(t)})
	require.NoError(t, err)
	e := &env{fake: fake}

	ca, err := fakecloud.NewCA("azure test CA")
	require.NoError(t, err)
	cert, err := ca.Issue("127.0.0.1", "localhost")
	require.NoError(t, err)
	startTLS := func(h http.Handler) *httptest.Server {
		s := httptest.NewUnstartedServer(h)
		s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		s.StartTLS()
		t.Cleanup(s.Close)
		return s
	}
	entra := startTLS(fake.EntraHandler())
	arm := startTLS(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.armTimes = append(e.armTimes, time.Now())
		e.mu.Unlock()
		fake.ARMHandler().ServeHTTP(w, r)
	}))
	e.imds = httptest.NewServer(fake.IMDSHandler())
	t.Cleanup(e.imds.Close)
	e.imdsHost = strings.TrimPrefix(e.imds.URL, "http://")

	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	tokenFile := filepath.Join(t.TempDir(), "azure-identity-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(fake.Config().FederatedToken), 0o600))
	roots := x509.NewCertPool()
	roots.AddCert(fake.Root())

	fc := fake.Config()
	e.cfg = azure.Config{
		CredentialMode:      azure.WorkloadIdentity,
		ClientID:            fc.ClientID,
		TenantID:            fc.TenantID,
		TokenFile:           tokenFile,
		AuthorityHost:       entra.URL + "/",
		ARMEndpoint:         arm.URL,
		IMDSEndpoint:        e.imds.URL,
		ExtensionResourceID: fc.ExtensionResourceID,
		Publisher:           fc.Plan.Publisher,
		Offer:               fc.Plan.Product,
		Plan:                fc.Plan.Name,
		RetryMax:            3,
		RetryBackoff:        2,
		RetryUnit:           time.Millisecond, // azcore's base delay: 2 ms, so 5xx retries take no time
		HTTPClient:          client,
		Roots:               roots,
		AIAAllowedHosts:     []string{e.imdsHost},
		Sleep:               e.sleeps.Sleep,
		Log:                 slog.New(slog.NewTextHandler(testWriter{t, e}, nil)),
	}
	return e
}

// useManagedIdentity switches the config to managed-identity mode with the
// fake's managed identity: AZURE_CLIENT_ID alone, no tenant, no token file.
func (e *env) useManagedIdentity() {
	e.cfg.CredentialMode = azure.ManagedIdentity
	e.cfg.ClientID = e.fake.Config().ManagedIdentityClientID
	e.cfg.TenantID, e.cfg.TokenFile = "", ""
}

// randomClientID is a GUID-shaped client ID no other test uses.
func randomClientID(t *testing.T) string {
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(t, err)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func (e *env) armRequestTimes() []time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Time(nil), e.armTimes...)
}

// prove runs New and Prove on e.cfg and checks the outcome every table of
// phase 2 expects: evidence and no error when wantErr is nil, otherwise no
// evidence and an error wrapping wantErr that is permanent exactly when
// permanent says so.
func (e *env) prove(t *testing.T, wantErr error, permanent bool) (*providers.Evidence, error) {
	t.Helper()
	p, err := azure.New(e.cfg)
	require.NoError(t, err)
	if e.afterNew != nil {
		e.afterNew(t)
	}
	ev, err := p.Prove(context.Background())
	if wantErr == nil {
		require.NoError(t, err)
		require.NotNil(t, ev)
		return ev, nil
	}
	require.Error(t, err)
	t.Logf("error: %v", err)
	assert.ErrorIs(t, err, wantErr)
	assert.Equal(t, permanent, failure.IsPermanent(err), "permanent: %v", err)
	assert.Nil(t, ev)
	return ev, err
}

// logged is everything the prover logged so far.
func (e *env) logged() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return string(e.logs)
}

// testWriter sends log lines to t.Log, so they show only for failing tests,
// and keeps them for env.logged. The SDK logs from its own goroutines.
type testWriter struct {
	t *testing.T
	e *env
}

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.e.mu.Lock()
	w.e.logs = append(w.e.logs, p...)
	w.e.mu.Unlock()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func base64Decode(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
func base64Encode(b []byte) string          { return base64.StdEncoding.EncodeToString(b) }
