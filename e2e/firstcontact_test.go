package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/retry"
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
//     one pod) and suspends the retry CronJob: no retry pod runs.
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
			p, e, ctx := aksPlane(t, 5*time.Minute)
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
				// Nothing to retry: the run suspended the retry CronJob,
				// which starts no pod for more than one interval, and
				// nothing is written.
				assert.Equal(t, job.RetriesSuspended, summary(t, pods[0].Res.Stderr)["retryCronJob"])
				assert.True(t, retrySuspended(ctx, t, e, harness.CronJobName+"-retry"))
				// A look the CronJob started before the run suspended it
				// (it is created unsuspended) may still run: only Jobs
				// created after the suspension count.
				since := time.Now()
				time.Sleep(70 * time.Second)
				looks := len(retryJobsSince(ctx, t, e, since))
				assert.Zero(t, looks, "no retry Job while nothing is to be retried")
				_, err := e.Admin.CoreV1().Secrets(operator.Namespace).Get(ctx, operator.SecretName, metav1.GetOptions{})
				assert.True(t, apierrors.IsNotFound(err), "nothing written: %v", err)
				t.Logf("proved: helm install with %s: the release's run %s failed at once (1 pod, exit %d, Event %s) %s after the install started and suspended the retry CronJob: %d retry Jobs in the 70 s after, and no Secret was written",
					tc.fault, first, pods[0].Res.Code, tc.reason, failedAfter.Round(time.Second), looks)
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
			rec, ok, err := retry.Parse(le.Annotations[kube.AnnotationLastRun])
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, job.OutcomeRegistered, rec.Outcome)
			assert.Nil(t, rec.NextAttempt)
			failed, notDue := countRuns(t, runs)
			// The promise is the attempt's start: within the retry
			// interval (1 min) of the cause clearing, and a pod's start.
			// The run itself then takes what a run takes (the handover
			// waits for CoreDNS's reload and its settling, 20 s or more
			// on a loaded machine), which is not the retry rule's.
			due := logLine(t, won.Res.Stderr, "a retry is due")
			require.NotNil(t, due, "a look of the retry CronJob runs the attempt: %s", won.Res)
			began := logTime(t, due).Sub(healed)
			assert.LessOrEqual(t, began, time.Minute+15*time.Second, "the winning attempt began within the retry interval (1 min) of the fault clearing, and a pod's start")
			assert.LessOrEqual(t, registered, 3*time.Minute, "registered within the retry interval and a run")
			t.Logf("proved: helm install with %s for the first %s (fault %s): the release's run %s failed (%d pods, exit %d, Event %s); nobody acted; %d attempts failed in all, %d looks of the retry CronJob found nothing due, and its Job %s began %s and registered %s after the fault cleared (%s after the install)",
				name, firstContactHeal, tc.fault, first, len(pods), pods[0].Res.Code, tc.reason, failed, notDue, won.Job, began.Round(time.Second), registered.Round(time.Second), time.Since(start).Round(time.Second))
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

// registeredFor is how long the test leaves a registered cluster alone:
// three looks of a retry CronJob running every minute, or
// E2E_REGISTERED_FOR (a Go duration, e.g. 30m, for a longer watch by hand).
func registeredFor(t *testing.T) time.Duration {
	v := os.Getenv("E2E_REGISTERED_FOR")
	if v == "" {
		return 3 * time.Minute
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, "E2E_REGISTERED_FOR")
	return d
}

