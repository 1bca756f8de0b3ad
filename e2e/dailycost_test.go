package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/retry"
)

// What TestDailyCostOfARegisteredCluster watches, and the chart's defaults
// it scales its figures to.
const (
	// costSuspendedFor is how long a registered cluster is watched with
	// its retry CronJob suspended: three looks at one minute.
	costSuspendedFor = 3 * time.Minute
	// costWarmLooks are the looks of the unsuspended retry CronJob let
	// pass before counting, so that its Job history (successfulJobsHistoryLimit
	// 1) is full and every counted look also deletes the look before it, as
	// on a cluster that has run for a while; costLooks are then counted
	// (four looks measured 28–29 requests each, 19 writes, 5 Events: three
	// are enough).
	costWarmLooks = 1
	costLooks     = 3
	// costMainHistory is the main CronJob's successfulJobsHistoryLimit:
	// the scheduled run measured deletes the oldest of as many finished
	// Jobs, as every scheduled run of a cluster installed for two days does.
	costMainHistory = 3
	// costRunsPerDay and costLooksPerDay are the chart's defaults: two
	// scheduled runs a day, a look every retry.intervalMinutes 10.
	costRunsPerDay  = 2
	costLooksPerDay = 24 * 60 / 10
	// realKubeletEvents are the Events a real node records for a pod that
	// starts and exits with its image already present (imagePullPolicy
	// IfNotPresent), which the process kubelet does not record; computed
	// from Kubernetes v1.37.2, not measured: Scheduled
	// (pkg/scheduler/schedule_one.go), Pulled "already present on machine"
	// (pkg/kubelet/images/image_manager.go), Created and Started
	// (pkg/kubelet/kuberuntime/kuberuntime_container.go).
	realKubeletEvents = 4
)

// envUpdateBenchmarks, set to 1, has TestDailyCostOfARegisteredCluster
// write its figures into docs/BENCHMARKS.md, between costSectionStart and
// costSectionEnd.
const envUpdateBenchmarks = "E2E_UPDATE_BENCHMARKS"

