package job

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/retry"
)

// retryWorld is one cluster's Lease on a fake API server and a clock the
// test moves: runs are assembled as New assembles them (the Lease locks,
// records and is read by the retry CronJob's runs).
type retryWorld struct {
	t     *testing.T
	c     *fake.Clientset
	lease *kube.Lease
	now   time.Time
	// scheduled: the runs are the schedule's (Job.Scheduled).
	scheduled bool
}

func newRetryWorld(t *testing.T) *retryWorld {
	now := time.Date(2026, 12, 4, 14, 0, 0, 0, time.UTC)
	// The Lease as the install's first run leaves it, created by the API
	// server at that run.
	c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: kube.LeaseName, Namespace: operator.Namespace, CreationTimestamp: metav1.NewTime(now)}},
		&batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: retryCronJob, Namespace: operator.Namespace}})
	w := &retryWorld{t: t, c: c, now: now}
	w.lease = &kube.Lease{Leases: kubetest.Typed(c), Namespace: operator.Namespace, Name: kube.LeaseName, Holder: "pod-1", Duration: time.Minute}
	return w
}

// run is one run at the world's time; onlyWhenDue makes it the retry
// CronJob's.
func (w *retryWorld) run(r *recorder, onlyWhenDue bool) (Result, *operatorFake, error) {
	op := &operatorFake{}
	j := newJob(r, &bytes.Buffer{})
	j.Lock, j.Runs, j.LastRun, j.JobName = w.lease, w.lease, w.lease, "registration-engine-run-abc"
	j.Operator, j.Events = op.step(), op
	j.OnlyWhenDue, j.Scheduled = onlyWhenDue, w.scheduled && !onlyWhenDue
	j.Retries = &kube.RetryCronJob{CronJobs: kubetest.Typed(w.c), Namespace: operator.Namespace, Name: retryCronJob}
	j.Now = func() time.Time { return w.now }
	w.lease.Clock = clocktesting.NewFakePassiveClock(w.now)
	j.RandDuration = func(n time.Duration) time.Duration { return n - 1 } // the longest gap
	res, err := j.Run(context.Background())
	return res, op, err
}

// write sets the record on the Lease to raw, as anything holding the
// engine's token (or update on the Lease) may.
func (w *retryWorld) write(raw string) {
	leases := w.c.CoordinationV1().Leases(operator.Namespace)
	le, err := leases.Get(context.Background(), kube.LeaseName, metav1.GetOptions{})
	require.NoError(w.t, err)
	if le.Annotations == nil {
		le.Annotations = map[string]string{}
	}
	le.Annotations[kube.AnnotationLastRun] = raw
	_, err = leases.Update(context.Background(), le, metav1.UpdateOptions{})
	require.NoError(w.t, err)
}

// forge rewrites the record's failingSince to at, keeping the rest.
func (w *retryWorld) forge(at time.Time) {
	le, err := w.c.CoordinationV1().Leases(operator.Namespace).Get(context.Background(), kube.LeaseName, metav1.GetOptions{})
	require.NoError(w.t, err)
	var rec map[string]any
	require.NoError(w.t, json.Unmarshal([]byte(le.Annotations[kube.AnnotationLastRun]), &rec))
	rec["failingSince"] = at.Format(time.RFC3339)
	b, err := json.Marshal(rec)
	require.NoError(w.t, err)
	w.write(string(b))
}

// retryCronJob is the chart's retry CronJob, which the runs switch.
const retryCronJob = "registration-engine-retry"

// suspended reports the retry CronJob's spec.suspend.
func (w *retryWorld) suspended() bool {
	cj, err := w.c.BatchV1().CronJobs(operator.Namespace).Get(context.Background(), retryCronJob, metav1.GetOptions{})
	require.NoError(w.t, err)
	return cj.Spec.Suspend != nil && *cj.Spec.Suspend
}

