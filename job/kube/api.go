package kube

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/rancher/registration-engine/internal/failure"
)

// The engine's view of the Kubernetes API: the resources it uses, the calls it
// makes on them, nothing else. The method sets are those of client-go's
// typed clients, so a typed clientset (or its fake, in tests) serves them
// as well as the small REST client below.
//
// Why not the typed clients themselves: each of them imports
// k8s.io/client-go/kubernetes/scheme, which registers every built-in API
// group, and that alone made the binary 38 MB. The REST client with a
// scheme of only the groups we use is 24 MB smaller.
type (
	// SecretInterface reads, applies and deletes one namespace's Secrets
	// (delete only to recover a Registration the operator failed for a
	// passing cause, with preconditions on what was read).
	SecretInterface interface {
		Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error)
		Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Secret, error)
		Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	}
	// ConfigMapInterface reads and patches one namespace's ConfigMaps.
	ConfigMapInterface interface {
		Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
		Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.ConfigMap, error)
	}
	// LeaseInterface reads, applies and updates one namespace's Leases,
	// and deletes the engine's at uninstall (registration-engine cleanup).
	LeaseInterface interface {
		Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
		Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*coordinationv1.Lease, error)
		Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
		Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	}

	// EndpointSliceInterface lists one namespace's EndpointSlices: the
	// handover asks each CoreDNS replica behind the cluster's DNS Service.
	EndpointSliceInterface interface {
		List(ctx context.Context, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error)
	}

	// SecretsGetter, ConfigMapsGetter, LeasesGetter and
	// EndpointSlicesGetter hand out the per-namespace interfaces.
	SecretsGetter interface {
		Secrets(namespace string) SecretInterface
	}
	ConfigMapsGetter interface {
		ConfigMaps(namespace string) ConfigMapInterface
	}
	LeasesGetter interface {
		Leases(namespace string) LeaseInterface
	}
	EndpointSlicesGetter interface {
		EndpointSlices(namespace string) EndpointSliceInterface
	}
	// DeploymentInterface reads one namespace's Deployments (only
	// rancher/scc-operator's, by name: the proxy settings it runs with).
	DeploymentInterface interface {
		Get(ctx context.Context, name string, opts metav1.GetOptions) (*appsv1.Deployment, error)
	}
	DeploymentsGetter interface {
		Deployments(namespace string) DeploymentInterface
	}
	// CronJobInterface patches one namespace's CronJobs: only the chart's
	// retry CronJob, by name, and only its spec.suspend (RetryCronJob).
	CronJobInterface interface {
		Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*batchv1.CronJob, error)
	}
	CronJobsGetter interface {
		CronJobs(namespace string) CronJobInterface
	}
)

// sccGroupVersion is rancher/scc-operator's API group, read as raw JSON.
var sccGroupVersion = schema.GroupVersion{Group: RegistrationGroup, Version: RegistrationVersion}

// scheme knows core/v1, apps/v1 (the operator's Deployment), coordination.k8s.io/v1, events.k8s.io/v1, batch/v1
// (the status subcommand reads the CronJob and its Jobs), discovery.k8s.io/v1
// (CoreDNS's EndpointSlices) and the option types of meta/v1: all the engine
// sends or receives.
var (
	scheme, schemeErr = newScheme()
	codecs            = serializer.NewCodecFactory(scheme)
	parameterCodec    = runtime.NewParameterCodec(scheme)
)

