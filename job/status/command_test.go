package status

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestStatusWithoutACluster: with no cluster to ask, status still ends in a
// verdict line, exit 2, naming what a person would change (KUBECONFIG,
// --kubeconfig), not client-go's KUBERNETES_MASTER.
func TestStatusWithoutACluster(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // no ~/.kube/config
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	missing := filepath.Join(t.TempDir(), "kubeconfig")
	tests := map[string]struct {
		kubeconfigEnv string
		args          []string
		says          []string
	}{
		"KUBECONFIG names no file":         {kubeconfigEnv: "/nonexistent", says: []string{"KUBECONFIG=/nonexistent", "--kubeconfig"}},
		"no KUBECONFIG, no ~/.kube/config": {says: []string{"KUBECONFIG is unset", "--kubeconfig"}},
		"--kubeconfig names no file":       {args: []string{"--kubeconfig", missing}, says: []string{"--kubeconfig " + missing, "no such file"}},
		"-o json: the verdict as JSON":     {kubeconfigEnv: "/nonexistent", args: []string{"-o", "json"}, says: []string{`"state": "unknown"`, `"line": "Unknown: no cluster to ask — `}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.kubeconfigEnv)
			getenv := func(k string) string {
				if k == "KUBECONFIG" {
					return tc.kubeconfigEnv
				}
				return ""
			}
			var stdout, stderr bytes.Buffer
			err := Command{Version: "test", Exits: testExits}.Run(context.Background(), tc.args, getenv, &stdout, &stderr)
			assert.ErrorIs(t, err, ErrActionNeeded, "exit 2")
			out := strings.TrimSpace(stdout.String())
			if !slices.Contains(tc.args, "json") {
				lines := strings.Split(out, "\n")
				assert.True(t, strings.HasPrefix(lines[len(lines)-1], "Unknown: no cluster to ask — "), "the last line is the verdict:\n%s", out)
			}
			for _, s := range tc.says {
				assert.Contains(t, out, s)
			}
			assert.NotContains(t, stdout.String()+stderr.String(), "KUBERNETES_MASTER")
			assert.Empty(t, stderr.String(), "the verdict says it all")
		})
	}
}
