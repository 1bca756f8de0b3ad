package controlplane

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewFailsWithLogs checks what a user sees when the plane cannot start:
// the error names the component and the class (exited or not ready) and
// shows the end of its log, it comes within the bound, and no process is
// left behind. Shell scripts stand in for the binaries.
func TestNewFailsWithLogs(t *testing.T) {
	const serve = "#!/bin/sh\necho \"$0 is up\" >&2\necho $$ >> \"$PIDS\"\nexec sleep 60\n"
	tests := map[string]struct {
		etcd, apiserver string
		want            error
		wantLog         string
	}{
		"a component that exits": {
			etcd:      "#!/bin/sh\necho 'etcd: cannot open data dir' >&2\nexit 3\n",
			apiserver: serve,
			want:      ErrExited, wantLog: "etcd: cannot open data dir",
		},
		"a component that never answers": {
			etcd: serve, apiserver: serve,
			want: ErrNotReady, wantLog: "kube-apiserver is up",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			pids := filepath.Join(dir, "pids")
			t.Setenv("PIDS", pids)
			for bin, script := range map[string]string{
				"etcd": tc.etcd, "kube-apiserver": tc.apiserver, "kube-controller-manager": serve, "kubectl": "#!/bin/sh\n",
			} {
				require.NoError(t, os.WriteFile(filepath.Join(dir, bin), []byte(script), 0o755))
			}

			start := time.Now()
			p, err := newPlane(context.Background(), dir, time.Second)
			require.Error(t, err)
			assert.Nil(t, p)
			assert.Less(t, time.Since(start), 15*time.Second)
			assert.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.wantLog, "the error shows the component's log")

			b, _ := os.ReadFile(pids)
			for _, f := range strings.Fields(string(b)) {
				pid, err := strconv.Atoi(f)
				require.NoError(t, err)
				assert.True(t, errors.Is(syscall.Kill(pid, 0), syscall.ESRCH), "pid %d still running", pid)
			}
		})
	}
}

// TestNewRefusesMissingBinaries: a wrong K8S_TESTBIN is reported as such,
// before anything starts.
func TestNewRefusesMissingBinaries(t *testing.T) {
	for name, dir := range map[string]string{"unset": "", "empty dir": t.TempDir()} {
		t.Run(name, func(t *testing.T) {
			_, err := New(context.Background(), dir)
			assert.ErrorIs(t, err, ErrBinaryMissing)
		})
	}
}
