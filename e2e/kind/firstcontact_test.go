//go:build e2e

package kind

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
)

// installThroughFirstContact installs the chart as the Marketplace does
// while ARM still refuses the extension's identity (403, as Azure answers
// while a role assignment propagates), with the retry CronJob looking every
// minute. The release's run fails (its three pods, Event WaitingForAzure);
// once the release's run has failed, the fake cloud heals, and nobody acts:
// the retry CronJob's next look runs the engine, on the real kubelet, and
// registers. It returns that Job, finished, and how long after the install
// it registered.
func (c *kindCluster) installThroughFirstContact(t *testing.T, ctx context.Context, layout string) (*batchv1.Job, time.Duration) {
	t.Helper()
	// A cluster the Marketplace installs on has no Lease yet; the one the
	// overlay's runs left records their success, after which ARM's 403 is
	// a removed role (permanent), not Azure still propagating one.
	err := c.cs.CoordinationV1().Leases(operator.Namespace).Delete(ctx, kube.LeaseName, metav1.DeleteOptions{})
	require.True(t, err == nil || apierrors.IsNotFound(err), "delete the Lease: %v", err)
	c.fault(t, ctx, "arm-403")
	start := time.Now()
	c.installChart(t, ctx, layout, map[string]any{"retry": map[string]any{"enabled": true, "intervalMinutes": 1}})
	first := c.releaseRun(t, ctx)
	cond := controlplane.FinishedCondition(first)
	require.Equal(t, batchv1.JobFailed, cond.Type, "the release's run while ARM refuses: %s", strings.Join(c.jobLog(t, ctx, first.Name), "\n"))
	pods := c.jobPods(t, ctx, first.Name)
	events, err := c.cs.EventsV1().Events(operator.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	waiting := 0
	for _, e := range events.Items {
		if e.Regarding.Name == first.Name && e.Reason == kube.ReasonWaiting {
			waiting++
		}
	}
	assert.Positive(t, waiting, "the release's run says it waits for Azure")
	c.fault(t, ctx, "heal")
	healed := time.Now()

	var won *batchv1.Job
	require.Eventually(t, func() bool {
		jobs, err := c.cs.BatchV1().Jobs(operator.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for i := range jobs.Items {
			j := &jobs.Items[i]
			cond := controlplane.FinishedCondition(j)
			if !strings.HasPrefix(j.Name, harness.CronJobName+"-retry-") || cond == nil || cond.Type != batchv1.JobComplete {
				continue
			}
			if c.summary(t, ctx, j.Name)["outcome"] == "registered" {
				won = j
				return true
			}
		}
		return false
	}, jobBound+2*time.Minute, 2*time.Second, "no Job of the retry CronJob registered after the fault cleared")
	t.Logf("proved: kind, the real kubelet: helm install as the Marketplace does while ARM answered 403 → the release's run %s failed (%d pods, %d WaitingForAzure Events) → the fault cleared %s after the install, nobody acted → the retry CronJob's Job %s registered %s after it cleared",
		first.Name, len(pods), waiting, healed.Sub(start).Round(time.Second), won.Name, time.Since(healed).Round(time.Second))
	return won, time.Since(start)
}

// fault switches a fault of the fake cloud pod on (or, with "heal", the
// refusals and outages off), through its admin endpoint.
func (c *kindCluster) fault(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	_, err := c.cs.CoreV1().RESTClient().Post().Namespace(operator.Namespace).Resource("services").
		Name("http:"+fakecloudName+":imds").SubResource("proxy").Suffix("fakecloud", "fault").Param("name", name).DoRaw(ctx)
	require.NoError(t, err, "fake cloud fault %s", name)
}
