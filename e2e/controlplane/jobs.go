package controlplane

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// WaitJobFinished polls until the Job is Complete or Failed and returns it;
// the 90 s bound covers the Job controller's 10 s back-off before a retry.
// A failed read (a busy API server, as on a kind node starting pods) is
// polled again and named if the Job never finishes. The real control plane
// and the kind tests both wait through it.
func WaitJobFinished(ctx context.Context, t testing.TB, cs kubernetes.Interface, ns, name string) *batchv1.Job {
	t.Helper()
	return WaitJobFinishedWithin(ctx, t, cs, ns, name, 90*time.Second)
}

// WaitJobFinishedWithin is WaitJobFinished with another bound, for a Job
// whose run itself takes long (in a real cluster the engine waits up to
// minutes for CoreDNS before it hands the Secret over).
func WaitJobFinishedWithin(ctx context.Context, t testing.TB, cs kubernetes.Interface, ns, name string, bound time.Duration) *batchv1.Job {
	t.Helper()
	var (
		job     *batchv1.Job
		lastErr error
	)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, bound, true, func(ctx context.Context) (bool, error) {
		j, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			lastErr = err
			return false, nil
		}
		job = j
		return FinishedCondition(j) != nil, nil
	})
	require.NoError(t, err, "job %s/%s did not finish within %s; last read error: %v; status: %+v", ns, name, bound, lastErr, job)
	return job
}

// FinishedCondition is the Job's true Complete or Failed condition, or nil
// while it runs.
func FinishedCondition(j *batchv1.Job) *batchv1.JobCondition {
	i := slices.IndexFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool {
		return (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue
	})
	if i < 0 {
		return nil
	}
	return &j.Status.Conditions[i]
}

// SetEnv sets variables of a container a test runs: it replaces the values
// of those c already has, in place, and appends the others in name order.
// vals is consumed.
func SetEnv(c *corev1.Container, vals map[string]string) {
	for i := range c.Env {
		if v, ok := vals[c.Env[i].Name]; ok {
			c.Env[i] = corev1.EnvVar{Name: c.Env[i].Name, Value: v}
			delete(vals, c.Env[i].Name)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: vals[k]})
	}
}

// JobEvent returns the one events.k8s.io Event that controller recorded
// about Job ns/name; none or several fail t. The process tier and the kind
// tier both check the Event a run leaves on its Job through it.
func JobEvent(ctx context.Context, t testing.TB, cs kubernetes.Interface, ns, name, controller string) eventsv1.Event {
	t.Helper()
	list, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.ReportingController == controller && e.Regarding.Kind == "Job" && e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	require.Len(t, out, 1, "the Events %s recorded on Job %s/%s: %+v", controller, ns, name, out)
	return out[0]
}
