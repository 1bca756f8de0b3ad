package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
)

// firstContactHeal is how long each case's fault lasts after helm install
// returns: longer than the release's own run (its three pods, 10 s and
// 20 s apart), shorter than the retry CronJob's second look.
const firstContactHeal = 40 * time.Second

// TestChartInstallFirstContact: the Marketplace installs the chart while
// the world is not ready yet, and nobody types kubectl. helm install
// exits 0 at once either way (the run is no hook, and Helm waits for
// neither it nor its pods). With retry.intervalMinutes=1 (the chart's
// default is 10), scaled so that the test takes minutes:
//
//   - SUSE's update servers failing (every certificate mismatches its
//     fingerprint), ARM answering 403 while a role assignment propagates,
//     IMDS answering 400 Identity not found while the extension's identity
//     is attached: the release's run fails, and once the fault is gone
//     the retry CronJob's next look registers the cluster by itself;
//   - a wrong Marketplace plan: the release's run fails at once (exit 2,
//     one pod) and the retry CronJob's looks do nothing.
//
// Each case on a plane of its own, side by side.
func TestChartInstallFirstContact(t *testing.T) {
	t.Parallel() // its cases wait on the retry CronJob's minute: beside the other planes' tests
	helm := testkit.Helm(t)
	tests := map[string]struct {
		// fault lasts firstContactHeal after helm install, then the fake
		// cloud's "heal" switches it off.
		fault string
		// permanent: the release's run ends at once, and no retry runs.
		permanent bool
		// reason of the release's run's Event.
		reason string
	}{
		"the update servers failing":                                       {fault: "wrong-fingerprint", reason: kube.ReasonFailed},
		"ARM answering 403 while the role assignment propagates":           {fault: "arm-403", reason: kube.ReasonWaiting},
		"IMDS answering Identity not found while the identity is attached": {fault: "identity-not-found", reason: kube.ReasonWaiting},
		"a wrong Marketplace plan":                                         {fault: "wrong-plan", reason: kube.ReasonFailed, permanent: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := controlplane.Start(t)
			e := &clusterEnv{&harness.Cluster{Plane: p, Admin: p.AdminClient(t), Settle: harness.ProcessSettle}}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			aksBeforeInstall(ctx, t, e)
			fc, err := fakecloud.Start(fakecloud.Options{Dir: t.TempDir(), UpdateServerName: harness.UpdateServer, Faults: []string{tc.fault}})
			require.NoError(t, err)
			t.Cleanup(fc.Stop)
			c := harness.Cloud{Dir: t.TempDir(), Env: fc.Environ()}
			runs := e.StartKubelet(ctx, t, operator.Namespace, c)
			chart := filepath.Join("..", "manifests", "chart", "registration-engine")

			start := time.Now()
			runHelm(t, p, helm, append([]string{"install", "registration-engine", chart, "--namespace", operator.Namespace, "--wait", "--timeout", "60s",
				"--set", "retry.intervalMinutes=1"}, marketplaceValues(t, chart, c.Vars(), chartRegCode)...)...)
			installed := time.Since(start)
			first := runJobOf(t, releaseObjects(t, runHelm(t, p, helm, "get", "manifest", "registration-engine", "--namespace", operator.Namespace)))
			done := controlplane.WaitJobFinished(ctx, t, e.Admin, operator.Namespace, first)
			cond := controlplane.FinishedCondition(done)
			require.NotNil(t, cond)
			assert.Equal(t, batchv1.JobFailed, cond.Type, "the release's run failed while the fault lasted")
			failedAfter := time.Since(start)
			assert.Less(t, installed, failedAfter, "helm install returned before the run finished: it does not wait for it")
			assert.Contains(t, runHelm(t, p, helm, "status", "registration-engine", "--namespace", operator.Namespace), "STATUS: deployed")
			pods := runs.ForJob(t, first)
			require.NotEmpty(t, pods)
			assert.Equal(t, job.OutcomeFailed, summary(t, pods[0].Res.Stderr)["outcome"])
			events, err := e.Admin.EventsV1().Events(operator.Namespace).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			var reasons []string
			for _, ev := range events.Items {
				if ev.Regarding.Name == first {
					reasons = append(reasons, ev.Reason)
				}
			}
			assert.Contains(t, reasons, tc.reason, "the Event on the release's run")

			if tc.permanent {
				assert.Len(t, pods, 1, "exit 2 fails the Job at once: no second pod")
				assert.Equal(t, job.ExitPermanent, pods[0].Res.Code)
				// The retry CronJob looks, finds nothing due, and writes nothing.
				look := waitRetryRun(ctx, t, runs, func(pr harness.PodRun) bool { return true })
				s := summary(t, look.Res.Stderr)
				assert.Equal(t, job.OutcomeNotDue, s["outcome"])
				assert.Contains(t, s["reason"], "another attempt cannot succeed (cause permanent)")
				_, err := e.Admin.CoreV1().Secrets(operator.Namespace).Get(ctx, operator.SecretName, metav1.GetOptions{})
				assert.True(t, apierrors.IsNotFound(err), "nothing written: %v", err)
				t.Logf("proved: helm install with %s: the release's run %s failed at once (1 pod, exit %d, Event %s) %s after the install started; the retry CronJob's look %s ran nothing (%q) and no Secret was written",
					tc.fault, first, pods[0].Res.Code, tc.reason, failedAfter.Round(time.Second), look.Job, s["reason"])
				return
			}

			// The fault clears; nobody acts; the retry CronJob registers.
			healAt := start.Add(installed + firstContactHeal)
			time.Sleep(time.Until(healAt))
			require.NoError(t, fc.SetFault("heal"))
			healed := time.Now()
			won := waitRetryRun(ctx, t, runs, func(pr harness.PodRun) bool {
				return summary(t, pr.Res.Stderr)["outcome"] == job.OutcomeRegistered
			})
			registered := time.Since(healed)
			harness.AssertRegistration(t, e.Secret(ctx, t), chartRegCode)
			le, err := e.Admin.CoordinationV1().Leases(operator.Namespace).Get(ctx, kube.LeaseName, metav1.GetOptions{})
			require.NoError(t, err)
			rec, ok, err := kube.ParseRunRecord(le.Annotations)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, job.OutcomeRegistered, rec.Outcome)
			assert.Nil(t, rec.NextAttempt)
			failed, notDue := countRuns(t, runs)
			assert.LessOrEqual(t, registered, time.Minute+20*time.Second, "registered within the retry interval (1 min) and a run after the fault cleared")
			t.Logf("proved: helm install with %s for the first %s (fault %s): the release's run %s failed (%d pods, exit %d, Event %s); nobody acted; %d attempts failed in all, %d looks of the retry CronJob found nothing due, and its Job %s registered %s after the fault cleared (%s after the install)",
				name, firstContactHeal, tc.fault, first, len(pods), pods[0].Res.Code, tc.reason, failed, notDue, won.Job, registered.Round(time.Second), time.Since(start).Round(time.Second))
		})
	}
}

