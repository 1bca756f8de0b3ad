package kube

import (
	"context"
	"fmt"
	"net/http"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rancher/registration-engine/providers/failure"
)

// WorkstationConfig loads the client configuration the way kubectl does,
// for a person running a subcommand with their own credentials: an explicit
// kubeconfig path when given, otherwise KUBECONFIG, then ~/.kube/config,
// then the in-cluster ServiceAccount. kubeContext, when set, picks a context
// other than the current one.
func WorkstationConfig(kubeconfig, kubeContext string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return nil, failure.Permanent(fmt.Errorf("kube: kubeconfig: %w", err))
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = RequestTimeout
	}
	return cfg, nil
}

// Reader is a read-only view of everything `registration-engine status`
// relates: the engine's CronJob, its Jobs, their pods and Events, the
// Lease, the Secret, CoreDNS's ConfigMaps, and rancher/scc-operator's
// Registrations (read as the run reads them). It has no method that
// writes. Errors are the API server's, unwrapped, so a caller can tell a
// refused read (apierrors.IsForbidden) from an absent object
// (apierrors.IsNotFound).
type Reader struct {
	core, batch, coordination, events rest.Interface
	// Registrations reads the operator's Registrations.
	Registrations RegistrationsInterface
}

// NewReader builds a Reader on one shared HTTP client.
func NewReader(cfg *rest.Config) (*Reader, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, failure.Permanent(fmt.Errorf("kube: http client: %w", err))
	}
	a, err := newAPI(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	r := &Reader{core: a.core, coordination: a.coordination, events: a.events, Registrations: registrations{a.scc}}
	if r.batch, err = restClient(cfg, httpClient, batchv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	return r, nil
}

// restClient is a REST client for one API group on the shared HTTP client.
func restClient(cfg *rest.Config, httpClient *http.Client, gv schema.GroupVersion, apiPath string) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gv
	c.APIPath = apiPath
	c.NegotiatedSerializer = codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientForConfigAndClient(c, httpClient)
	if err != nil {
		return nil, failure.Permanent(fmt.Errorf("kube: %s client: %w", gv, err))
	}
	return rc, nil
}

func get[T runtime.Object](ctx context.Context, c rest.Interface, ns, plural, name string, out T) (T, error) {
	err := c.Get().Namespace(ns).Resource(plural).Name(name).Do(ctx).Into(out)
	return out, err
}

func list[T runtime.Object](ctx context.Context, c rest.Interface, ns, plural string, opts metav1.ListOptions, out T) (T, error) {
	err := c.Get().Namespace(ns).Resource(plural).VersionedParams(&opts, parameterCodec).Do(ctx).Into(out)
	return out, err
}

// Secret reads one Secret.
func (r *Reader) Secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return get(ctx, r.core, ns, "secrets", name, &corev1.Secret{})
}

// ConfigMap reads one ConfigMap.
func (r *Reader) ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return get(ctx, r.core, ns, "configmaps", name, &corev1.ConfigMap{})
}

// Lease reads one Lease.
func (r *Reader) Lease(ctx context.Context, ns, name string) (*coordinationv1.Lease, error) {
	return get(ctx, r.coordination, ns, "leases", name, &coordinationv1.Lease{})
}

// CronJob reads one CronJob.
func (r *Reader) CronJob(ctx context.Context, ns, name string) (*batchv1.CronJob, error) {
	return get(ctx, r.batch, ns, "cronjobs", name, &batchv1.CronJob{})
}

// Jobs lists the Jobs matching a label selector.
func (r *Reader) Jobs(ctx context.Context, ns, selector string) (*batchv1.JobList, error) {
	return list(ctx, r.batch, ns, "jobs", metav1.ListOptions{LabelSelector: selector}, &batchv1.JobList{})
}

// Pods lists the pods matching a label selector.
func (r *Reader) Pods(ctx context.Context, ns, selector string) (*corev1.PodList, error) {
	return list(ctx, r.core, ns, "pods", metav1.ListOptions{LabelSelector: selector}, &corev1.PodList{})
}

// Events lists a namespace's Events (events.k8s.io/v1, which also serves
// the ones the Job controller records through core/v1).
func (r *Reader) Events(ctx context.Context, ns string) (*eventsv1.EventList, error) {
	return list(ctx, r.events, ns, "events", metav1.ListOptions{}, &eventsv1.EventList{})
}

// Registration reads one of the operator's Registrations.
func (r *Reader) Registration(ctx context.Context, name string) (*SCCRegistration, error) {
	return r.Registrations.Get(ctx, name)
}

// RegistrationsServed reports whether registrations.scc.cattle.io is served.
func (r *Reader) RegistrationsServed(ctx context.Context) (bool, error) {
	return r.Registrations.Served(ctx)
}
