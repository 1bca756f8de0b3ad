package harness

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Cloud is a running fakecloud process: its directory (the env file, the
// federated token, the CA bundle, the attested document's roots, the
// region-server configuration, DMI) and the engine's environment for it.
type Cloud struct {
	Dir string
	Env []string
}

// Vars is the fake cloud's environment for the engine, by name.
func (c Cloud) Vars() map[string]string {
	m := map[string]string{}
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// Value is the fake cloud's setting key; the test fails if the fake cloud
// no longer sets it.
func (c Cloud) Value(t testing.TB, key string) string {
	t.Helper()
	v, ok := c.Vars()[key]
	require.True(t, ok, "the fake cloud's env file (%s) has no %s: e2e/cmd/fakecloud writes it", filepath.Join(c.Dir, "env"), key)
	return v
}

// File is the content of the file name in the fake cloud's directory.
func (c Cloud) File(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.Dir, name))
	require.NoError(t, err)
	return string(data)
}

// StartCloud runs the fakecloud binary with faults and waits until it is
// ready; it stops with the test.
func StartCloud(t testing.TB, faults ...string) Cloud {
	t.Helper()
	return StartCloudArgs(t, "--fault", strings.Join(faults, ","))
}

// StartCloudArgs is StartCloud with any fakecloud flags besides --dir.
func StartCloudArgs(t testing.TB, args ...string) Cloud {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(fakecloudBin(t), append([]string{"--dir", dir}, args...)...)
	// Read while the process writes it, so it is locked.
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "fakecloud not ready: %s", out.String())
		time.Sleep(20 * time.Millisecond)
	}
	env := strings.Fields(Cloud{Dir: dir}.File(t, "env"))
	return Cloud{Dir: dir, Env: env}
}

// lockedBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