// TestRetryCronJobSleepsWhileRegistered: helm install with
// retry.intervalMinutes=1 on a healthy cloud. The release's run registers
// and suspends the retry CronJob; for registeredFor no retry Job, and so no
// pod, is created. Then the update servers fail and a run fails: it
// resumes the retry CronJob, whose first look comes within one interval
// and runs the attempt; once they are back a retry registers and suspends
// it again.
func TestRetryCronJobSleepsWhileRegistered(t *testing.T) {
	t.Parallel() // minutes of waiting on the retry CronJob's minute: beside the other planes' tests
	registeredFor := registeredFor(t)
	p, e, ctx := aksPlane(t, registeredFor+6*time.Minute)
	fc, runs, first := installRegistered(ctx, t, p, e)
	const ns, retry = operator.Namespace, harness.CronJobName + "-retry"
	pods := runs.ForJob(t, first)
	require.Len(t, pods, 1)
	s := summary(t, pods[0].Res.Stderr)
	assert.Equal(t, job.OutcomeRegistered, s["outcome"])
	assert.Equal(t, job.RetriesSuspended, s["retryCronJob"])
	assert.True(t, retrySuspended(ctx, t, e, retry), "the release's run suspended the retry CronJob")
	atInstall := len(retryPods(t, runs))

	// Registered for a while: nothing of the retry CronJob runs. (A look
	// the CronJob started before the release's run suspended it may still
	// run: only what was created after the suspension counts.)
	since := time.Now()
	time.Sleep(registeredFor)
	retryJobs := retryJobsSince(ctx, t, e, since)
	assert.Empty(t, retryJobs, "no retry Job while registered")
	pausedPods := 0
	for _, pr := range retryPods(t, runs) {
		if slices.Contains(retryJobs, pr.Job) {
			pausedPods++
		}
	}
	assert.Zero(t, pausedPods, "no retry pod while registered")
	assert.True(t, retrySuspended(ctx, t, e, retry))

	// The update servers fail, and a run a person starts fails: it resumes
	// the retries, whose first attempt comes within one interval. (This
	// Job stands for an admin's run, kubectl create job --from, with the
	// Job's own pod retries off so that one run fails. A scheduled refresh
	// that fails is retried an hour or more later and its scheduled runs
	// defer meanwhile: job's TestScheduledRunDefersToAPendingRefresh, and
	// docs/BENCHMARKS.md for a fleet.)
	require.NoError(t, fc.SetFault("wrong-fingerprint"))
	cj, err := e.Admin.BatchV1().CronJobs(ns).Get(ctx, harness.CronJobName, metav1.GetOptions{})
	require.NoError(t, err)
	spec := cj.Spec.JobTemplate.Spec.DeepCopy()
	spec.BackoffLimit = ptr.To[int32](0) // one failed run, not the Job's own retries
	const failing = "manual-run-fails"
	_, err = e.Admin.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: failing}, Spec: *spec}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { e.DeleteJob(t, ns, failing) })
	controlplane.WaitJobFinished(ctx, t, e.Admin, ns, failing)
	fpods := runs.ForJob(t, failing)
	require.Len(t, fpods, 1)
	fs := summary(t, fpods[0].Res.Stderr)
	require.Equal(t, job.OutcomeFailed, fs["outcome"])
	assert.Equal(t, job.RetriesResumed, fs["retryCronJob"])
	failedAt := logTime(t, fs)
	assert.False(t, retrySuspended(ctx, t, e, retry), "the failed run resumed the retry CronJob")

	attempt := waitRetryRun(ctx, t, runs, func(pr harness.PodRun) bool {
		return logLine(t, pr.Res.Stderr, "a retry is due") != nil
	})
	attemptAt := logTime(t, logLine(t, attempt.Res.Stderr, "a retry is due"))
	woke := attemptAt.Sub(failedAt)
	assert.LessOrEqual(t, woke, time.Minute+15*time.Second, "the first attempt within one interval (1 min) of the failure, and a pod's start")
	assert.Equal(t, job.OutcomeFailed, summary(t, attempt.Res.Stderr)["outcome"], "the attempt ran, while the fault lasts")

	// The update servers are back: a retry registers and puts the retry
	// CronJob to sleep again.
	require.NoError(t, fc.SetFault("heal"))
	won := waitRetryRun(ctx, t, runs, func(pr harness.PodRun) bool {
		o := summary(t, pr.Res.Stderr)["outcome"]
		return o == job.OutcomeRegistered || o == job.OutcomeUnchanged // the Secret is the one the release's run wrote
	})
	assert.Equal(t, job.RetriesSuspended, summary(t, won.Res.Stderr)["retryCronJob"])
	assert.True(t, retrySuspended(ctx, t, e, retry), "asleep again once registered")
	t.Logf("proved: helm install with retry.intervalMinutes=1: the release's run %s registered and suspended %s (%d retry pods before that); registered for %s: %d retry Jobs, %d retry pods (at 1 minute, %d without the suspension); a failed run %s resumed it, and its first attempt (%s) began %s after the failure; once the update servers were back, %s registered and suspended it again",
		first, retry, atInstall, registeredFor, len(retryJobs), pausedPods, int(registeredFor/time.Minute), failing, attempt.Job, woke.Round(100*time.Millisecond), won.Job)
}

