package kube_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/job/operator"
)

// TestSaveRun: a run's record costs the API server one read and one write
// of the Lease, and carries over the counts of the record it replaces; on a
// conflict (another writer between the read and the write) it reads again
// and carries over that writer's counts, not the stale ones.
func TestSaveRun(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	failed := kube.RunRecord{Time: t0, Outcome: "failed", ExitCode: 1, Phase: "find-update-server"}

	t.Run("one read and one write, counts carried over", func(t *testing.T) {
		c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: operator.Namespace}})
		l := newLease(c, "pod-1", t0)
		_, err := l.SaveRun(ctx, failed)
		require.NoError(t, err)
		c.ClearActions()

		second := failed
		second.Time = t0.Add(18 * time.Hour)
		got, err := l.SaveRun(ctx, second)
		require.NoError(t, err)
		assert.Equal(t, 2, got.ConsecutiveFailures)
		assert.Equal(t, t0, *got.FailingSince, "failing since the first")
		assert.Equal(t, []string{"get", "update"}, kubetest.Verbs(c, "leases"))
		assert.Equal(t, got, readRunRecord(t, c))
	})

	t.Run("a conflict reads again and carries over the other writer's counts", func(t *testing.T) {
		c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: operator.Namespace}})
		l := newLease(c, "pod-1", t0)
		conflicted := false
		c.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			if conflicted {
				return false, nil, nil
			}
			conflicted = true
			// Another writer's record lands between this read and write.
			other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: operator.Namespace,
				Annotations: map[string]string{kube.AnnotationLastRun: `{"time":"2026-11-30T10:00:00Z","outcome":"failed","exitCode":1,"consecutiveFailures":4,"failingSince":"2026-11-28T10:00:00Z"}`}}}
			require.NoError(t, c.Tracker().Update(coordinationv1.SchemeGroupVersion.WithResource("leases"), other, operator.Namespace))
			return true, nil, apierrors.NewConflict(leasesGR, leaseName, nil)
		})
		got, err := l.SaveRun(ctx, failed)
		require.NoError(t, err)
		assert.Equal(t, 5, got.ConsecutiveFailures)
		assert.Equal(t, time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC), got.FailingSince.UTC())
		assert.Equal(t, got, readRunRecord(t, c))
	})
}

func readRunRecord(t *testing.T, c *fake.Clientset) kube.RunRecord {
	t.Helper()
	le, err := c.CoordinationV1().Leases(operator.Namespace).Get(context.Background(), leaseName, metav1.GetOptions{})
	require.NoError(t, err)
	rec, ok, err := kube.ParseRunRecord(le.Annotations)
	require.NoError(t, err)
	require.True(t, ok)
	return rec
}

// TestReleaseRecordsTheRun: a run that holds the Lease records its verdict
// with the release, in one read and one write for both; on a Lease another
// run has taken over, the record is still written and that run keeps the
// Lease.
func TestReleaseRecordsTheRun(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	prev := kube.RunRecord{Time: t0.Add(-18 * time.Hour), Outcome: "failed", ExitCode: 1, ConsecutiveFailures: 1, FailingSince: &t0}
	raw, err := json.Marshal(prev)
	require.NoError(t, err)

	for _, takenOver := range []bool{false, true} {
		t.Run(map[bool]string{false: "held: released and recorded", true: "taken over: recorded, the holder kept"}[takenOver], func(t *testing.T) {
			c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: operator.Namespace,
				Annotations: map[string]string{kube.AnnotationLastRun: string(raw)}}})
			release, _, err := newLease(c, "pod-b", t0).Acquire(ctx)
			require.NoError(t, err)
			if takenOver {
				le := getLease(t, c)
				le.Spec.HolderIdentity = ptr.To("pod-c")
				_, err := c.CoordinationV1().Leases(operator.Namespace).Update(ctx, le, metav1.UpdateOptions{})
				require.NoError(t, err)
			}
			c.ClearActions()

			got, err := release(ctx, &kube.RunRecord{Time: t0, Outcome: "registered"})

			require.NoError(t, err)
			assert.Equal(t, []string{"get", "update"}, kubetest.Verbs(c, "leases"))
			assert.Zero(t, got.ConsecutiveFailures, "a success resets the count")
			require.NotNil(t, got.LastSuccess)
			assert.Equal(t, got, readRunRecord(t, c))
			want := ""
			if takenOver {
				want = "pod-c"
			}
			assert.Equal(t, want, holderIdentity(getLease(t, c)))
		})
	}
}

