package kind

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeModuleProxy answers the Go module proxy protocol (go help goproxy) for
// every module: each version serves its .info and .mod, except those in
// gone, which answer 404 as proxy.golang.org does for a version it no longer
// has; goLine gives a version's go directive (1.21 by default).
type fakeModuleProxy struct {
	mu     sync.Mutex
	gone   map[string]bool   // "module@version"
	goLine map[string]string // "module@version" → go directive
	lists  map[string]string // module → the @v/list answer
}

func (p *fakeModuleProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	mod, file, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/@v/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	mod = decodeModulePath(mod)
	if file == "list" {
		fmt.Fprint(w, p.lists[mod])
		return
	}
	ext := filepath.Ext(file)
	version := strings.TrimSuffix(file, ext)
	if p.gone[mod+"@"+version] {
		http.Error(w, "not found: "+mod+"@"+version+": invalid version: unknown revision "+version, http.StatusNotFound)
		return
	}
	switch ext {
	case ".info":
		fmt.Fprintf(w, `{"Version":%q,"Time":"2026-01-01T00:00:00Z"}`, version)
	case ".mod":
		goLine := p.goLine[mod+"@"+version]
		if goLine == "" {
			goLine = "1.21"
		}
		fmt.Fprintf(w, "module %s\n\ngo %s\n", mod, goLine)
	default:
		http.NotFound(w, r)
	}
}

