package job

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/providers/azure"
)

// TestSubcommandProblemsReachStderr: a subcommand stopped by a flag or a
// file says so on stderr, once, naming the flag or the file; the exit code
// alone would leave the person at the terminal guessing. Every case stops
// before any request (no cluster, no network).
func TestSubcommandProblemsReachStderr(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	notPEM := filepath.Join(dir, "roots.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600))
	notDoc := filepath.Join(dir, "document.xml")
	require.NoError(t, os.WriteFile(notDoc, []byte("hello\n"), 0o600))

	status := func(args ...string) func(*bytes.Buffer) error {
		return func(stderr *bytes.Buffer) error {
			return RunStatus(context.Background(), args, func(string) string { return "" }, &bytes.Buffer{}, stderr)
		}
	}
	attestation := func(args ...string) func(*bytes.Buffer) error {
		return func(stderr *bytes.Buffer) error {
			return RunAttestation(context.Background(), args, strings.NewReader(""), &bytes.Buffer{}, stderr)
		}
	}
	tests := map[string]struct {
		run func(stderr *bytes.Buffer) error
		// says is what the one problem line on stderr must contain; is, when
		// set, a sentinel the error must wrap.
		says []string
		is   error
	}{
		"status: a roots file that does not exist": {run: status("--attestation-roots", missing), says: []string{"status: --attestation-roots: ", missing}, is: fs.ErrNotExist},
		"status: an intermediates file without a certificate": {
			run: status("--intermediates", notPEM), says: []string{"status: --intermediates: ", notPEM, "no PEM certificate"}},
		"status: an unknown output": {run: status("-o", "yaml"), says: []string{`status: -o "yaml": want text or json`}},
		"attestation: a roots file that does not exist": {
			run: attestation("inspect", "--roots", missing, notDoc), says: []string{"attestation: ", missing}, is: fs.ErrNotExist},
		"attestation: a document file that does not exist": {
			run: attestation("inspect", missing), says: []string{"attestation: ", missing}, is: fs.ErrNotExist},
		"attestation: a bad --at": {run: attestation("inspect", "--at", "yesterday", notDoc), says: []string{`--at "yesterday": want RFC 3339`}},
		"attestation: not an attested document": {
			run: attestation("inspect", "--offline", notDoc), says: []string{"attestation: ", "attested document"}, is: azure.ErrAttestation},
		"attestation: no subcommand": {run: attestation("check"), says: []string{"want the subcommand inspect"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			err := tc.run(&stderr)
			require.Error(t, err)
			assert.Equal(t, ExitPermanent, ExitCode(err))
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			var problems []string
			for _, l := range strings.Split(stderr.String(), "\n") {
				if strings.HasPrefix(l, "registration-engine: ") {
					problems = append(problems, l)
				}
			}
			require.Len(t, problems, 1, "one problem line on stderr:\n%s", stderr.String())
			for _, s := range tc.says {
				assert.Contains(t, problems[0], s)
			}
		})
	}
}