// TestAcquireHandsOverTheLastRecord: the run that takes the Lease gets the
// record of the run before with the same read, so that it can judge its own
// failure (first contact or not, failing since when) without another
// request; LastRun reads it for the retry CronJob's runs.
func TestAcquireHandsOverTheLastRecord(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	created := t0.Add(-time.Hour)
	c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: operator.Namespace, CreationTimestamp: metav1.NewTime(created)}})
	l := newLease(c, "pod-1", t0)
	_, last, err := l.Acquire(ctx)
	require.NoError(t, err)
	require.NotNil(t, last, "the Lease exists: its creation time comes with it")
	assert.Empty(t, last.Outcome, "no run recorded yet")
	assert.Equal(t, created, last.LeaseCreated.UTC(), "the API server's stamp, which no writer of the Lease can move")
	_, ok, err := l.LastRun(ctx)
	require.NoError(t, err)
	assert.False(t, ok)

	next := t0.Add(10 * time.Minute)
	_, err = l.SaveRun(ctx, kube.RunRecord{Time: t0, Outcome: "failed", ExitCode: 1, Cause: kube.CauseSettling, NextAttempt: &next})
	require.NoError(t, err)
	c.ClearActions()
	_, last, err = newLease(c, "pod-2", t0.Add(time.Hour)).Acquire(ctx)
	require.NoError(t, err)
	require.NotNil(t, last)
	assert.Equal(t, kube.CauseSettling, last.Cause)
	assert.Equal(t, 1, last.ConsecutiveFailures)
	assert.Equal(t, next, *last.NextAttempt)
	assert.Equal(t, []string{"get", "update"}, kubetest.Verbs(c, "leases"), "no read more than before")
	rec, ok, err := l.LastRun(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, *last, rec)
}

