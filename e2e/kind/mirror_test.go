package kind

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The kind tier's debootstrap takes its Debian mirror from the machine's
// apt sources, never from the project: the first "deb" source of the suite,
// in either format apt reads; with none, the build stops and says where a
// mirror belongs.
func TestMirrorFromAptSources(t *testing.T) {
	tests := map[string]struct {
		files   map[string]string // relative to the apt directory
		want    string
		wantErr string
	}{
		"deb822, disabled and other suites skipped": {
			files: map[string]string{"sources.list.d/debian.sources": `Types: deb
URIs: http://disabled.example/debian
Suites: bookworm
Enabled: no

Types: deb-src
URIs: http://source.example/debian
Suites: bookworm

Types: deb
# a comment inside the stanza
URIs: http://security.example/debian-security
Suites: bookworm-security

Types: deb
URIs: http://mirror.example/debian http://second.example/debian
Suites: bookworm bookworm-updates
Components: main
`},
			want: "http://mirror.example/debian",
		},
		"one-line format with options": {
			files: map[string]string{"sources.list": "# deb http://commented.example/debian bookworm main\ndeb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://oneline.example/debian bookworm main\n"},
			want:  "http://oneline.example/debian",
		},
		"a .list file in sources.list.d": {
			files: map[string]string{"sources.list.d/local.list": "deb http://list.example/debian bookworm main contrib\n"},
			want:  "http://list.example/debian",
		},
		"no source for the suite": {
			files:   map[string]string{"sources.list": "deb http://old.example/debian bullseye main\n"},
			wantErr: "apt has no Debian mirror for bookworm",
		},
		"no apt sources at all": {
			wantErr: "Add the mirror this machine reaches to apt's sources",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			apt := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(apt, "sources.list.d"), 0o755))
			for f, content := range tc.files {
				require.NoError(t, os.WriteFile(filepath.Join(apt, f), []byte(content), 0o644))
			}
			cmd := exec.Command("bash", "-c", `source ./lib.sh && mirror`)
			cmd.Env = append(os.Environ(), "APT_DIR="+apt, "DEBIAN_SUITE=bookworm", "KIND_VERSION=test", "CACHE_DIR="+t.TempDir())
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if tc.wantErr != "" {
				require.Error(t, err, "mirror must fail: %s", out)
				assert.Empty(t, strings.TrimSpace(string(out)), "no mirror printed")
				assert.Contains(t, stderr.String(), tc.wantErr)
				return
			}
			require.NoError(t, err, stderr.String())
			assert.Equal(t, tc.want, strings.TrimSpace(string(out)))
		})
	}
}