// TestDailyCostOfARegisteredCluster: what a registered cluster costs its
// API server, measured from the API server's audit log. helm install with
// retry.intervalMinutes=1 (and a startup sleep of at most 2 s) on a
// healthy cloud; the release's run registers and suspends the retry
// CronJob. Then, each request and Event of a window attributed to what
// caused it by its user and its object:
//
//   - the retry CronJob while registered (suspended), for costSuspendedFor:
//     no request on its objects, no Job, no pod, no Event;
//   - inside that window, one scheduled run of the main CronJob, started by
//     the CronJob controller at its schedule (moved to the next minute) with
//     the Job history full: its requests by every user (the CronJob and Job
//     controllers, the garbage collector, the process kubelet, the engine),
//     writes, Events and pods;
//   - the retry CronJob unsuspended by hand, with a record of a failed run
//     whose next attempt is an hour away, so that every look finds nothing
//     due and keeps it running (as a look did for the life of the install
//     before the engine suspended it): the same for each of costLooks looks.
//
// From them, per registered cluster and day at the chart's defaults (two
// scheduled runs, a look every 10 minutes): now, two scheduled runs and no
// look; before, two scheduled runs and 144 looks. With
// E2E_UPDATE_BENCHMARKS=1 it writes them into docs/BENCHMARKS.md.
func TestDailyCostOfARegisteredCluster(t *testing.T) {
	t.Parallel() // minutes of waiting on the CronJob controller's minute: beside the other planes' tests
	p, e, ctx := aksPlane(t, 20*time.Minute, controlplane.WithAuditLog())
	_, runs, _ := installRegistered(ctx, t, p, e, "startupSleepMax=2s")
	const ns, main, retryName = operator.Namespace, harness.CronJobName, harness.CronJobName + "-retry"
	require.True(t, retrySuspended(ctx, t, e, retryName), "the release's run suspended the retry CronJob")

	// (b) Registered: the retry CronJob suspended for costSuspendedFor.
	// (a) Inside it, one scheduled run with the main CronJob's history full.
	suspendedFrom := time.Now()
	cj, err := e.Admin.BatchV1().CronJobs(ns).Get(ctx, main, metav1.GetOptions{})
	require.NoError(t, err)
	fillHistory(ctx, t, e, cj, costMainHistory)
	runFrom := time.Now() // the schedule's patch is the test's: not counted
	at, scheduledJob := scheduleNextMinute(ctx, t, e, main)
	controlplane.WaitJobFinished(ctx, t, e.Admin, ns, scheduledJob)
	waitHistoryTrimmed(ctx, t, e, cj, costMainHistory)
	time.Sleep(3 * time.Second) // the controllers' last words on it (Events, status)
	runTo := time.Now()
	restoreSchedule(ctx, t, e, cj)
	time.Sleep(time.Until(suspendedFrom.Add(costSuspendedFor)))
	suspendedTo := time.Now()
	require.True(t, retrySuspended(ctx, t, e, retryName), "still suspended after the scheduled run")
	retryJobsSuspended := retryJobsSince(ctx, t, e, suspendedFrom)
	scheduledPods := runs.ForJob(t, scheduledJob)
	require.Len(t, scheduledPods, 1)
	assert.Equal(t, job.OutcomeUnchanged, summary(t, scheduledPods[0].Res.Stderr)["outcome"], "the scheduled run of a registered cluster")
	assert.Equal(t, job.RetriesSuspended, summary(t, scheduledPods[0].Res.Stderr)["retryCronJob"])

	// (c) The retry CronJob unsuspended, every look not due.
	writeNotDueRecord(ctx, t, e)
	setRetrySuspended(ctx, t, e, retryName, false)
	unsuspended := time.Now()
	waitRetryLooks(ctx, t, e, runs, unsuspended, costWarmLooks)
	looksFrom := time.Now().Truncate(time.Minute).Add(30 * time.Second) // between two looks, each at the minute
	if time.Until(looksFrom) < time.Second {
		looksFrom = looksFrom.Add(time.Minute)
	}
	looksTo := looksFrom.Add(costLooks * time.Minute)
	time.Sleep(time.Until(looksTo))
	setRetrySuspended(ctx, t, e, retryName, true)
	var looked []string // the CronJob controller deletes each at the next look: the process kubelet's runs remember them
	var lookPods []harness.PodRun
	for _, pr := range retryPods(t, runs) {
		if at, ok := scheduledAt(pr.Job); ok && at.After(looksFrom) && at.Before(looksTo) {
			lookPods = append(lookPods, pr)
			if !slices.Contains(looked, pr.Job) {
				looked = append(looked, pr.Job)
			}
			assert.Equal(t, job.OutcomeNotDue, summary(t, pr.Res.Stderr)["outcome"], "look %s", pr.Job)
		}
	}

	records, err := p.Audit()
	require.NoError(t, err)
	suspended := costOf(records, suspendedFrom, suspendedTo, isRetryObject(retryName))
	run := costOf(records, runFrom, runTo, nil)
	looks := lookCosts(records, looksFrom, costLooks)
	t.Logf("the scheduled run %s (due %s), in order:\n%s", scheduledJob, at.Format("15:04"), strings.Join(run.seq, "\n"))
	t.Logf("the first counted look, in order:\n%s", strings.Join(looks[0].seq, "\n"))
	for i, c := range append([]cost{run}, looks...) {
		if len(c.uncounted) > 0 {
			t.Logf("window %d (0: the scheduled run, then each look), not counted (others' requests in the namespace): %s", i, strings.Join(c.uncounted, "; "))
		}
	}

	// What a user notices: nothing of the retry CronJob while registered;
	// a look costs what it costs only when it runs.
	assert.Zero(t, suspended.requests, "no request on the retry CronJob's objects while it is suspended: %v", suspended.seq)
	// The same filter charges the retry CronJob's objects once it runs, so
	// the zero above is the CronJob's silence, not a filter that matches
	// nothing.
	assert.Positive(t, costOf(records, looksFrom, looksTo, isRetryObject(retryName)).requests, "the retry CronJob's objects, unsuspended")
	assert.Zero(t, suspended.events, "no Event of the retry CronJob while it is suspended")
	assert.Empty(t, retryJobsSuspended, "no retry Job while registered")
	assert.Equal(t, 1, run.pods, "one pod for the scheduled run")
	assert.Positive(t, run.events, "the scheduled run's Events")
	assert.Len(t, looked, costLooks, "one retry Job a minute while unsuspended")
	assert.Len(t, lookPods, costLooks, "one retry pod a look")
	for i, l := range looks {
		assert.Equal(t, 1, l.pods, "look %d: one pod", i+1)
		assert.Positive(t, l.writes, "look %d: the CronJob, Job and pod machinery writes", i+1)
		assert.Positive(t, l.events, "look %d: Events", i+1)
	}

	f := dailyFigures{
		version: p.Version, run: run, looks: looks, suspended: suspended, suspendedFor: suspendedTo.Sub(suspendedFrom),
		retryJobsSuspended: len(retryJobsSuspended),
	}
	t.Logf("proved: a registered cluster on kube-apiserver %s, from its audit log: the suspended retry CronJob over %s: %d requests, %d Events, %d Jobs; a scheduled run: %d requests (%d writes), %d Events, %d pod; an unsuspended look (median of %d): %d requests (%d writes), %d Events, 1 pod; per day at the defaults %d requests, %d Events, %d pods now against %d, %d and %d with a look every 10 minutes",
		p.Version, f.suspendedFor.Round(time.Second), suspended.requests, suspended.events, len(retryJobsSuspended),
		run.requests, run.writes, run.events, run.pods, len(looks), f.look().requests, f.look().writes, f.look().events,
		f.nowPerDay().requests, f.nowPerDay().events, f.nowPerDay().pods, f.beforePerDay().requests, f.beforePerDay().events, f.beforePerDay().pods)
	if os.Getenv(envUpdateBenchmarks) == "1" {
		require.NoError(t, writeCostSection(filepath.Join("..", "docs", "BENCHMARKS.md"), f.section()))
	}
}