func (w *retryWorld) record() retry.Record {
	w.lease.Clock = clocktesting.NewFakePassiveClock(w.now)
	stored, ok, err := w.lease.LastRun(context.Background())
	require.NoError(w.t, err)
	require.True(w.t, ok)
	rec, ok := retry.Read(stored.Record, w.now)
	require.True(w.t, ok)
	return rec
}

// settlingARM is what providers/azure returns for ARM's 403 right after
// an install.
var settlingARM = failure.Settling(errors.New("azure arm: cannot read from ARM: the identity may not read the extension: give it a role assignment …: 403 AuthorizationFailed"))

// TestFirstContactWaitsForAzure: ARM's 403 on a cluster that never
// registered is Azure propagating the role: retried, a WaitingForAzure
// Event, the attempt and the next time on the record; once the window has
// passed, the same 403 is permanent with the same message.
func TestFirstContactWaitsForAzure(t *testing.T) {
	w := newRetryWorld(t)
	res, op, err := w.run(&recorder{failAt: "prove", failWith: settlingARM}, false)
	require.Error(t, err)
	assert.Equal(t, ExitTransient, ExitCode(err), "not a verdict yet")
	assert.Equal(t, OutcomeFailed, res.Outcome)
	rec := w.record()
	assert.Equal(t, retry.CauseSettling, rec.Cause)
	assert.Equal(t, 1, rec.ConsecutiveFailures)
	require.NotNil(t, rec.NextAttempt)
	assert.Equal(t, w.now, *rec.NextAttempt, "the first retry is due at the retry CronJob's next look")
	require.Len(t, op.events, 1)
	assert.Equal(t, kube.ReasonWaiting, op.events[0].Reason)
	assert.False(t, op.events[0].Warning)
	assert.Contains(t, op.events[0].Note, "waiting for Azure to propagate the identity or its role assignment: attempt 2 is due by 2026-12-04 14:00 UTC; it needs a person if it still fails after 2026-12-04 15:00 UTC: phase prove failed")

	// 50 minutes on, still settling: attempt 2, and a gap.
	w.now = w.now.Add(50 * time.Minute)
	_, _, err = w.run(&recorder{failAt: "prove", failWith: settlingARM}, false)
	assert.Equal(t, ExitTransient, ExitCode(err))
	rec = w.record()
	assert.Equal(t, 2, rec.ConsecutiveFailures)
	assert.Equal(t, w.now.Add(50*time.Minute/4-10*time.Minute), *rec.NextAttempt, "elapsed/4 − the retry interval")

	// An hour after the first failure the window has closed.
	w.now = w.now.Add(10 * time.Minute)
	_, op, err = w.run(&recorder{failAt: "prove", failWith: settlingARM}, false)
	assert.Equal(t, ExitPermanent, ExitCode(err))
	assert.ErrorContains(t, err, "403 AuthorizationFailed (Azure has had 1h0m0s since the first failure at 2026-12-04 14:00 UTC to propagate it, more than PROPAGATION_WINDOW 1h0m0s: it needs a person)")
	rec = w.record()
	assert.Equal(t, retry.CausePermanent, rec.Cause)
	assert.Nil(t, rec.NextAttempt, "a permanent failure schedules no retry")
	assert.Equal(t, kube.ReasonFailed, op.events[0].Reason)
}

// TestSettlingAfterASuccessIsPermanent: a cluster that registered before
// has no identity propagating: a 403 now is a removed role, at once.
func TestSettlingAfterASuccessIsPermanent(t *testing.T) {
	w := newRetryWorld(t)
	_, _, err := w.run(&recorder{changed: true}, false)
	require.NoError(t, err)
	w.now = w.now.Add(18 * time.Hour)
	_, _, err = w.run(&recorder{failAt: "prove", failWith: settlingARM}, false)
	assert.Equal(t, ExitPermanent, ExitCode(err))
	assert.ErrorContains(t, err, "(this cluster registered at 2026-12-04 14:00 UTC: no new identity is propagating, it needs a person)")
}

