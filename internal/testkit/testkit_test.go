package testkit

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProductNeverImportsIt: the binary's dependencies do not include this
// package (tests only).
func TestProductNeverImportsIt(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/rancher/registration-engine").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/rancher/registration-engine/job", "go list -deps lists the binary's packages")
	assert.NotContains(t, deps, "github.com/rancher/registration-engine/internal/testkit")
}

func TestSummaryIsTheLastLine(t *testing.T) {
	log := `{"msg":"phase done","phase":"lease"}` + "\n" + `{"msg":"run finished","outcome":"registered"}` + "\n"
	assert.Len(t, LogLines(t, log), 2)
	assert.Equal(t, "registered", Summary(t, log)["outcome"])
}

func TestSleepsRecordsWithoutPausing(t *testing.T) {
	var s Sleeps
	start := time.Now()
	require.NoError(t, s.Sleep(context.Background(), time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, s.Sleep(ctx, time.Minute), context.Canceled, "an interrupted sleep says so")
	assert.Less(t, time.Since(start), time.Second)
	assert.Equal(t, []time.Duration{time.Hour, time.Minute}, s.All())
	s.Reset()
	assert.Empty(t, s.All())
}

func TestFreeDNSPortIsFreeForTCPAndUDP(t *testing.T) {
	port := FreeDNSPort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err, "TCP")
	defer l.Close()
	c, err := net.ListenPacket("udp", addr)
	require.NoError(t, err, "UDP")
	defer c.Close()
}

func TestCommandGetsAnEnvironmentOfItsOwn(t *testing.T) {
	t.Setenv("KUBECONFIG", "/the/users/kubeconfig")
	out, err := Command(context.Background(), "/bin/sh", "-c", `echo "$HOME|$KUBECONFIG|$HELM_CACHE_HOME"`)
	require.NoError(t, err)
	fields := strings.Split(strings.TrimSpace(string(out)), "|")
	require.Len(t, fields, 3, "%q", out)
	home, kubeconfig, cache := fields[0], fields[1], fields[2]
	assert.NotEqual(t, os.Getenv("HOME"), home, "not the user's HOME")
	assert.Empty(t, kubeconfig, "nothing of the test's environment")
	assert.Equal(t, home+"/cache", cache)

	_, err = Command(context.Background(), "/bin/sh", "-c", "echo refused >&2; exit 3")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refused", "the error carries standard error")
}

func TestMessagesReplaceWhatVaries(t *testing.T) {
	m := Messages{Replace: []string{"/tmp/x1", "<dir>", "127.0.0.1:4711", "<addr>"}, Varying: true}
	got := m.Add("a case", fmt.Errorf("read /tmp/x1/cfg: dial 127.0.0.1:4711: %w", os.ErrNotExist))
	assert.Equal(t, "read <dir>/cfg: dial <addr>: file does not exist", got)
	got = m.Add("another", fmt.Errorf("dial [::1]:8443 and 127.0.0.1:9: %w", os.ErrClosed))
	assert.Equal(t, "dial [::1]:<port> and 127.0.0.1:<port>: file already closed", got, "ports taken at random read <port>")
	got = m.Add("a third", fmt.Errorf("expired at 2026-12-04T09:55:25Z, now 2026-12-04T10:55:25.5Z: %w", os.ErrDeadlineExceeded))
	assert.Equal(t, "expired at <time>, now <time>: i/o timeout", got, "so are the test clock's times")
	got = m.Add("a fourth", fmt.Errorf("open %s/cert.pem on 127.0.0.2:443: %w", t.TempDir(), os.ErrNotExist))
	assert.Equal(t, "open <testdir>/cert.pem on 127.0.0.2:<port>: file does not exist", got, "and a test's temporary directories")
}

// TestMessagesFileRoundTrip: a golden file of messages reads back as the
// cases it was written from, which a run of some subtests compares with.
func TestMessagesFileRoundTrip(t *testing.T) {
	msgs := map[string]string{"b case": "two\nlines", "a case": "one", "c": ""}
	path := filepath.Join(t.TempDir(), "messages.txt")
	require.NoError(t, os.WriteFile(path, renderMessages(msgs), 0o644))
	assert.Equal(t, msgs, parseMessages(t, path))
	assert.Empty(t, parseMessages(t, filepath.Join(t.TempDir(), "absent.txt")), "no file yet: no cases")
}
