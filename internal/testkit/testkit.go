// Package testkit holds the helpers the tests of several packages share:
// golden files (of whole error messages too), the engine's JSON log lines,
// files written as the kubelet swaps a volume, a sleep recorder, a port for
// a DNS server, self-signed region server certificates with their fingerprint
// list, and the tools a test execs (helm, kubectl) with an
// environment of their own. Only tests import it; TestProductNeverImportsIt
// holds the binary to that.
package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Update is go test's -update flag: Golden rewrites its files from the
// current output instead of comparing.
var Update = flag.Bool("update", false, "rewrite the golden files from the current output")

// Golden compares got with the file at path, or writes it there under
// -update. A missing file fails with the command that creates it.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *Update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "go test -run '%s' -update writes %s", t.Name(), path)
	assert.Equal(t, string(want), string(got), "%s changed; review the difference, then rewrite it with go test -run '%s' -update", path, t.Name())
}

// Messages collects the messages of the errors a test's cases end with,
// one per case, and compares them whole with a golden file when the test
// ends: where the message is what a person reads (a refused setting, a
// remedy), its text is the product. The error's class is asserted apart,
// with errors.Is or errors.As. Safe for parallel subtests. Make one with
// NewMessages.
type Messages struct {
	// Replace holds pairs old, new: text that varies between runs (a
	// temporary directory, a loopback address) and what the golden file
	// shows instead.
	Replace []string
	// Varying: the ports of loopback addresses read <port>, UTC timestamps
	// <time> and t.TempDir's directories <testdir>, where a test's servers,
	// clocks and temporary files choose them.
	Varying bool
	mu      sync.Mutex
	msgs    map[string]string
}

// NewMessages collects t's messages and, once t and its subtests are done,
// compares them with testdata/messages/<test>.txt (go test -run <test>
// -update rewrites it).
func NewMessages(t *testing.T) *Messages {
	m := &Messages{}
	t.Cleanup(func() { m.golden(t) })
	return m
}

// loopbackPort is a port on a loopback address, which a test's servers
// take at random.
var loopbackPort = regexp.MustCompile(`(127\.[0-9]+\.[0-9]+\.[0-9]+|\[::1\]|localhost):[0-9]+`)

// testDir is a directory t.TempDir made: <TMPDIR>/<test name><random>/<nnn>.
var testDir = regexp.MustCompile(regexp.QuoteMeta(os.TempDir()) + `/[^/\s]+/[0-9]{3}`)

// timestamp is an RFC 3339 time in UTC, which a test's clock sets.
var timestamp = regexp.MustCompile(`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z`)

// Add records err's message for the case name and returns it as recorded,
// with replace (pairs old, new: what varies with this case), then Replace
// and Varying applied.
func (m *Messages) Add(name string, err error, replace ...string) string {
	msg := strings.NewReplacer(replace...).Replace(err.Error())
	msg = strings.NewReplacer(m.Replace...).Replace(msg)
	if m.Varying {
		msg = loopbackPort.ReplaceAllString(msg, "$1:<port>")
		msg = timestamp.ReplaceAllString(msg, "<time>")
		msg = testDir.ReplaceAllString(msg, "<testdir>")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.msgs == nil {
		m.msgs = map[string]string{}
	}
	m.msgs[name] = msg
	return msg
}

// golden compares the messages, in the order of their cases' names, with
// the golden file. When go test -run picked some of t's subtests, only
// theirs are compared, and -update keeps the other cases' messages.
func (m *Messages) golden(t *testing.T) {
	t.Helper()
	path := filepath.Join("testdata", "messages", strings.ReplaceAll(t.Name(), "/", "__")+".txt")
	m.mu.Lock()
	defer m.mu.Unlock()
	if run := flag.Lookup("test.run"); run == nil || !strings.Contains(run.Value.String(), "/") {
		Golden(t, path, renderMessages(m.msgs))
		return
	}
	// Some subtests only: each recorded message against its case's.
	want := parseMessages(t, path)
	if *Update {
		maps.Copy(want, m.msgs)
		Golden(t, path, renderMessages(want))
		return
	}
	for n, msg := range m.msgs {
		assert.Equal(t, want[n], msg, "%s, case %q, changed; review the difference, then rewrite it with go test -run '%s' -update", path, n, t.Name())
	}
}

// renderMessages is the golden file of msgs: "== <case>", the message and
// an empty line, case after case in the order of their names.
func renderMessages(msgs map[string]string) []byte {
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(msgs)) {
		fmt.Fprintf(&b, "== %s\n%s\n\n", n, msgs[n])
	}
	return []byte(b.String())
}