// TestSettlingWithoutALeaseIsPermanent: a dry run has nothing to remember
// a first contact by: as before, permanent.
func TestSettlingWithoutALeaseIsPermanent(t *testing.T) {
	r := &recorder{failAt: "prove", failWith: settlingARM}
	j := newJob(r, &bytes.Buffer{})
	j.Lock = nil
	_, err := j.Run(context.Background())
	assert.Equal(t, ExitPermanent, ExitCode(err))
}

// TestTransientFailureSchedulesARetry: a region server down is retried;
// the Event says when, and the retry CronJob's run waits for that time.
func TestTransientFailureSchedulesARetry(t *testing.T) {
	w := newRetryWorld(t)
	down := errors.New("no region server answered")
	_, op, err := w.run(&recorder{failAt: "find", failWith: down}, false)
	assert.Equal(t, ExitTransient, ExitCode(err))
	require.Len(t, op.events, 1)
	assert.Equal(t, kube.ReasonFailed, op.events[0].Reason)
	assert.Contains(t, op.events[0].Note, "retrying: attempt 2 is due by 2026-12-04 14:00 UTC (cause transient): phase find-update-server failed")

	// Two hours of failures later the next attempt is half an hour away:
	// the retry CronJob's run at 16:10 does nothing, the one at 16:20 runs.
	w.now = w.now.Add(2 * time.Hour)
	_, _, err = w.run(&recorder{failAt: "find", failWith: down}, false)
	require.Error(t, err)
	assert.Equal(t, time.Date(2026, 12, 4, 16, 20, 0, 0, time.UTC), *w.record().NextAttempt)

	w.now = w.now.Add(10 * time.Minute)
	r := &recorder{changed: true}
	res, op, err := w.run(r, true)
	require.NoError(t, err)
	assert.Equal(t, OutcomeNotDue, res.Outcome)
	assert.Equal(t, "attempt 3 is due at 2026-12-04 16:20 UTC", res.Skipped)
	assert.Empty(t, r.calls, "not even the Lease is taken")
	assert.Empty(t, op.events, "no Event every tick")
	assert.Equal(t, 2, w.record().ConsecutiveFailures, "no record either")

	w.now = w.now.Add(10 * time.Minute)
	res, _, err = w.run(r, true)
	require.NoError(t, err)
	assert.Equal(t, OutcomeRegistered, res.Outcome)
	rec := w.record()
	assert.Zero(t, rec.ConsecutiveFailures)
	assert.Nil(t, rec.NextAttempt)
	assert.Empty(t, rec.Cause)
}

// TestRefreshIsRetriedLessOften: a registered cluster whose scheduled
// refresh fails waits at least an hour between attempts (it stays
// registered), and says so.
func TestRefreshIsRetriedLessOften(t *testing.T) {
	w := newRetryWorld(t)
	_, _, err := w.run(&recorder{changed: true}, false)
	require.NoError(t, err)
	w.now = w.now.Add(18 * time.Hour)
	op := &operatorFake{}
	j := newJob(&recorder{failAt: "find", failWith: errors.New("no region server answered")}, &bytes.Buffer{})
	j.Lock, j.Runs, j.LastRun, j.JobName = w.lease, w.lease, w.lease, "registration-engine-29990000"
	j.Operator, j.Events, j.Scheduled = op.step(), op, true
	j.Now = func() time.Time { return w.now }
	w.lease.Clock = clocktesting.NewFakePassiveClock(w.now)
	j.RandDuration = func(n time.Duration) time.Duration { return n - 1 }
	_, err = j.Run(context.Background())
	assert.Equal(t, ExitTransient, ExitCode(err))
	rec := w.record()
	assert.True(t, rec.Refresh)
	assert.Equal(t, w.now.Add(50*time.Minute), *rec.NextAttempt, "an hour less the retry interval")
	assert.Contains(t, op.events[0].Note, "retrying the refresh: attempt 2 is due by 2026-12-05 08:50 UTC (cause transient; the registration stays as it is meanwhile)")
	assert.Contains(t, op.events[0].Note, rec.Retrying(), "the Event and the record (status) say the same")

	// Its retry carries the streak on as a refresh.
	w.now = w.now.Add(50 * time.Minute)
	_, _, err = w.run(&recorder{failAt: "find", failWith: errors.New("no region server answered")}, true)
	require.Error(t, err)
	rec = w.record()
	assert.True(t, rec.Refresh)
	assert.Equal(t, 2, rec.ConsecutiveFailures)
}

