package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rancher/registration-engine/e2e/controlplane"
)

// The module's import paths of the two binaries under test.
const (
	enginePkg    = "github.com/rancher/registration-engine"
	fakecloudPkg = "github.com/rancher/registration-engine/e2e/cmd/fakecloud"
)

// bins are the binaries Main built; root is the module's directory.
var bins struct {
	engine, fakecloud, root string
}

// Main builds the engine and the fake cloud once, runs the tests, then
// stops the shared control plane (controlplane.Main) and removes the
// binaries. Call it from TestMain: os.Exit(harness.Main(m)).
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "registration-engine-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return controlplane.Main(m)
}

// build puts both binaries into dir, statically linked as in the image,
// and finds the module's directory.
func build(dir string) error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return fmt.Errorf("find the module's directory (go list -m): %w", err)
	}
	bins.root = strings.TrimSpace(string(out))
	bins.engine = filepath.Join(dir, "registration-engine")
	bins.fakecloud = filepath.Join(dir, "fakecloud")
	for bin, pkg := range map[string]string{bins.engine: enginePkg, bins.fakecloud: fakecloudPkg} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %w\n%s", pkg, err, out)
		}
	}
	return nil
}

// fakecloudBin is the built fake cloud's path.
func fakecloudBin(t testing.TB) string {
	t.Helper()
	return built(t, bins.fakecloud)
}

// root is the module's directory, for the manifests and the chart.
func root(t testing.TB) string {
	t.Helper()
	return built(t, bins.root)
}

func built(t testing.TB, path string) string {
	t.Helper()
	if path == "" {
		t.Fatal("the binaries are not built: the package's TestMain must call harness.Main")
	}
	return path
}