// fillHistory creates n Jobs from the CronJob's template, owned by it as
// the CronJob controller's own are, and waits for each to finish: the
// CronJob's history of finished Jobs, which its next scheduled run trims.
func fillHistory(ctx context.Context, t *testing.T, e *clusterEnv, cj *batchv1.CronJob, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-history-%d", cj.Name, i), Labels: cj.Spec.JobTemplate.Labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))},
			},
			Spec: *cj.Spec.JobTemplate.Spec.DeepCopy(),
		}
		_, err := e.Admin.BatchV1().Jobs(cj.Namespace).Create(ctx, j, metav1.CreateOptions{})
		require.NoError(t, err)
		done := controlplane.WaitJobFinished(ctx, t, e.Admin, cj.Namespace, j.Name)
		require.Equal(t, batchv1.JobComplete, controlplane.FinishedCondition(done).Type, "history Job %s", j.Name)
	}
}

// scheduleNextMinute moves the CronJob's schedule to a minute at least 20 s
// ahead, so that the CronJob controller starts one run as at its schedule,
// and returns that minute and the name the controller gives its Job.
func scheduleNextMinute(ctx context.Context, t *testing.T, e *clusterEnv, name string) (time.Time, string) {
	t.Helper()
	at := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	if time.Until(at) < 20*time.Second {
		at = at.Add(time.Minute)
	}
	patch := fmt.Sprintf(`{"spec":{"schedule":"%d %d * * *"}}`, at.Minute(), at.Hour())
	_, err := e.Admin.BatchV1().CronJobs(operator.Namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	job := name + "-" + strconv.FormatInt(at.Unix()/60, 10) // the CronJob controller's name for it
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Until(at)+time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := e.Admin.BatchV1().Jobs(operator.Namespace).Get(ctx, job, metav1.GetOptions{})
		return err == nil, nil
	})
	require.NoError(t, err, "the CronJob controller did not start %s at %s", job, at.Format("15:04"))
	return at, job
}