// TestScheduledRunDefersToAPendingRefresh: a registered cluster's refresh
// is failing and its next attempt is pending; the schedule's next run
// comes before it. That run sends nothing, records nothing, leaves the
// retry CronJob awake and the Lease free (retry.Defers): the fleet's
// scheduled runs do not add to its attempts through an outage. Once the
// attempt is due, a scheduled run runs as before.
func TestScheduledRunDefersToAPendingRefresh(t *testing.T) {
	w := newRetryWorld(t)
	_, _, err := w.run(&recorder{changed: true}, false)
	require.NoError(t, err)
	w.now = w.now.Add(18 * time.Hour)
	w.scheduled = true
	_, _, err = w.run(&recorder{failAt: "find", failWith: errors.New("no region server answered")}, false)
	require.Error(t, err)
	failed := w.record()
	require.True(t, failed.Refresh)
	require.NotNil(t, failed.NextAttempt)
	require.False(t, w.suspended(), "the failed refresh woke the retries")

	w.now = failed.NextAttempt.Add(-time.Minute)
	r := &recorder{}
	res, _, err := w.run(r, false)
	require.NoError(t, err, "a deferring run exits 0")
	assert.Equal(t, OutcomeNotDue, res.Outcome)
	assert.Contains(t, res.Skipped, "defers to it")
	assert.Empty(t, r.calls, "no phase ran: no request to Azure or SUSE")
	assert.Equal(t, failed, w.record(), "the record is left as it was")
	assert.False(t, w.suspended(), "the retries stay awake for the pending attempt")
	le, err := w.c.CoordinationV1().Leases(operator.Namespace).Get(context.Background(), kube.LeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, le.Spec.HolderIdentity, "the Lease is given back")

	w.now = failed.NextAttempt.Add(time.Minute)
	r = &recorder{changed: true}
	res, _, err = w.run(r, false)
	require.NoError(t, err)
	assert.Equal(t, OutcomeRegistered, res.Outcome, "once the attempt is due, the scheduled run runs")
	assert.True(t, w.suspended())
}

// TestRetryCronJobRunsOnlyWhenDue: every other state of the record is
// left to the schedule, with the reason in the log.
func TestRetryCronJobRunsOnlyWhenDue(t *testing.T) {
	tests := map[string]struct {
		before func(w *retryWorld)
		reason string
	}{
		"no run yet": {reason: "no run recorded yet: the release's own run and the schedule start the first"},
		"the last run registered": {
			before: func(w *retryWorld) { _, _, _ = w.run(&recorder{changed: true}, false) },
			reason: "the last run (registered) succeeded at 2026-12-04 14:00 UTC: the schedule runs the next",
		},
		"the last run failed for good": {
			before: func(w *retryWorld) {
				_, _, _ = w.run(&recorder{failAt: "prove", failWith: failure.Permanent(errors.New("marketplace plan mismatch"))}, false)
			},
			reason: "the last run failed at 2026-12-04 14:00 UTC and another attempt cannot succeed (cause permanent): it needs a person, and the schedule runs the next",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newRetryWorld(t)
			if tc.before != nil {
				tc.before(w)
			}
			r := &recorder{changed: true}
			res, _, err := w.run(r, true)
			require.NoError(t, err)
			assert.Equal(t, OutcomeNotDue, res.Outcome)
			assert.Equal(t, tc.reason, res.Skipped)
			assert.Empty(t, r.calls)
		})
	}
}

