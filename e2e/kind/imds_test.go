//go:build e2e

package kind

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/rancher/registration-engine/e2e/controlplane"
)

// testIMDSRestriction: AKS's IMDS restriction (az aks update
// --enable-imds-restriction) drops every packet a pod off the node's
// network sends to IMDS. Here a rule on every node does the same to the
// fake cloud's IMDS port: a pod's packets to it are routed through the node
// (iptables FORWARD) and dropped, while a hostNetwork pod's leave from the
// node itself (OUTPUT) and pass, as on AKS. The chart installed as the
// Marketplace installs it stops with the verdict that names the
// restriction and the chart value; helm upgrade with hostNetwork=true
// registers.
func (c *kindCluster) testIMDSRestriction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*jobBound+5*time.Minute)
	defer cancel()
	c.blockIMDS(t, ctx)

	c.installChart(t, ctx, "aks")
	t.Cleanup(func() { c.uninstallChart(t, context.Background()) })
	failed := c.releaseRun(t, ctx)
	cond := controlplane.FinishedCondition(failed)
	require.Equal(t, batchv1.JobFailed, cond.Type, "the default install cannot reach IMDS:\n%s", strings.Join(c.jobLog(t, ctx, failed.Name), "\n"))
	failedReason := cond.Reason
	assert.Equal(t, "PodFailurePolicy", failedReason, "permanent: failed at once, not retried")
	sum := c.summary(t, ctx, failed.Name)
	verdict, _ := sum["error"].(string)
	for _, want := range []string{"AKS's IMDS restriction", "hostNetwork=true"} {
		assert.Contains(t, verdict, want, "the verdict names the cause and the fix")
	}

	// The fix the verdict names, as a platform engineer applies it.
	chart := filepath.Join("..", "..", "manifests", "chart", "registration-engine")
	c.helm(t, ctx, "upgrade", "registration-engine", chart, "--reuse-values", "--set", "hostNetwork=true")
	run := c.nextReleaseRun(t, ctx, failed.Name)
	cond = controlplane.FinishedCondition(run)
	require.Equal(t, batchv1.JobComplete, cond.Type, "on the node's network: %s\n%s", cond.Message, strings.Join(c.jobLog(t, ctx, run.Name), "\n"))
	pods := c.jobPods(t, ctx, run.Name)
	require.NotEmpty(t, pods)
	assert.True(t, pods[0].Spec.HostNetwork, "the run's pod is on the node's network")
	assert.Equal(t, "ClusterFirstWithHostNet", string(pods[0].Spec.DNSPolicy), "and still asks the cluster's DNS")
	sum = c.summary(t, ctx, run.Name)
	assert.Contains(t, []any{"registered", "unchanged"}, sum["outcome"], "the run's summary: %v", sum)
	assert.Equal(t, "active", sum["operator"], "the run's summary: %v", sum)
	t.Logf("proved: with IMDS dropped for pods off the node's network (a DROP rule in the node's FORWARD chain, as AKS's IMDS restriction), the chart's run %s failed at once (%s) with %q; helm upgrade --set hostNetwork=true started run %s on the node's network (dnsPolicy %s), which completed: outcome %v, operator %v",
		failed.Name, failedReason, verdict, run.Name, pods[0].Spec.DNSPolicy, sum["outcome"], sum["operator"])
}

// blockIMDS drops, on every node, what pods send to the fake cloud's IMDS
// port, until the test ends.
func (c *kindCluster) blockIMDS(t *testing.T, ctx context.Context) {
	t.Helper()
	pod := c.fakecloudPod(t, ctx)
	port := 0
	for _, p := range pod.Spec.Containers[0].Ports {
		if p.Name == "imds" {
			port = int(p.ContainerPort)
		}
	}
	require.NotZero(t, port, "the fake cloud's container has no port imds")
	require.NotEmpty(t, pod.Status.PodIP)
	rule := []string{"FORWARD", "-p", "tcp", "-d", pod.Status.PodIP, "--dport", strconv.Itoa(port), "-j", "DROP"}
	nodes, err := c.provider.ListInternalNodes(c.s.clusterName)
	require.NoError(t, err)
	for _, n := range nodes {
		var out strings.Builder
		cmd := n.Command("iptables", append([]string{"-I"}, rule...)...)
		cmd.SetStdout(&out)
		cmd.SetStderr(&out)
		require.NoError(t, cmd.Run(), "iptables on %s: %s", n.String(), out.String())
		t.Cleanup(func() {
			if err := n.Command("iptables", append([]string{"-D"}, rule...)...).Run(); err != nil {
				t.Errorf("remove the IMDS block on %s: %v", n.String(), err)
			}
		})
	}
	t.Logf("IMDS blocked for pods: %s", fmt.Sprint(rule))
}
