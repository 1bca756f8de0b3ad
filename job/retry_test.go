package job

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/job/operator"
)

// retryWorld is one cluster's Lease on a fake API server and a clock the
// test moves: runs are assembled as New assembles them (the Lease locks,
// records and is read by the retry CronJob's runs).
type retryWorld struct {
	t     *testing.T
	c     *fake.Clientset
	lease *kube.Lease
	now   time.Time
}

func newRetryWorld(t *testing.T) *retryWorld {
	c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: kube.LeaseName, Namespace: operator.Namespace}})
	w := &retryWorld{t: t, c: c, now: time.Date(2026, 12, 4, 14, 0, 0, 0, time.UTC)}
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
	j.OnlyWhenDue = onlyWhenDue
	j.Now = func() time.Time { return w.now }
	j.RandDuration = func(n time.Duration) time.Duration { return n - 1 } // the longest gap
	res, err := j.Run(context.Background())
	return res, op, err
}

func (w *retryWorld) record() kube.RunRecord {
	rec, ok, err := w.lease.LastRun(context.Background())
	require.NoError(w.t, err)
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
	assert.Equal(t, kube.CauseSettling, rec.Cause)
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
	assert.Equal(t, kube.CausePermanent, rec.Cause)
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