func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, coordinationv1.AddToScheme, eventsv1.AddToScheme, batchv1.AddToScheme, discoveryv1.AddToScheme} {
		if err := add(s); err != nil {
			return s, err
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s, nil
}

// api serves the getters through one REST client per API group, all
// on one HTTP client (shared connections and token). The engine's Clients
// and the status subcommand's Reader are both views of it.
type api struct {
	core, apps, coordination, events, batch, discovery, scc rest.Interface
}

func newAPI(cfg *rest.Config) (*api, error) {
	if schemeErr != nil {
		return nil, failure.Permanent(fmt.Errorf("kube: scheme: %w", schemeErr))
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, failure.Permanent(fmt.Errorf("kube: http client: %w", err))
	}
	client := func(gv schema.GroupVersion, apiPath string) (rest.Interface, error) {
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
	var a api
	for _, g := range []struct {
		client  *rest.Interface
		gv      schema.GroupVersion
		apiPath string
	}{
		{&a.core, corev1.SchemeGroupVersion, "/api"},
		{&a.apps, appsv1.SchemeGroupVersion, "/apis"},
		{&a.coordination, coordinationv1.SchemeGroupVersion, "/apis"},
		{&a.events, eventsv1.SchemeGroupVersion, "/apis"},
		{&a.batch, batchv1.SchemeGroupVersion, "/apis"},
		{&a.discovery, discoveryv1.SchemeGroupVersion, "/apis"},
		{&a.scc, sccGroupVersion, "/apis"},
	} {
		if *g.client, err = client(g.gv, g.apiPath); err != nil {
			return nil, err
		}
	}
	return &a, nil
}

func (a *api) Secrets(ns string) SecretInterface {
	return resource[*corev1.Secret]{a.core, ns, "secrets", func() *corev1.Secret { return &corev1.Secret{} }}
}

func (a *api) ConfigMaps(ns string) ConfigMapInterface {
	return resource[*corev1.ConfigMap]{a.core, ns, "configmaps", func() *corev1.ConfigMap { return &corev1.ConfigMap{} }}
}

func (a *api) Events(ns string) EventInterface {
	return resource[*eventsv1.Event]{a.events, ns, "events", func() *eventsv1.Event { return &eventsv1.Event{} }}
}

// Deployments reads Deployments of ns: only rancher/scc-operator's, for
// the proxy settings it runs with (get by name; the Role names it).
func (a *api) Deployments(ns string) DeploymentInterface {
	return resource[*appsv1.Deployment]{a.apps, ns, "deployments", func() *appsv1.Deployment { return &appsv1.Deployment{} }}
}

// CronJobs patches CronJobs of ns: only the retry CronJob's suspend.
func (a *api) CronJobs(ns string) CronJobInterface {
	return resource[*batchv1.CronJob]{a.batch, ns, "cronjobs", func() *batchv1.CronJob { return &batchv1.CronJob{} }}
}

func (a *api) Leases(ns string) LeaseInterface {
	return resource[*coordinationv1.Lease]{a.coordination, ns, "leases", func() *coordinationv1.Lease { return &coordinationv1.Lease{} }}
}

func (a *api) EndpointSlices(ns string) EndpointSliceInterface {
	return endpointSlices{a.discovery, ns}
}

// endpointSlices lists one namespace's EndpointSlices, as client-go's
// generated client does.
type endpointSlices struct {
	client    rest.Interface
	namespace string
}

func (e endpointSlices) List(ctx context.Context, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	return list(ctx, e.client, e.namespace, "endpointslices", opts, &discoveryv1.EndpointSliceList{})
}

// resource is one namespaced resource of one API group: the three calls the
// engine makes, as client-go's generated clients make them.
type resource[T interface {
	runtime.Object
	GetName() string
}] struct {
	client    rest.Interface
	namespace string
	plural    string
	newObject func() T
}

func (r resource[T]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := r.newObject()
	err := r.client.Get().Namespace(r.namespace).Resource(r.plural).Name(name).
		VersionedParams(&opts, parameterCodec).Do(ctx).Into(out)
	return out, err
}

func (r resource[T]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	out := r.newObject()
	err := r.client.Patch(pt).Namespace(r.namespace).Resource(r.plural).Name(name).SubResource(subresources...).
		VersionedParams(&opts, parameterCodec).Body(data).Do(ctx).Into(out)
	return out, err
}

func (r resource[T]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.client.Delete().Namespace(r.namespace).Resource(r.plural).Name(name).Body(&opts).Do(ctx).Error()
}

func (r resource[T]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := r.newObject()
	err := r.client.Post().Namespace(r.namespace).Resource(r.plural).
		VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r resource[T]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := r.newObject()
	err := r.client.Put().Namespace(r.namespace).Resource(r.plural).Name(obj.GetName()).
		VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}
