package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/controlplane"
)

// Cloud is a running fakecloud process: its directory (the env file, the
// federated token, the CA bundle, the attested document's roots, the
// region-server configuration, DMI) and the engine's environment for it.
type Cloud struct {
	Dir string
	Env []string
}

// Vars is the fake cloud's environment for the engine, by name.
func (c Cloud) Vars() map[string]string { return envMap(c.Env) }

// envMap is an environment (KEY=value entries) by name; a later entry wins.
func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
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
	p, err := controlplane.StartProcess("fakecloud", filepath.Join(t.TempDir(), "fakecloud.log"),
		exec.Command(fakecloudBin(t), append([]string{"--dir", dir}, args...)...))
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := p.Stop(10 * time.Second); err != nil {
			t.Errorf("%v\n%s", err, p.Tail(20))
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			break
		}
		require.False(t, p.Exited(), "fakecloud exited before it was ready (%v):\n%s", p.ExitErr(), p.Log())
		require.True(t, time.Now().Before(deadline), "fakecloud not ready after 10s:\n%s", p.Log())
		time.Sleep(20 * time.Millisecond)
	}
	return Cloud{Dir: dir, Env: strings.Fields(Cloud{Dir: dir}.File(t, "env"))}
}
