package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/job"
)

// TestRunDispatch: a word that is no command is a usage error naming the
// commands (exit 2), never a run of the engine (which would print its JSON
// "run finished … load-config" line, or worse, register); asking a command
// for its help exits 0.
func TestRunDispatch(t *testing.T) {
	tests := map[string]struct {
		args       []string
		wantExit   int
		wantStderr string
	}{
		"a typo of status": {args: []string{"stauts"}, wantExit: job.ExitPermanent,
			wantStderr: `registration-engine: unknown command "stauts": the commands are status, attestation inspect, cleanup (with none, the engine runs once; see --help)` + "\n"},
		"attestation --help":          {args: []string{"attestation", "--help"}, wantExit: job.ExitOK},
		"attestation inspect --help":  {args: []string{"attestation", "inspect", "--help"}, wantExit: job.ExitOK},
		"status --help":               {args: []string{"status", "--help"}, wantExit: job.ExitOK},
		"attestation without inspect": {args: []string{"attestation"}, wantExit: job.ExitPermanent},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tc.args, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
			require.Equal(t, tc.wantExit, job.ExitCode(err), "%v\n%s", err, stderr.String())
			if tc.wantStderr != "" {
				assert.Equal(t, tc.wantStderr, stderr.String())
				assert.ErrorIs(t, err, job.ErrUnknownCommand)
			}
			assert.NotContains(t, stderr.String(), "run finished", "no run of the engine")
		})
	}
}