// waitRetryRun waits for a pod of the retry CronJob that ended and
// satisfies ok.
func waitRetryRun(ctx context.Context, t *testing.T, runs *harness.PodRuns, ok func(harness.PodRun) bool) harness.PodRun {
	t.Helper()
	var found harness.PodRun
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		for _, pr := range runs.All(t) {
			if strings.HasPrefix(pr.Job, harness.CronJobName+"-retry-") && ok(pr) {
				found = pr
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no run of the retry CronJob as wanted; runs: %s", describeRuns(t, runs))
	return found
}

// countRuns counts the engine's failed runs and the retry CronJob's looks
// that found nothing due.
func countRuns(t *testing.T, runs *harness.PodRuns) (failed, notDue int) {
	for _, pr := range runs.All(t) {
		switch summary(t, pr.Res.Stderr)["outcome"] {
		case job.OutcomeFailed:
			failed++
		case job.OutcomeNotDue:
			notDue++
		}
	}
	return failed, notDue
}

func describeRuns(t *testing.T, runs *harness.PodRuns) string {
	var out []string
	for _, pr := range runs.All(t) {
		s := summary(t, pr.Res.Stderr)
		out = append(out, fmt.Sprintf("%s: exit %d, %v %v %v", pr.Job, pr.Res.Code, s["outcome"], s["failedPhase"], s["error"]))
	}
	return strings.Join(out, "; ")
}
