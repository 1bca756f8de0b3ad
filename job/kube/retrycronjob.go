package kube

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// RetryCronJob is the chart's retry CronJob (RETRY_CRONJOB_NAME), which the
// engine suspends while no attempt is scheduled and resumes when a run
// fails and may succeed another time: a registered cluster then runs no
// retry pod between its scheduled runs (docs/install.md, "When a run fails").
// The chart creates it unsuspended and leaves spec.suspend to the engine;
// the Role grants patch on it alone, by name.
type RetryCronJob struct {
	CronJobs  CronJobsGetter
	Namespace string // required
	Name      string // required
}

// SetSuspended sets the CronJob's spec.suspend, with one merge patch of
// that field alone (a patch that changes nothing is no write).
func (r *RetryCronJob) SetSuspended(ctx context.Context, suspend bool) error {
	body := fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspend)
	_, err := r.CronJobs.CronJobs(r.Namespace).Patch(ctx, r.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("kube: cronjob %s/%s: suspend %t: %w", r.Namespace, r.Name, suspend,
			APIError(err, Access{Verbs: []string{"patch"}, Resource: "cronjobs/" + r.Name, Namespace: r.Namespace}))
	}
	return nil
}