// installRegistered installs the chart on e, an AKS-shaped plane, the way
// the Marketplace does, against a healthy fake cloud, with the retry
// CronJob looking every minute (and set, more values), and waits for the
// release's run to register. It returns the cloud, the pods run so far
// and the release's run Job.
func installRegistered(ctx context.Context, t *testing.T, p *controlplane.Plane, e *clusterEnv, set ...string) (*fakecloud.Cloud, *harness.PodRuns, string) {
	t.Helper()
	helm := testkit.Helm(t)
	fc, err := fakecloud.Start(fakecloud.Options{Dir: t.TempDir(), UpdateServerName: harness.UpdateServer})
	require.NoError(t, err)
	t.Cleanup(fc.Stop)
	c := harness.Cloud{Dir: t.TempDir(), Env: fc.Environ()}
	runs := e.StartKubelet(ctx, t, operator.Namespace, c)
	chart := filepath.Join("..", "manifests", "chart", "registration-engine")
	args := []string{"install", "registration-engine", chart, "--namespace", operator.Namespace, "--wait", "--timeout", "60s", "--set", "retry.intervalMinutes=1"}
	for _, kv := range set {
		args = append(args, "--set", kv)
	}
	runHelm(t, p, helm, append(args, marketplaceValues(t, chart, c.Vars(), chartRegCode)...)...)
	first := runJobOf(t, releaseObjects(t, runHelm(t, p, helm, "get", "manifest", "registration-engine", "--namespace", operator.Namespace)))
	done := controlplane.WaitJobFinished(ctx, t, e.Admin, operator.Namespace, first)
	require.Equal(t, batchv1.JobComplete, controlplane.FinishedCondition(done).Type, "the release's run registered")
	return fc, runs, first
}

// retrySuspended reads the retry CronJob's spec.suspend.
func retrySuspended(ctx context.Context, t *testing.T, e *clusterEnv, name string) bool {
	t.Helper()
	var cj *batchv1.CronJob
	err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		cj, err = e.Admin.BatchV1().CronJobs(operator.Namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	})
	require.NoError(t, err)
	return ptr.Deref(cj.Spec.Suspend, false)
}

// retryJobsSince are the names of the retry CronJob's Jobs created after
// since (by the API server's clock, on this machine).
func retryJobsSince(ctx context.Context, t *testing.T, e *clusterEnv, since time.Time) []string {
	t.Helper()
	jobs, err := e.Admin.BatchV1().Jobs(operator.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, j := range jobs.Items {
		if o := metav1.GetControllerOf(&j); o != nil && o.Kind == "CronJob" && o.Name == harness.CronJobName+"-retry" && j.CreationTimestamp.After(since) {
			out = append(out, j.Name)
		}
	}
	return out
}

// retryPods are the pods of the retry CronJob's Jobs that ran so far.
func retryPods(t *testing.T, runs *harness.PodRuns) []harness.PodRun {
	var out []harness.PodRun
	for _, pr := range runs.All(t) {
		if strings.HasPrefix(pr.Job, harness.CronJobName+"-retry-") {
			out = append(out, pr)
		}
	}
	return out
}

// logTime is the time of an engine log line.
func logTime(t *testing.T, line map[string]any) time.Time {
	t.Helper()
	require.NotNil(t, line)
	s, _ := line["time"].(string)
	at, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err, "log line time %q", s)
	return at
}