// decodeModulePath undoes the proxy protocol's case encoding (!a → A).
func decodeModulePath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '!' && i+1 < len(s) {
			i++
			b.WriteString(strings.ToUpper(s[i : i+1]))
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// The pin check (make pins, the first step of make test and of .ci/run)
// against registries on loopback: a fake Go module proxy, a fake apt
// (apt-cache answering from a table, apt-get doing nothing) and a Debian
// mirror that serves the suite's InRelease. What a newcomer must read when a
// registry drops a pin: the pin's name, what the registry has nearest it, the
// fix, and a failing exit; and an unreachable registry is not a dropped pin.
func TestPinCheckNamesTheDroppedPin(t *testing.T) {
	for _, tool := range []string{"bash", "go", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	proxy := &fakeModuleProxy{gone: map[string]bool{}, goLine: map[string]string{}, lists: map[string]string{
		"k8s.io/kubernetes": "v1.36.4\nv1.37.1\nv1.37.2\n",
		"helm.sh/helm/v3":   "v3.21.4\nv3.22.0\nv3.22.1\n",
	}}
	proxySrv := httptest.NewServer(proxy)
	defer proxySrv.Close()
	mirrorSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/debian/dists/bookworm/InRelease" {
			return
		}
		http.NotFound(w, r)
	}))
	defer mirrorSrv.Close()

	dir := t.TempDir()
	apt := filepath.Join(dir, "apt")
	require.NoError(t, os.MkdirAll(filepath.Join(apt, "sources.list.d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(apt, "sources.list"), []byte("deb "+mirrorSrv.URL+"/debian bookworm main\ndeb "+mirrorSrv.URL+"/debian trixie-gone main\n"), 0o644))
	// apt-cache: madison answers from $PROMETHEUS_OFFERED; policy gives
	// every package a candidate except those in $APT_MISSING.
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "apt-cache"), []byte(`#!/usr/bin/env bash
case $1 in
madison) for v in $PROMETHEUS_OFFERED; do echo " prometheus | $v | http://mirror/debian bookworm/main amd64 Packages"; done ;;
policy) shift; for p; do
    case " $APT_MISSING " in *" $p "*) continue ;; esac
    printf '%s:\n  Installed: (none)\n  Candidate: 1.0-1\n  Version table:\n' "$p"
  done ;;
esac
`), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "apt-get"), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	project := filepath.Join(dir, "project")
	require.NoError(t, os.MkdirAll(project, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(project, "go.mod"), []byte("module example.com/p\n\ngo 1.21\n\nrequire example.com/dep v1.2.3\n"), 0o644))
	peers := filepath.Join(dir, "peers")
	require.NoError(t, os.MkdirAll(peers, 0o755))
	src, err := os.ReadFile("../scripts/scc-operator.sh")
	require.NoError(t, err)
	pinned := regexp.MustCompile(`(?m)^PINNED=\((.*)\)`).FindSubmatch(src)
	require.NotNil(t, pinned, "scc-operator.sh's PINNED")
	var commits []string
	for _, c := range strings.Fields(string(pinned[1])) {
		commits = append(commits, c[:7])
		require.NoError(t, os.WriteFile(filepath.Join(peers, "scc-operator-"+c[:7]+".tar.gz"), nil, 0o644))
	}

	run := func(t *testing.T, env ...string) (string, error) {
		t.Helper()
		cmd := exec.Command("bash", "../scripts/pins.sh")
		cmd.Env = append(os.Environ(),
			"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
			"GOPROXY="+proxySrv.URL, "GOSUMDB=off", "GONOSUMDB=", "GOPRIVATE=", "GONOPROXY=",
			"GOMODCACHE="+filepath.Join(dir, "gomodcache"), "GOFLAGS=",
			"APT_DIR="+apt, "DEBIAN_MIRROR=", "KIND_VERSION=test", "PINS_PROJECT="+project, "SCC_OPERATOR_PEERS="+peers, "SCC_OPERATOR_SRC=",
			"PROMETHEUS_OFFERED=2.42.0+ds-5+deb12u1 2.42.0+ds-5+b6", "PROMETHEUS_DEB=",
			"K8S_VERSION=1.37.2", "K8S_LTS_VERSION=1.34.4", "HELM_VERSION=3.22.0", "COREDNS_VERSION=1.14.6",
			"ETCD_VERSION=3.6.5", "CRICTL_VERSION=1.37.0", "PROMETHEUS_VERSION=2.42.0",
			"AZWI_VERSIONS=", // empty: lib.sh's own list, which the check must cover whole
			"STATICCHECK=honnef.co/go/tools/cmd/staticcheck@v0.8.2",
			"CYCLONEDX_GOMOD=github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0")
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// rows: "state name" for every row, sorted, so a test reads what passed.
	failing := func(out string) []string {
		var f []string
		for _, l := range strings.Split(out, "\n") {
			if fields := strings.Fields(l); len(fields) > 1 && fields[0] == "FAIL" {
				f = append(f, fields[1])
			}
		}
		sort.Strings(f)
		return f
	}

	t.Run("every pin there", func(t *testing.T) {
		out, err := run(t)
		require.NoError(t, err, out)
		assert.Empty(t, failing(out), out)
		for _, want := range []string{
			"ok    K8S_VERSION=1.37.2", "ok    HELM_VERSION=3.22.0", "ok    CoreDNS=1.14.6",
			"ok    go.mod", "ok    PROMETHEUS_VERSION=2.42.0", "2.42.0+ds-5+deb12u1",
			"ok    DEBIAN_SUITE=bookworm", "pins: every pin obtainable",
			// every webhook release the kind tier builds, not one
			"ok    AZWI_VERSION=1.5.1", "ok    AZWI_VERSION=1.6.0",
		} {
			assert.Contains(t, out, want)
		}
		for _, c := range commits {
			assert.Contains(t, out, "ok    scc-operator "+c)
		}
	})

	t.Run("dropped versions: each named with the nearest and its fix", func(t *testing.T) {
		proxy.mu.Lock()
		proxy.gone["k8s.io/kubernetes@v1.37.3"] = true
		proxy.gone["helm.sh/helm/v3@v3.99.0"] = true
		proxy.gone["example.com/dep@v1.2.3"] = true
		proxy.mu.Unlock()
		defer func() { proxy.mu.Lock(); proxy.gone = map[string]bool{}; proxy.mu.Unlock() }()
		out, err := run(t, "K8S_VERSION=1.37.3", "HELM_VERSION=3.99.0",
			// Debian's point release: the old revision gone, and no
			// revision of another upstream is taken silently.
			"PROMETHEUS_VERSION=2.43.0", "APT_MISSING=docker.io")
		require.Error(t, err, "a dropped pin fails the check:\n%s", out)
		assert.Equal(t, []string{"HELM_VERSION=3.99.0", "K8S_VERSION=1.37.3", "PROMETHEUS_VERSION=2.43.0", "docker.io", "go.mod"}, failing(out), out)
		for _, want := range []string{
			"of v1.37.x it has v1.37.1 v1.37.2",
			"fix: set K8S_VERSION in the Makefile to a version the proxy has",
			"its newest are v3.21.4 v3.22.0 v3.22.1",
			"example.com/dep@v1.2.3",
			"it offers: 2.42.0+ds-5+deb12u1 2.42.0+ds-5+b6",
			"fix: set PROMETHEUS_VERSION (e2e/scripts/promtool-bin.sh)",
			"pins: 5 pin(s) no longer obtainable",
		} {
			assert.Contains(t, out, want)
		}
	})

	t.Run("one webhook release of two dropped", func(t *testing.T) {
		proxy.mu.Lock()
		proxy.gone["github.com/Azure/azure-workload-identity@v1.5.1"] = true
		proxy.mu.Unlock()
		defer func() { proxy.mu.Lock(); proxy.gone = map[string]bool{}; proxy.mu.Unlock() }()
		out, err := run(t)
		require.Error(t, err, out)
		assert.Equal(t, []string{"AZWI_VERSION=1.5.1"}, failing(out), out)
		assert.Contains(t, out, "ok    AZWI_VERSION=1.6.0")
		assert.Contains(t, out, "fix: set AZWI_VERSIONS in e2e/kind/lib.sh to a version the proxy has")
	})

	t.Run("a revision of the same upstream replaces the dropped one", func(t *testing.T) {
		out, err := run(t, "PROMETHEUS_OFFERED=2.42.0+ds-5+deb12u7")
		require.NoError(t, err, out)
		assert.Contains(t, out, "ok    PROMETHEUS_VERSION=2.42.0          Debian's prometheus 2.42.0+ds-5+deb12u7")
	})

	t.Run("a module that needs a newer Go than this machine's", func(t *testing.T) {
		proxy.mu.Lock()
		proxy.goLine["helm.sh/helm/v3@v3.22.0"] = "1.99.0"
		proxy.mu.Unlock()
		defer func() { proxy.mu.Lock(); proxy.goLine = map[string]string{}; proxy.mu.Unlock() }()
		out, err := run(t)
		require.Error(t, err, out)
		assert.Equal(t, []string{"HELM_VERSION=3.22.0"}, failing(out), out)
		assert.Contains(t, out, "needs Go 1.99.0")
	})

	t.Run("peers missing, suite gone", func(t *testing.T) {
		out, err := run(t, "SCC_OPERATOR_PEERS="+t.TempDir(), "DEBIAN_SUITE=trixie-gone")
		require.Error(t, err, out)
		want := []string{"DEBIAN_SUITE=trixie-gone"}
		for range commits {
			want = append(want, "scc-operator")
		}
		assert.Equal(t, want, failing(out), out)
		assert.Contains(t, out, "fix: put the peers beside the checkout")
	})

	t.Run("an unreachable proxy is not a dropped pin", func(t *testing.T) {
		out, err := run(t, "GOPROXY=http://127.0.0.1:1")
		require.NoError(t, err, out)
		assert.Contains(t, out, "-     Go module proxy")
		assert.Contains(t, out, "not checked")
		assert.Empty(t, failing(out), out)
	})
}
