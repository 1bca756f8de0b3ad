package status

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestStatusWait: --wait looks again while the verdict is "not yet" and
// prints the first other verdict; when --timeout passes first, it prints
// the last report and returns ErrWaitTimeout (exit 124), not "not yet".
func TestStatusWait(t *testing.T) {
	notYet := Verdict{State: StateNotYet, Line: "Not registered yet: run x is in progress — wait for it"}
	waitingForAzure := Verdict{State: StateNotYet, Line: "Not registered yet: the last run failed; waiting for Azure to propagate the identity — nothing to do"}
	registered := Verdict{State: StateRegistered, Line: "Registered: active"}
	action := Verdict{State: StateActionNeeded, Line: "Not registered: the last run failed — fix it"}
	tests := map[string]struct {
		looks   []Verdict // the last one repeats
		wantErr error
		want    string
		waited  []string
	}{
		"not yet, then registered":              {looks: []Verdict{notYet, notYet, registered}, want: "Registered: active", waited: []string{notYet.Line}},
		"waiting for Azure, then action needed": {looks: []Verdict{notYet, waitingForAzure, action}, wantErr: ErrActionNeeded, want: action.Line, waited: []string{notYet.Line, waitingForAzure.Line}},
		"registered at once: no wait":           {looks: []Verdict{registered}, want: "Registered: active"},
		"still not yet when the timeout passes": {looks: []Verdict{notYet}, wantErr: ErrWaitTimeout, want: notYet.Line, waited: []string{notYet.Line}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := 0
			look := func(time.Duration) (*Report, bool) {
				v := tc.looks[min(n, len(tc.looks)-1)]
				n++
				return &Report{Verdict: v}, true
			}
			var stdout, stderr bytes.Buffer
			err := Command{Exits: testExits}.wait(context.Background(), look, 50*time.Millisecond, time.Millisecond, "text", &stdout, &stderr)
			if tc.wantErr == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tc.wantErr)
			}
			assert.Equal(t, tc.want+"\n", stdout.String(), "the last verdict, once")
			for _, w := range tc.waited {
				assert.Contains(t, stderr.String(), w)
			}
			assert.Equal(t, len(tc.waited), strings.Count(stderr.String(), "waiting ("), "each new verdict once:\n%s", stderr.String())
		})
	}
}
