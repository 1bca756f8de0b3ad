package kube

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// Reader is a read-only view of everything `registration-engine status`
// relates: the engine's CronJob, its Jobs, their pods and Events, the
// Lease, the Secret, CoreDNS's ConfigMaps, and rancher/scc-operator's
// Registrations (read as the run reads them). It has no method that
// writes. Errors are the API server's, unwrapped, so a caller can tell a
// refused read (apierrors.IsForbidden) from an absent object
// (apierrors.IsNotFound).
type Reader struct{ api *api }

// NewReader builds a Reader on the engine's own clients (one shared HTTP
// client).
func NewReader(cfg *rest.Config) (*Reader, error) {
	a, err := newAPI(cfg)
	if err != nil {
		return nil, err
	}
	return &Reader{api: a}, nil
}

// list lists one namespace's objects of a resource matching opts.
func list[T runtime.Object](ctx context.Context, c rest.Interface, ns, plural string, opts metav1.ListOptions, out T) (T, error) {
	err := c.Get().Namespace(ns).Resource(plural).VersionedParams(&opts, parameterCodec).Do(ctx).Into(out)
	return out, err
}

// Secret reads one Secret.
func (r *Reader) Secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return r.api.Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

// ConfigMap reads one ConfigMap.
func (r *Reader) ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return r.api.ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

// Service reads one Service (status asks for the one that would shadow the
// update server's name).
func (r *Reader) Service(ctx context.Context, ns, name string) (*corev1.Service, error) {
	services := resource[*corev1.Service]{r.api.core, ns, "services", func() *corev1.Service { return &corev1.Service{} }}
	return services.Get(ctx, name, metav1.GetOptions{})
}

// ServiceEndpoints lists the EndpointSlices of one Service (status asks
// whether a headless Service has an endpoint whose hostname would answer
// the update server's name).
func (r *Reader) ServiceEndpoints(ctx context.Context, ns, service string) (*discoveryv1.EndpointSliceList, error) {
	return r.api.EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
}

// Lease reads one Lease.
func (r *Reader) Lease(ctx context.Context, ns, name string) (*coordinationv1.Lease, error) {
	return r.api.Leases(ns).Get(ctx, name, metav1.GetOptions{})
}

// CronJob reads one CronJob.
func (r *Reader) CronJob(ctx context.Context, ns, name string) (*batchv1.CronJob, error) {
	cronJobs := resource[*batchv1.CronJob]{r.api.batch, ns, "cronjobs", func() *batchv1.CronJob { return &batchv1.CronJob{} }}
	return cronJobs.Get(ctx, name, metav1.GetOptions{})
}

// Jobs lists the Jobs matching a label selector.
func (r *Reader) Jobs(ctx context.Context, ns, selector string) (*batchv1.JobList, error) {
	return list(ctx, r.api.batch, ns, "jobs", metav1.ListOptions{LabelSelector: selector}, &batchv1.JobList{})
}

// Pods lists the pods matching a label selector.
func (r *Reader) Pods(ctx context.Context, ns, selector string) (*corev1.PodList, error) {
	return list(ctx, r.api.core, ns, "pods", metav1.ListOptions{LabelSelector: selector}, &corev1.PodList{})
}

// Events lists a namespace's Events (events.k8s.io/v1, which also serves
// the ones the Job controller records through core/v1).
func (r *Reader) Events(ctx context.Context, ns string) (*eventsv1.EventList, error) {
	return list(ctx, r.api.events, ns, "events", metav1.ListOptions{}, &eventsv1.EventList{})
}

// Registration reads one of the operator's Registrations.
func (r *Reader) Registration(ctx context.Context, name string) (*SCCRegistration, error) {
	return registrations{r.api.scc}.Get(ctx, name)
}

// RegistrationsServed reports whether registrations.scc.cattle.io is served.
func (r *Reader) RegistrationsServed(ctx context.Context) (bool, error) {
	return registrations{r.api.scc}.Served(ctx)
}

// ServerVersion asks GET /version, which every Kubernetes API server
// answers to anyone (the role system:public-info-viewer), and returns the
// body as it came. status asks it first, to tell an address that is no
// API server, or that cannot be reached, from a cluster without the
// engine. The error is client-go's: an *url.Error when no HTTP answer
// came, an apierrors.APIStatus when one did (apierrors.IsUnexpectedServerError
// when its body was no Kubernetes Status).
func (r *Reader) ServerVersion(ctx context.Context) ([]byte, error) {
	res := r.api.core.Get().AbsPath("/version").Do(ctx)
	if err := res.Error(); err != nil {
		return nil, err
	}
	return res.Raw()
}