// TestReadRunRecordDoesNotTrustTime: anything that may write the Lease may
// write the record; a record that does not parse or lies about time counts
// as a failure, since its time (or now), due now: never as "no run".
func TestReadRunRecordDoesNotTrustTime(t *testing.T) {
	now := time.Date(2026, 12, 4, 14, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	// failed is a failed run's record as stored; since "" leaves
	// failingSince out.
	failed := func(time string, failures int, since, cause, next string) string {
		if since != "" {
			since = `,"failingSince":"` + since + `"`
		}
		return fmt.Sprintf(`{"time":%q,"outcome":"failed","consecutiveFailures":%d%s,"cause":%q,"nextAttempt":%q}`, time, failures, since, cause, next)
	}
	tests := map[string]struct {
		raw         string
		wantSince   time.Time
		wantFailing bool
		wantDue     bool // the next attempt is due now
		wantNoNext  bool // no attempt: failed for good
		wantDoubt   string
	}{
		"a true failure, its attempt in 20 minutes": {
			raw:         failed(at(-time.Hour), 3, at(-2*time.Hour), "transient", at(20*time.Minute)),
			wantSince:   now.Add(-2 * time.Hour),
			wantFailing: true,
		},
		"a time a minute ahead: another node's clock": {
			raw:         failed(at(time.Minute), 1, at(time.Minute), "transient", at(time.Minute)),
			wantSince:   now.Add(time.Minute),
			wantFailing: true,
		},
		"a true success": {raw: `{"time":"` + at(-time.Hour) + `","outcome":"registered","consecutiveFailures":0}`},
		"failingSince a year ahead": {
			raw:         failed(at(-time.Hour), 3, at(365*24*time.Hour), "settling", at(-time.Hour)),
			wantSince:   now.Add(-time.Hour),
			wantFailing: true, wantDue: true,
			wantDoubt: "failingSince 2027-12-04T14:00:00Z is not before its time: counted as a failure since 2026-12-04T13:00:00Z, due now",
		},
		"the record's time ahead too": {
			raw:         failed(at(48*time.Hour), 1, at(48*time.Hour), "transient", at(49*time.Hour)),
			wantSince:   now,
			wantFailing: true, wantDue: true,
			wantDoubt: "its time 2026-12-06T14:00:00Z is after now",
		},
		"nextAttempt past the longest gap": {
			raw:         failed(at(-time.Hour), 1, at(-time.Hour), "transient", at(6*time.Hour)),
			wantSince:   now.Add(-time.Hour),
			wantFailing: true, wantDue: true,
			wantDoubt: "nextAttempt 2026-12-04T20:00:00Z is more than the longest gap (6h0m0s) after it",
		},
		"a permanent failure whose nextAttempt is past the longest gap": {
			raw:         failed(at(-time.Hour), 1, at(-time.Hour), "permanent", at(24*time.Hour)),
			wantSince:   now.Add(-time.Hour),
			wantFailing: true, wantNoNext: true,
			wantDoubt: "nextAttempt 2026-12-05T14:00:00Z is more than the longest gap",
		},
		"a failure without failingSince": {
			raw:         failed(at(-time.Hour), 1, "", "transient", at(time.Hour)),
			wantSince:   now.Add(-time.Hour),
			wantFailing: true, wantDue: true,
			wantDoubt: "failingSince (none) is not before its time",
		},
		"garbage": {
			raw:         `{not json`,
			wantSince:   now,
			wantFailing: true, wantDue: true,
			wantDoubt: "the record does not parse",
		},
		"an outcome the engine never writes": {
			raw:         `{"time":"` + at(-time.Hour) + `","outcome":"fine"}`,
			wantSince:   now,
			wantFailing: true, wantDue: true,
			wantDoubt: `the record's outcome "fine" is none the engine writes`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rec, ok := kube.ReadRunRecord(map[string]string{kube.AnnotationLastRun: tc.raw}, now)
			require.True(t, ok, "a record is there: never read as no run")
			assert.Equal(t, tc.wantFailing, rec.Failing())
			if tc.wantDoubt == "" {
				assert.Empty(t, rec.Doubt)
			} else {
				assert.Contains(t, rec.Doubt, tc.wantDoubt)
			}
			if !tc.wantFailing {
				return
			}
			require.NotNil(t, rec.FailingSince)
			assert.Equal(t, tc.wantSince, rec.FailingSince.UTC())
			assert.False(t, rec.FailingSince.After(now.Add(kube.RecordSkew)), "a streak never begins after now")
			assert.GreaterOrEqual(t, rec.ConsecutiveFailures, 1)
			if tc.wantNoNext {
				assert.Nil(t, rec.NextAttempt, "failed for good: nothing scheduled")
				return
			}
			require.NotNil(t, rec.NextAttempt)
			if tc.wantDue {
				assert.Equal(t, now, rec.NextAttempt.UTC(), "due at the next look")
			}
		})
	}
	_, ok := kube.ReadRunRecord(nil, now)
	assert.False(t, ok, "no record: no run yet")
}

// TestLastRunReadErrorIsNotARecord: when the API server fails the read,
// LastRun says so (an error), never "no run" or a record.
func TestLastRunReadErrorIsNotARecord(t *testing.T) {
	c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: operator.Namespace}})
	c.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
	})
	_, ok, err := newLease(c, "pod-1", time.Now()).LastRun(context.Background())
	require.Error(t, err)
	assert.True(t, apierrors.IsInternalError(err))
	assert.False(t, ok)
}
