package status

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/job/proxycheck"
)

// The verdicts of the clusters people run, as status prints them after the
// engine's run stopped with one: the run's Event carries the engine's error
// (job.recordEvent: "phase <name> failed (exit code 2): <error>"), and
// status names it with the next step.
func TestDecideFieldVerdicts(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	code := func(c int32) *int32 { return &c }
	finished := now.Add(-time.Hour)
	decision, variable, err := proxycheck.Decide(nil, "https://smt-azure.susecloud.net")
	require.NoError(t, err)
	require.Empty(t, variable)
	decision.ViaProxy, decision.Proxy, decision.ProxyVariable, decision.NoProxyVariable, decision.NoProxy = true, "proxy.corp:3128", "HTTPS_PROXY", "NO_PROXY", "cluster.local,.svc"
	tests := map[string]struct {
		note string
		want []string
	}{
		"AKS IMDS restriction": {
			note: "phase prove failed (exit code 2): phase 2 prove: azure imds: instance metadata unreachable from this pod: no connection to IMDS at http://169.254.169.254 from this pod in 5 attempts (last: dial tcp 169.254.169.254:80: i/o timeout), although this is an Azure VM; the likely cause is AKS's IMDS restriction (az aks update --enable-imds-restriction), which drops IMDS traffic from every pod that is not on the node's network; fix: set the chart value hostNetwork=true (helm upgrade <release> <chart> --reuse-values --set hostNetwork=true), which runs the engine's pod on the node's network with dnsPolicy ClusterFirstWithHostNet, or lift the restriction (az aks update --disable-imds-restriction)",
			want: []string{"Not registered: the last run, registration-engine-29400000, failed", "with exit code 2", "AKS's IMDS restriction", "--set hostNetwork=true"},
		},
		"the operator's request through a proxy": {
			note: "phase operator failed (exit code 2): " + decision.Verdict("cattle-scc-system", "rancher-scc-operator", "rancher-scc-operator"),
			want: []string{"Not registered: the last run, registration-engine-29400000, failed", "through the proxy proxy.corp:3128 (HTTPS_PROXY of Deployment cattle-scc-system/rancher-scc-operator", "NO_PROXY=cluster.local,.svc,smt-azure.susecloud.net"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := registered(now)
			r.Secret = Secret{Name: "scc-registration", Access: Absent}
			r.Jobs.Items = []Job{{Name: "registration-engine-29400000", Outcome: JobFailed, ExitCode: code(2), Reason: "PodFailurePolicy", Finished: &finished,
				Event: &Event{Type: "Warning", Reason: "RegistrationFailed", Note: tc.note, FromJobPod: true, Time: finished}}}
			v := Decide(r, now, testExits)
			assert.Equal(t, StateActionNeeded, v.State)
			for _, w := range tc.want {
				assert.Contains(t, v.Line, w)
			}
			assert.True(t, strings.Contains(v.Line, "a retry cannot succeed"), v.Line)
			t.Logf("status: %s", v.Line)
		})
	}
}