// waitHistoryTrimmed waits until the CronJob owns no more than limit
// finished Jobs and no pod of a Job it deleted is left (the garbage
// collector's part).
func waitHistoryTrimmed(ctx context.Context, t *testing.T, e *clusterEnv, cj *batchv1.CronJob, limit int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		jobs, err := e.Admin.BatchV1().Jobs(cj.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		owned := map[string]bool{}
		for _, j := range jobs.Items {
			if o := metav1.GetControllerOf(&j); o != nil && o.UID == cj.UID {
				owned[j.Name] = true
			}
		}
		pods, err := e.Admin.CoreV1().Pods(cj.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if j := p.Labels[batchv1.JobNameLabel]; strings.HasPrefix(j, cj.Name+"-history-") && !owned[j] {
				return false, nil // its Job is gone, the pod not yet
			}
		}
		return len(owned) <= limit, nil
	})
	require.NoError(t, err, "the CronJob controller did not trim %s's history to %d", cj.Name, limit)
}

// restoreSchedule puts back the schedule the chart rendered.
func restoreSchedule(ctx context.Context, t *testing.T, e *clusterEnv, cj *batchv1.CronJob) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"schedule":%q}}`, cj.Spec.Schedule)
	_, err := e.Admin.BatchV1().CronJobs(cj.Namespace).Patch(ctx, cj.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

// writeNotDueRecord puts on the engine's Lease the record of a run that
// failed a minute ago and whose next attempt is an hour away: every look
// of the retry CronJob finds nothing due and keeps it running, as every
// look did before the engine suspended it.
func writeNotDueRecord(ctx context.Context, t *testing.T, e *clusterEnv) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Second)
	since, next := now.Add(-time.Minute), now.Add(time.Hour)
	rec, err := retry.Record{
		Time: now, Outcome: job.OutcomeFailed, ExitCode: job.ExitTransient, Phase: "find-update-server",
		Error: "every update server failed its health check", ConsecutiveFailures: 1, FailingSince: &since,
		Cause: retry.CauseTransient, NextAttempt: &next, Refresh: true, LastSuccess: &since,
	}.Encode()
	require.NoError(t, err)
	leases := e.Admin.CoordinationV1().Leases(operator.Namespace)
	le, err := leases.Get(ctx, kube.LeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	le.Annotations[kube.AnnotationLastRun] = rec
	_, err = leases.Update(ctx, le, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// setRetrySuspended sets the retry CronJob's spec.suspend by hand.
func setRetrySuspended(ctx context.Context, t *testing.T, e *clusterEnv, name string, suspend bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"suspend":%t}}`, suspend)
	_, err := e.Admin.BatchV1().CronJobs(operator.Namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

// waitRetryLooks waits until the process kubelet has run the pods of n
// looks of the retry CronJob scheduled after since, and the CronJob keeps
// no more than its history of one (the controller deletes the look before
// once the next has finished).
func waitRetryLooks(ctx context.Context, t *testing.T, e *clusterEnv, runs *harness.PodRuns, since time.Time, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Duration(n+1)*time.Minute+30*time.Second, true, func(ctx context.Context) (bool, error) {
		ran := 0
		for _, pr := range retryPods(t, runs) {
			if at, ok := scheduledAt(pr.Job); ok && at.After(since) {
				ran++
			}
		}
		jobs, err := e.Admin.BatchV1().Jobs(operator.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		kept := 0
		for _, j := range jobs.Items {
			if o := metav1.GetControllerOf(&j); o != nil && o.Name == harness.CronJobName+"-retry" {
				kept++
			}
		}
		return ran >= n && kept == 1, nil
	})
	require.NoError(t, err, "%d looks of the retry CronJob did not pass", n)
}

// scheduledAt is the minute the CronJob controller scheduled a Job for,
// which it names <cronjob>-<minutes since the epoch>.
func scheduledAt(jobName string) (time.Time, bool) {
	i := strings.LastIndexByte(jobName, '-')
	m, err := strconv.ParseInt(jobName[i+1:], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(m*60, 0), true
}

// cost is what a window of the audit log holds for one cause: its
// requests, the writes among them, the Events created and the pods.
type cost struct {
	requests, writes, events, pods int
	// byActor counts the requests by who made them (actorOf).
	byActor map[string]int
	// seq is every counted request, in order; uncounted those of others
	// in the release's namespace, for a reader to judge.
	seq, uncounted []string
}

// actorOf names who made a request, as the figures count it, or "" for a
// request that no run causes: the test's own and helm's, another
// controller's.
func actorOf(r controlplane.AuditRecord) string {
	const kcm = "system:serviceaccount:kube-system:"
	switch {
	case r.User == "admin" && r.UserAgent == controlplane.KubeletUserAgent:
		return "the process kubelet"
	case r.User == kcm+"cronjob-controller":
		return "CronJob controller"
	case r.User == kcm+"job-controller":
		return "Job controller"
	case r.User == kcm+"generic-garbage-collector":
		return "garbage collector"
	case strings.HasPrefix(r.User, "system:serviceaccount:"+operator.Namespace+":"):
		return "the engine"
	case r.User == "system:apiserver" && r.Namespace == operator.Namespace:
		// Its admission of a pod (LimitRanger lists the namespace's
		// LimitRanges when its cache of them has expired).
		return "the API server"
	}
	return ""
}

// background reports whether a request of actor is made whether or not
// anything runs, so that no run is charged with it: a controller's or the
// process kubelet's standing list or watch of a collection, and a
// controller's discovery of the API (the garbage collector's every 30 s).
// The engine's discovery of the Registration CRD is its run's, and the API
// server's list in the namespace is its admission of a pod.
func background(r controlplane.AuditRecord, actor string) bool {
	switch actor {
	case "the engine", "the API server":
		return false
	}
	return r.Name == "" && (r.Verb == "list" || r.Verb == "watch") || r.Resource == ""
}

// isRetryObject matches the retry CronJob's objects: the CronJob, its Jobs
// and their pods (named after it), and their Events (named after the
// object they regard).
func isRetryObject(name string) func(controlplane.AuditRecord) bool {
	return func(r controlplane.AuditRecord) bool {
		return r.Name == name || strings.HasPrefix(r.Name, name+"-") || strings.HasPrefix(r.Name, name+".")
	}
}

// costOf counts the requests of records received in [from, to) that a run
// causes (actorOf, not background), and of them only those that match, when
// match is set and they are not the engine's own.
func costOf(records []controlplane.AuditRecord, from, to time.Time, match func(controlplane.AuditRecord) bool) cost {
	c := cost{byActor: map[string]int{}}
	for _, r := range records {
		if r.Time.Before(from) || !r.Time.Before(to) {
			continue
		}
		actor := actorOf(r)
		switch {
		case actor == "" || background(r, actor):
			if actor == "" && r.Namespace == operator.Namespace && !strings.HasPrefix(r.User, "admin") {
				c.uncounted = append(c.uncounted, r.String())
			}
			continue
		case match != nil && (actor == "the engine" || !match(r)):
			continue
		}
		c.requests++
		c.byActor[actor]++
		if r.Write() {
			c.writes++
		}
		if r.EventCreate() {
			c.events++
		}
		if r.Verb == "create" && r.Resource == "pods" && r.Subresource == "" {
			c.pods++
		}
		c.seq = append(c.seq, r.String()+" ("+actor+")")
	}
	return c
}

// lookCosts is the cost of each of n looks of a CronJob that looks every
// minute, at the minute, from the window [from, from + n min), from being
// half a minute after a look.
func lookCosts(records []controlplane.AuditRecord, from time.Time, n int) []cost {
	out := make([]cost, n)
	for i := range out {
		out[i] = costOf(records, from.Add(time.Duration(i)*time.Minute), from.Add(time.Duration(i+1)*time.Minute), nil)
	}
	return out
}

// dailyFigures are the test's measurements, and what they make per day.
type dailyFigures struct {
	version            string
	run                cost
	looks              []cost
	suspended          cost
	suspendedFor       time.Duration
	retryJobsSuspended int
}

// look is the median look (each figure's median over the looks).
func (f dailyFigures) look() cost {
	med := func(get func(cost) int) int {
		v := make([]int, len(f.looks))
		for i, l := range f.looks {
			v[i] = get(l)
		}
		sort.Ints(v)
		return v[len(v)/2]
	}
	return cost{
		requests: med(func(c cost) int { return c.requests }), writes: med(func(c cost) int { return c.writes }),
		events: med(func(c cost) int { return c.events }), pods: med(func(c cost) int { return c.pods }),
	}
}

// lookRange is the least and the most of one figure over the looks.
func (f dailyFigures) lookRange(get func(cost) int) string {
	lo, hi := get(f.looks[0]), get(f.looks[0])
	for _, l := range f.looks[1:] {
		lo, hi = min(lo, get(l)), max(hi, get(l))
	}
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}

// nowPerDay is two scheduled runs a day and no look; beforePerDay adds a
// look every 10 minutes.
func (f dailyFigures) nowPerDay() cost {
	return cost{requests: costRunsPerDay * f.run.requests, writes: costRunsPerDay * f.run.writes,
		events: costRunsPerDay * f.run.events, pods: costRunsPerDay * f.run.pods}
}

func (f dailyFigures) beforePerDay() cost {
	n, l := f.nowPerDay(), f.look()
	return cost{requests: n.requests + costLooksPerDay*l.requests, writes: n.writes + costLooksPerDay*l.writes,
		events: n.events + costLooksPerDay*l.events, pods: n.pods + costLooksPerDay*l.pods}
}

// Markers of the section this test owns in docs/BENCHMARKS.md.
const (
	costSectionStart = "<!-- dailycost: written by E2E_UPDATE_BENCHMARKS=1 go test -run '^TestDailyCostOfARegisteredCluster$' ./e2e -->"
	costSectionEnd   = "<!-- /dailycost -->"
)

// section is the figures as docs/BENCHMARKS.md shows them.
func (f dailyFigures) section() string {
	var b strings.Builder
	l, now, before := f.look(), f.nowPerDay(), f.beforePerDay()
	actors := []string{"CronJob controller", "Job controller", "garbage collector", "the API server", "the process kubelet", "the engine"}
	fmt.Fprintf(&b, `%s
## What a registered cluster costs its API server per day

Measured on a real control plane (kube-apiserver, kube-controller-manager and etcd %s, e2e/controlplane) from the API
server's audit log (level Metadata for every request), by `+"`"+`TestDailyCostOfARegisteredCluster`+"`"+` in e2e/dailycost_test.go:
the chart installed with `+"`"+`retry.intervalMinutes=1`+"`"+`, registered by the release's own run. Every request of a window is
charged to what caused it by its user and its object: the CronJob and Job controllers, the garbage collector, the
API server's own requests in the release's namespace (its admission of a pod), the process kubelet and the engine's
ServiceAccount; the test's own requests, helm's, other controllers', every controller's standing list and watch and
its discovery of the API (made whether anything runs or not) are not charged. An Event is one created (a repeat of an
Event is a patch of it, counted as a request). "Writes" are requests that ask to change something (create, update,
patch, delete), whether or not they did.

| | requests | writes | Events | pods |
|---|---|---|---|---|
| the retry CronJob while the cluster is registered (suspended), over %s | %d | %d | %d | %d (%d Jobs) |
| one scheduled run (the main CronJob, its history full) | %d | %d | %d | %d |
| one look of the retry CronJob, unsuspended, finding nothing due (median of %d looks; least–most) | %d (%s) | %d (%s) | %d (%s) | %d |

By who made them:

| | %s |
|---|%s
| one scheduled run | %s |
| one look (the first counted) | %s |

The scheduled run is started by the CronJob controller at its schedule (moved to the next minute), after %d finished
Jobs of the CronJob, so that it also deletes the oldest, as every scheduled run of a cluster installed for two days
does (successfulJobsHistoryLimit 3). A look is measured with the retry CronJob unsuspended by hand and the Lease's
record a failed run whose next attempt is an hour away: each look finds nothing due, keeps the CronJob running (one
patch of spec.suspend that changes nothing: one engine request more than a look made before the engine switched it)
and, its history (1) full, deletes the look before it. A look every 10 minutes costs what a look every minute
costs: the history limit, not the Job's hour of ttlSecondsAfterFinished, removes each Job at the next look either way.

**Per registered cluster and day, at the chart's defaults** (two scheduled runs; a look every 10 minutes, 144 a day):

| | requests | writes | Events | pods |
|---|---|---|---|---|
| now: %d scheduled runs, no look (measured × %d) | %d | %d | %d | %d |
| before the engine suspended its retry CronJob: %d scheduled runs and %d looks (measured × count) | %d | %d | %d | %d |

Of the requests and writes before, %d are the patch of spec.suspend a look makes now and made not then (one a look).

The process kubelet is not a real kubelet: it runs each pod as a process, and its requests (%d for the first counted
look: the Secret the pod's environment names, the pod's token, two reads and two writes of the pod's status) stand in
for a node's, whose own (the kube-scheduler's binding, the kubelet's status writes and its watch of that Secret)
differ and were not measured; it records no Event. A real node adds, per pod that starts and exits with its image
present (imagePullPolicy IfNotPresent), %d Events: Scheduled (kube-scheduler, pkg/scheduler/schedule_one.go), Pulled "already
present on machine" (pkg/kubelet/images/image_manager.go), Created and Started
(pkg/kubelet/kuberuntime/kuberuntime_container.go), Kubernetes v1.37.2; Pulling and a second Pulled when it pulls
the image. Computed from those, not measured: %d Events a day more now (%d pods), %d more before (%d pods).
%s
`, costSectionStart, f.version,
		f.suspendedFor.Round(time.Second), f.suspended.requests, f.suspended.writes, f.suspended.events, f.suspended.pods, f.retryJobsSuspended,
		f.run.requests, f.run.writes, f.run.events, f.run.pods,
		len(f.looks), l.requests, f.lookRange(func(c cost) int { return c.requests }), l.writes, f.lookRange(func(c cost) int { return c.writes }),
		l.events, f.lookRange(func(c cost) int { return c.events }), l.pods,
		strings.Join(actors, " | "), strings.Repeat("---|", len(actors)), actorCounts(f.run, actors), actorCounts(f.looks[0], actors),
		costMainHistory,
		costRunsPerDay, costRunsPerDay, now.requests, now.writes, now.events, now.pods,
		costRunsPerDay, costLooksPerDay, before.requests, before.writes, before.events, before.pods, costLooksPerDay,
		f.looks[0].byActor["the process kubelet"],
		realKubeletEvents, realKubeletEvents*now.pods, now.pods, realKubeletEvents*before.pods, before.pods,
		costSectionEnd)
	return b.String()
}

func actorCounts(c cost, actors []string) string {
	out := make([]string, len(actors))
	for i, a := range actors {
		out[i] = strconv.Itoa(c.byActor[a])
	}
	return strings.Join(out, " | ")
}

// writeCostSection puts sec into the file at path, replacing the section
// between its markers, or adding it before "## Machine".
func writeCostSection(path, sec string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(b)
	sec = strings.TrimSuffix(sec, "\n")
	if i := strings.Index(doc, costSectionStart); i >= 0 {
		j := strings.Index(doc, costSectionEnd)
		if j < i {
			return fmt.Errorf("%s: %q without its end marker", path, costSectionStart)
		}
		doc = doc[:i] + sec + doc[j+len(costSectionEnd):]
	} else if i := strings.Index(doc, "## Machine"); i >= 0 {
		doc = doc[:i] + sec + "\n\n" + doc[i:]
	} else {
		doc += "\n" + sec + "\n"
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

// TestCostOfChargesWhatARunCauses: the attribution of
// TestDailyCostOfARegisteredCluster charges a window with the requests of
// the controllers, the API server's admission, the process kubelet and the
// engine, and never with the test's own, helm's, a standing watch or a
// discovery of the API; with a match, only what touches the matched
// objects, and never the engine's own switch of the retry CronJob.
func TestCostOfChargesWhatARunCauses(t *testing.T) {
	const kcm = "system:serviceaccount:kube-system:"
	ns, engine := operator.Namespace, "system:serviceaccount:"+operator.Namespace+":registration-engine"
	at := time.Date(2026, 12, 7, 15, 0, 0, 0, time.UTC)
	rec := func(s int, user, ua, verb, resource, name string) controlplane.AuditRecord {
		return controlplane.AuditRecord{Time: at.Add(time.Duration(s) * time.Second), User: user, UserAgent: ua, Verb: verb, Resource: resource, Namespace: ns, Name: name}
	}
	records := []controlplane.AuditRecord{
		rec(1, kcm+"cronjob-controller", "", "create", "jobs", "r-retry-1"),
		rec(2, kcm+"job-controller", "", "create", "pods", ""),
		rec(3, kcm+"job-controller", "", "create", "events", "r-retry-1.abc"),
		rec(4, "admin", controlplane.KubeletUserAgent, "update", "pods", "r-retry-1-x"),
		rec(5, engine, "", "get", "leases", "registration-engine"),
		rec(6, engine, "", "patch", "cronjobs", "r-retry"),
		rec(7, kcm+"generic-garbage-collector", "", "delete", "pods", "r-retry-0-y"),
		rec(8, "system:apiserver", "", "list", "limitranges", ""),
		// Not charged: the test's, helm's, a standing watch, discovery.
		rec(9, "admin", "e2e.test", "get", "cronjobs", "r-retry"),
		rec(10, "admin", "Helm/3.22.0", "get", "secrets", "sh.helm.release.v1"),
		rec(11, kcm+"job-controller", "", "watch", "pods", ""),
		rec(12, kcm+"generic-garbage-collector", "", "get", "", ""),
		// Outside the window.
		rec(60, kcm+"cronjob-controller", "", "create", "jobs", "r-retry-2"),
	}
	tests := map[string]struct {
		match                                func(controlplane.AuditRecord) bool
		wantRequests, wantWrites, wantEvents int
		wantPods                             int
	}{
		"everything a run causes":                                  {nil, 8, 6, 1, 1},
		"the retry CronJob's objects, without the engine's switch": {isRetryObject("r-retry"), 4, 4, 1, 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := costOf(records, at, at.Add(time.Minute), tc.match)
			assert.Equal(t, tc.wantRequests, c.requests, "requests: %v", c.seq)
			assert.Equal(t, tc.wantWrites, c.writes, "writes")
			assert.Equal(t, tc.wantEvents, c.events, "Events")
			assert.Equal(t, tc.wantPods, c.pods, "pods")
		})
	}
}

// TestWriteCostSection: the figures replace their own section of
// docs/BENCHMARKS.md and nothing else, or go before "## Machine" the
// first time.
func TestWriteCostSection(t *testing.T) {
	sec := costSectionStart + "\n## new\n" + costSectionEnd + "\n"
	tests := map[string]struct{ doc, want string }{
		"replaced between its markers": {
			doc:  "# B\n\n" + costSectionStart + "\n## old\n" + costSectionEnd + "\n\n## Machine\n",
			want: "# B\n\n" + costSectionStart + "\n## new\n" + costSectionEnd + "\n\n## Machine\n",
		},
		"added before the machine": {
			doc:  "# B\n\n<!-- /fleetsim -->\n\n## Machine\n",
			want: "# B\n\n<!-- /fleetsim -->\n\n" + costSectionStart + "\n## new\n" + costSectionEnd + "\n\n## Machine\n",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
			require.NoError(t, os.WriteFile(path, []byte(tc.doc), 0o600))
			require.NoError(t, writeCostSection(path, sec))
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
}
