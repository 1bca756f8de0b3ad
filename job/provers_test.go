package job

import (
	"crypto/x509"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
)

// TestAttestationRoots: ATTESTATION_ROOTS_FILE replaces the pinned Azure
// roots with its certificates; a file that is missing or holds none stops
// the engine before any run, naming the variable and the file.
func TestAttestationRoots(t *testing.T) {
	dir := t.TempDir()
	cert, pemBytes, err := fakecloud.SelfSigned("root.example")
	require.NoError(t, err)
	good, notPEM := filepath.Join(dir, "roots.pem"), filepath.Join(dir, "not.pem")
	require.NoError(t, os.WriteFile(good, pemBytes, 0o644))
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o644))

	pool, err := attestationRoots("")
	require.NoError(t, err)
	assert.Nil(t, pool, "no file: the pinned roots")

	pool, err = attestationRoots(good)
	require.NoError(t, err)
	require.NotNil(t, pool)
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	require.NoError(t, err)
	want := x509.NewCertPool()
	want.AddCert(leaf)
	assert.True(t, want.Equal(pool), "the pool holds the file's certificate, and only it")

	msgs := testkit.NewMessages(t)
	msgs.Replace = []string{dir, "<dir>"}
	_, err = attestationRoots(filepath.Join(dir, "missing.pem"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.True(t, failure.IsPermanent(err))
	msgs.Add("missing", err)
	_, err = attestationRoots(notPEM)
	require.Error(t, err)
	assert.True(t, failure.IsPermanent(err))
	msgs.Add("no certificate", err)
}
