package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// PasteMarker is the file a hostile value's payload creates when a pasted
// command runs it: values under test carry `touch PasteMarker` (in $(…),
// backquotes, after a ; or a newline), and Paste fails the test when the
// file appears.
const PasteMarker = "pasted-and-ran"

// Paste runs command as a person pasting it into a shell would (sh -c, in
// an empty directory), with stubs for helm and kubectl first on PATH that
// record their arguments and do nothing else. It returns the stubs' calls,
// one per invocation, each "tool arg1 arg2 …" with the arguments as the
// shell passed them (newlines in them kept); the test fails when the payload marker appeared,
// that is, when anything but the stubs ran.
func Paste(t *testing.T, command string) []string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	work := filepath.Join(dir, "work")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	require.NoError(t, os.MkdirAll(work, 0o755))
	calls := filepath.Join(dir, "calls")
	for _, tool := range []string{"helm", "kubectl"} {
		stub := "#!/bin/sh\n{ printf '%s' " + tool + "; for a in \"$@\"; do printf ' %s' \"$a\"; done; printf '\\036'; } >> \"$PASTE_CALLS\"\n"
		require.NoError(t, os.WriteFile(filepath.Join(bin, tool), []byte(stub), 0o755))
	}
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Dir = work
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "PASTE_CALLS=" + calls, "HOME=" + work}
	out, _ := cmd.CombinedOutput()
	_, err := os.Stat(filepath.Join(work, PasteMarker))
	require.True(t, os.IsNotExist(err), "pasting %q ran the payload (output %q)", command, out)
	raw, err := os.ReadFile(calls)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(raw), "\x1e"), "\x1e")
}
