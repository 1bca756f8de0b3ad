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
// "run finished … load-config" line, or worse, register); nor is a
// mistyped flag of the run; asking a command for its help exits 0 and
// says what the command is for.
func TestRunDispatch(t *testing.T) {
	tests := map[string]struct {
		args       []string
		wantExit   int
		wantStderr string
		wantIs     error
		wantHelp   string
	}{
		"a typo of status": {args: []string{"stauts"}, wantExit: job.ExitPermanent, wantIs: job.ErrUnknownCommand,
			wantStderr: `registration-engine: unknown command "stauts": the commands are status, attestation inspect, cleanup (with none, the engine runs once; see --help)` + "\n"},
		"attestation --help":          {args: []string{"attestation", "--help"}, wantExit: job.ExitOK},
		"attestation inspect --help":  {args: []string{"attestation", "inspect", "--help"}, wantExit: job.ExitOK},
		"status --help":               {args: []string{"status", "--help"}, wantExit: job.ExitOK},
		"attestation without inspect": {args: []string{"attestation"}, wantExit: job.ExitPermanent},
		"a mistyped flag of the run": {args: []string{"--foo"}, wantExit: job.ExitPermanent, wantIs: job.ErrUsage,
			wantStderr: "registration-engine: usage: flag provided but not defined: -foo; registration-engine --help lists the flags\n"},
		"an argument after the flags": {args: []string{"--dry-run", "now"}, wantExit: job.ExitPermanent, wantIs: job.ErrUsage,
			wantStderr: `registration-engine: usage: unexpected argument "now"; registration-engine --help lists the flags and commands` + "\n"},
		"cleanup --help": {args: []string{"cleanup", "--help"}, wantExit: job.ExitOK, wantHelp: "Removes what the engine wrote outside its release"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tc.args, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
			require.Equal(t, tc.wantExit, job.ExitCode(err), "%v\n%s", err, stderr.String())
			if tc.wantStderr != "" {
				assert.Equal(t, tc.wantStderr, stderr.String())
				assert.ErrorIs(t, err, tc.wantIs)
			}
			assert.Contains(t, stderr.String(), tc.wantHelp)
			assert.NotContains(t, stderr.String(), "run finished", "no run of the engine")
		})
	}
}