// TestForgedFailingSinceStillReachesAVerdict: a failingSince a year ahead,
// written before every look of the retry CronJob for three days, neither
// keeps ARM's 403 of a role never assigned "waiting for Azure" nor stops
// its attempts: the verdict is permanent an hour (PROPAGATION_WINDOW) after
// the engine's first run, as unforged, after as many attempts, and nothing
// runs after it.
func TestForgedFailingSinceStillReachesAVerdict(t *testing.T) {
	for _, forged := range []bool{false, true} {
		w := newRetryWorld(t)
		start := w.now
		_, _, err := w.run(&recorder{failAt: "prove", failWith: settlingARM}, false) // the install's run
		require.Error(t, err)
		attempts := 1
		var verdict time.Time
		for look := 1; look <= 3*24*6; look++ {
			if forged {
				w.forge(start.Add(365 * 24 * time.Hour))
			}
			w.now = start.Add(time.Duration(look) * 10 * time.Minute)
			r := &recorder{failAt: "prove", failWith: settlingARM}
			_, _, err := w.run(r, true)
			if len(r.calls) > 0 {
				attempts++
			}
			if ExitCode(err) == ExitPermanent && verdict.IsZero() {
				verdict = w.now
				assert.ErrorContains(t, err, "more than PROPAGATION_WINDOW 1h0m0s: it needs a person")
			}
		}
		assert.Equal(t, start.Add(time.Hour), verdict, "forged %v: permanent on time", forged)
		assert.Equal(t, 7, attempts, "forged %v: the install's run and 6 retries, then nothing for three days", forged)
		t.Logf("forged failingSince %v: %d attempts in 3 days, permanent at %s", forged, attempts, verdict.Sub(start))
	}
}

// TestUnreadableRecordIsAFailureDueNow: a record that does not parse is no
// "no run yet": the retry CronJob's next look runs an attempt, and the
// first-contact window stays closed by the Lease's creation, which the
// record cannot move.
func TestUnreadableRecordIsAFailureDueNow(t *testing.T) {
	w := newRetryWorld(t)
	_, _, err := w.run(&recorder{changed: true}, false)
	require.NoError(t, err)
	w.now = w.now.Add(2 * time.Hour)
	w.write("{not json")

	down := errors.New("no region server answered")
	r := &recorder{failAt: "find", failWith: down}
	_, op, err := w.run(r, true)
	assert.NotEmpty(t, r.calls, "due at the look: an attempt ran")
	assert.Equal(t, ExitTransient, ExitCode(err))
	rec := w.record()
	assert.Empty(t, rec.Doubt, "the run wrote a true record")
	assert.Equal(t, 2, rec.ConsecutiveFailures, "the unreadable record counts as a failure, and this run's")
	assert.Equal(t, w.now, rec.FailingSince.UTC())
	require.Len(t, op.events, 1)

	// A settling failure over garbage two hours after the first run: the
	// window (1 h from the Lease's creation) is closed.
	w.now = w.now.Add(10 * time.Minute)
	w.write("{not json")
	_, _, err = w.run(&recorder{failAt: "prove", failWith: settlingARM}, false)
	assert.Equal(t, ExitPermanent, ExitCode(err))
	assert.ErrorContains(t, err, "since the engine's first run (its Lease's creation) at 2026-12-04 14:00 UTC")
}

// TestLookThatCannotReadRecordsNothing: a look of the retry CronJob whose
// read of the Lease fails (the API server's 500, or a Role without get)
// records nothing and plans nothing: no Event, no failing record, no run,
// exit 0; the next look reads again.
func TestLookThatCannotReadRecordsNothing(t *testing.T) {
	tests := map[string]error{
		"500":       apierrors.NewInternalError(errors.New("etcdserver: request timed out")),
		"forbidden": apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, kube.LeaseName, errors.New("no get")),
	}
	for name, apiErr := range tests {
		t.Run(name, func(t *testing.T) {
			w := newRetryWorld(t)
			_, _, err := w.run(&recorder{changed: true}, false)
			require.NoError(t, err)
			before := w.record()
			w.now = w.now.Add(10 * time.Minute)
			w.c.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, apiErr })
			w.c.ClearActions()

			r := &recorder{changed: true}
			res, op, err := w.run(r, true)
			require.NoError(t, err)
			assert.Equal(t, ExitOK, ExitCode(err))
			assert.Equal(t, OutcomeUnread, res.Outcome)
			assert.Contains(t, res.Skipped, "could not read the run record")
			assert.Empty(t, r.calls, "no attempt")
			assert.Empty(t, op.events, "no Event")
			assert.Equal(t, []string{"get"}, kubetest.Verbs(w.c, "leases"), "nothing written to the Lease")

			w.c.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) { return false, nil, nil })
			w.c.ReactionChain = w.c.ReactionChain[2:]
			assert.Equal(t, before, w.record(), "the record is as the last run left it")
		})
	}
}