// parseMessages reads a golden file renderMessages wrote; none when it
// does not exist.
func parseMessages(t *testing.T, path string) map[string]string {
	t.Helper()
	out := map[string]string{}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return out
	}
	require.NoError(t, err)
	if len(data) == 0 {
		return out
	}
	for _, block := range strings.Split(string(data), "\n\n== ") {
		name, msg, ok := strings.Cut(strings.TrimPrefix(block, "== "), "\n")
		require.True(t, ok, "%s: a case without a message: %q", path, block)
		out[name] = strings.TrimSuffix(msg, "\n\n")
	}
	return out
}

// LogLines parses the engine's log, one JSON object a line.
func LogLines(t testing.TB, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "not a JSON log line: %s", line)
		out = append(out, m)
	}
	return out
}

// Summary is the run's last log line, "run finished".
func Summary(t testing.TB, log string) map[string]any {
	t.Helper()
	lines := LogLines(t, log)
	require.NotEmpty(t, lines)
	last := lines[len(lines)-1]
	require.Equal(t, "run finished", last["msg"], "the last log line is the run's summary")
	return last
}

// WriteFile replaces path with content by a rename, as the kubelet swaps a
// ConfigMap volume, so a reader never sees half a file.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

// Sleeps records the pauses a retrier asked for, without pausing. Sleep has
// the shape of every sleep the engine takes as a dependency and returns
// ctx's error, as a sleep that was interrupted would.
type Sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

// Sleep records d and returns at once.
func (s *Sleeps) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

// All is every pause recorded since the start or the last Reset, in order.
func (s *Sleeps) All() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// Reset forgets the recorded pauses.
func (s *Sleeps) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = nil
}

// FreeDNSPort is a loopback port that was free for both TCP and UDP a
// moment ago: a DNS server (CoreDNS) binds the two, so a port checked for
// one only can be taken on the other ("bind: address already in use").
func FreeDNSPort(t testing.TB) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := l.Addr().(*net.TCPAddr).Port
		c, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		_ = l.Close()
		if err == nil {
			_ = c.Close()
			return port
		}
	}
	require.FailNow(t, "no loopback port free for both TCP and UDP in 50 tries")
	return 0
}

// Tool is a program a test execs: candidate, the path the variable envVar
// gives (where make put the one it built), else name on PATH. Missing, the
// test is skipped, unless CI is set: make builds it, so CI must never pass
// by skipping. build names what builds it ("make helm").
func Tool(t testing.TB, name, envVar, candidate, build string) string {
	t.Helper()
	if candidate != "" {
		if _, err := os.Stat(candidate); err == nil {
			return candidate
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	msg := fmt.Sprintf("%s not found: not at %q (from %s) and not on PATH; %s builds it, and make test sets %s", name, candidate, envVar, build, envVar)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Helm is HELM_BIN (make test and make e2e-kind set it to the helm that
// e2e/scripts/helm-bin.sh builds), else helm on PATH; see Tool.
func Helm(t testing.TB) string {
	t.Helper()
	return Tool(t, "helm", "HELM_BIN", os.Getenv("HELM_BIN"), "make helm")
}

// Command runs bin with args and returns its standard output; its error
// carries the command and its standard error. The environment is PATH and
// a HOME of its own, with helm's cache, config and data homes under it:
// nothing of the test's environment, and none of the user's caches,
// repositories or kubeconfig, reaches the program.
func Command(ctx context.Context, bin string, args ...string) ([]byte, error) {
	home, err := os.MkdirTemp("", "testkit-home-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "HELM_CACHE_HOME=" + home + "/cache",
		"HELM_CONFIG_HOME=" + home + "/config", "HELM_DATA_HOME=" + home + "/data"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// TableNames are the names a Markdown document's table rows give in their
// first cell: every match of name's first group there, in rows that start
// with rowPrefix ("|" for every row).
func TableNames(doc []byte, name *regexp.Regexp, rowPrefix string) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, rowPrefix) {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
			names[m[1]] = true
		}
	}
	return names
}
