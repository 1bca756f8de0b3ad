package kind

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The build scripts decide, for every cached artifact, whether it is current
// or must be built. A stamp one script reads and no script writes makes that
// decision fail on every machine that never had the stamp, while machines
// that kept an old one stay green: the failure only a new machine sees.
// Both tests run in `make test`, with no Docker and no build.

var (
	stampRead  = regexp.MustCompile(`\b(?:fresh|up_to_date)\s+([A-Za-z0-9_-]+)|\$\{?STAMPS\}?"?/([A-Za-z0-9_-]+)`)
	stampWrite = regexp.MustCompile(`\bstamp\s+([A-Za-z0-9_-]+)\s`)
)

// scriptsDir is where the build scripts live: this package's and
// e2e/scripts. BUILD_SCRIPTS_ROOT points the check at another checkout.
func scriptFiles(t *testing.T) []string {
	t.Helper()
	root := os.Getenv("BUILD_SCRIPTS_ROOT")
	if root == "" {
		root = "../.."
	}
	var files []string
	for _, dir := range []string{"e2e/kind", "e2e/scripts"} {
		m, err := filepath.Glob(filepath.Join(root, dir, "*.sh"))
		require.NoError(t, err)
		files = append(files, m...)
	}
	require.NotEmpty(t, files)
	return files
}

func TestEveryStampReadHasAWriter(t *testing.T) {
	read := map[string][]string{} // stamp → where it is read
	written := map[string]bool{}
	for _, f := range scriptFiles(t) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			if strings.Contains(line, "stamp()") || strings.Contains(line, "fresh()") || strings.Contains(line, "up_to_date()") {
				continue // the helpers' own definitions in lib.sh
			}
			for _, m := range stampRead.FindAllStringSubmatch(line, -1) {
				name := m[1] + m[2]
				if strings.HasPrefix(name, "$") || name == "" {
					continue
				}
				read[name] = append(read[name], filepath.Base(f)+":"+strconv.Itoa(i+1))
			}
			for _, m := range stampWrite.FindAllStringSubmatch(line+" ", -1) {
				written[m[1]] = true
			}
		}
	}
	require.NotEmpty(t, read, "the scan found no stamp reads; has the helpers' name changed?")
	var dangling []string
	for name, where := range read {
		if !written[name] {
			dangling = append(dangling, name+" (read at "+strings.Join(where, ", ")+")")
		}
	}
	sort.Strings(dangling)
	assert.Empty(t, dangling, "stamps read that no build script writes: a machine without them fails its first build")
}

// From an empty cache every artifact is decided, each "stale", without an
// error; with the programs present but never stamped, still decided (DOCKER
// a stand-in with no images, as a machine without a daemon). With the
// stamps a build records and every image present, the images are current,
// until a program the node packs changes.
func TestBuildScriptsDecideFreshnessFromAnEmptyCache(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	cache := t.TempDir()
	plan := func(script string) map[string]string {
		t.Helper()
		cmd := exec.Command("bash", script, "plan")
		cmd.Env = append(os.Environ(), "CACHE_DIR="+cache, "DOCKER=false", "K8S_TESTBIN="+filepath.Join(cache, "testbin"), "DOCKER_HOST=")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%s plan: %s", script, stderr.String())
		got := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			state, name, ok := strings.Cut(l, " ")
			require.True(t, ok, "%s plan printed %q", script, l)
			require.Contains(t, []string{"current", "stale"}, state, "%s plan printed %q", script, l)
			got[name] = state
		}
		return got
	}
	wantBins := map[string]string{"testbin": "stale", "k8s-node": "stale", "crictl": "stale", "coredns": "stale", "pause": "stale"}
	wantImages := map[string]string{"base-images": "stale", "go-image": "stale", "operator-image": "stale", "webhook-v1.5.1-image": "stale", "webhook-v1.6.0-image": "stale", "node-image": "stale"}
	assert.Equal(t, wantBins, plan("bins.sh"))
	assert.Equal(t, wantImages, plan("images.sh"))

	// Stand-in programs where bins.sh puts them, no stamps: still decided.
	bindir := filepath.Join(cache, "kind", "bin")
	entries, err := os.ReadDir(bindir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "bins.sh made one versioned program directory")
	bindir = filepath.Join(bindir, entries[0].Name())
	for _, p := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet", "kubectl", "crictl", "coredns", "pause"} {
		require.NoError(t, os.WriteFile(filepath.Join(bindir, p), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	}
	// A kubeadm that names a CoreDNS version nobody built.
	require.NoError(t, os.WriteFile(filepath.Join(bindir, "kubeadm"), []byte("#!/bin/sh\necho registry.k8s.io/coredns/coredns:v0.0.0-none\n"), 0o755))
	assert.Equal(t, wantBins, plan("bins.sh"))
	assert.Equal(t, wantImages, plan("images.sh"))

	// The other way round: a daemon that has every image, and the stamps
	// a build records (images.sh stamps), make every image current; a
	// rebuilt program then makes the node image, and only it, stale.
	docker := filepath.Join(cache, "docker")
	require.NoError(t, os.WriteFile(docker, []byte("#!/bin/sh\n[ \"$1 $2\" = \"image inspect\" ] && echo sha256:0123\n"), 0o755))
	run := func(step string) string {
		t.Helper()
		cmd := exec.Command("bash", "images.sh", step)
		cmd.Env = append(os.Environ(), "CACHE_DIR="+cache, "DOCKER="+docker, "DOCKER_HOST=")
		out, err := cmd.Output()
		require.NoError(t, err, "images.sh %s", step)
		return string(out)
	}
	stamps := filepath.Join(cache, "kind", "stamps")
	for _, l := range strings.Split(strings.TrimSpace(run("stamps")), "\n") {
		f := strings.Split(l, "\t")
		require.Len(t, f, 3, "images.sh stamps printed %q", l)
		require.NoError(t, os.WriteFile(filepath.Join(stamps, f[0]), []byte(f[1]+"\n"), 0o644))
	}
	assert.Equal(t, "current base-images\ncurrent go-image\ncurrent operator-image\ncurrent webhook-v1.5.1-image\ncurrent webhook-v1.6.0-image\ncurrent node-image\n", run("plan"))
	require.NoError(t, os.WriteFile(filepath.Join(bindir, "kubelet"), []byte("#!/bin/sh\nexit 1\n"), 0o755))
	assert.Equal(t, "current base-images\ncurrent go-image\ncurrent operator-image\ncurrent webhook-v1.5.1-image\ncurrent webhook-v1.6.0-image\nstale node-image\n", run("plan"),
		"the node image's stamp follows the programs it packs")
}