// TestRetryCronJobSleepsWhileNothingIsScheduled: the retry CronJob runs only
// while an attempt is scheduled. A run that registers suspends it; a run
// that fails and may succeed another time resumes it, so that its next look
// (within one interval) runs the attempt; a permanent failure suspends it
// again; a look that finds an attempt pending keeps it running, one that
// finds nothing scheduled (a CronJob an upgrade or a race left running)
// puts it to sleep; a look that cannot read the record leaves it.
func TestRetryCronJobSleepsWhileNothingIsScheduled(t *testing.T) {
	w := newRetryWorld(t)
	down := errors.New("no region server answered")
	steps := []struct {
		name        string
		after       time.Duration
		r           *recorder
		look        bool
		scheduled   bool
		unreadable  bool
		wantSwitch  string
		wantSuspend bool
	}{
		{name: "the install's run registers", r: &recorder{changed: true}, wantSwitch: RetriesSuspended, wantSuspend: true},
		{name: "a scheduled run fails transiently", after: 18 * time.Hour, r: &recorder{failAt: "find", failWith: down}, scheduled: true, wantSwitch: RetriesResumed},
		{name: "a look finds the attempt pending", after: 10 * time.Minute, r: &recorder{}, look: true, wantSwitch: RetriesResumed},
		{name: "a look that cannot read leaves it", after: 10 * time.Minute, r: &recorder{}, look: true, unreadable: true},
		{name: "the attempt is due and registers", after: 50 * time.Minute, r: &recorder{changed: true}, look: true, wantSwitch: RetriesSuspended, wantSuspend: true},
		{name: "a wrong plan fails for good", after: 18 * time.Hour, r: &recorder{failAt: "prove", failWith: failure.Permanent(errors.New("marketplace plan mismatch"))}, wantSwitch: RetriesSuspended, wantSuspend: true},
	}
	for _, s := range steps {
		w.now = w.now.Add(s.after)
		w.scheduled = s.scheduled
		if s.unreadable {
			w.c.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
			})
		}
		res, _, _ := w.run(s.r, s.look)
		if s.unreadable {
			w.c.ReactionChain = w.c.ReactionChain[1:]
		}
		assert.Equal(t, s.wantSwitch, res.RetryCronJob, s.name)
		if s.wantSwitch != "" || s.unreadable {
			assert.Equal(t, s.wantSuspend, w.suspended(), s.name)
		}
	}

	// A CronJob an upgrade left running on a registered cluster: its next
	// look suspends it.
	_, _, err := w.run(&recorder{changed: true}, false)
	require.NoError(t, err)
	_, err = w.c.BatchV1().CronJobs(operator.Namespace).Patch(context.Background(), retryCronJob, types.MergePatchType, []byte(`{"spec":{"suspend":false}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	res, _, err := w.run(&recorder{}, true)
	require.NoError(t, err)
	assert.Equal(t, OutcomeNotDue, res.Outcome)
	assert.Equal(t, RetriesSuspended, res.RetryCronJob)
	assert.True(t, w.suspended())
}

// TestRecordSkewIsTheLeaseMargin: a record's time is believed as far ahead
// of the reader's clock as the Lease's expiry allows for another node's
// clock; job/retry states its own figure, which must stay the Lease's.
func TestRecordSkewIsTheLeaseMargin(t *testing.T) {
	assert.Equal(t, kube.LeaseMargin, retry.RecordSkew)
}
