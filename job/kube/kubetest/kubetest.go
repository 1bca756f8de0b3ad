// Package kubetest holds what the tests of the engine's Kubernetes clients
// share: Typed, which serves the engine's API interfaces from client-go's
// fake clientset, and Verbs, a reading of the requests that went out to it.
// Only tests import it: it imports client-go's typed clientset, which the
// engine leaves out of its binary (see kube's api.go).
package kubetest

import (
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rancher/registration-engine/job/kube"
)

// API serves the engine's API interfaces from a typed clientset; Typed
// makes one.
type API struct{ cs kubernetes.Interface }

// The getters every engine component takes: a test hands any of them the
// same API.
var _ interface {
	kube.SecretsGetter
	kube.ConfigMapsGetter
	kube.LeasesGetter
	kube.EventsGetter
	kube.EndpointSlicesGetter
	kube.CronJobsGetter
} = API{}

// Typed serves the engine's API interfaces from cs: in tests, client-go's
// fake with its field-managed object tracker, which runs real server-side
// apply, so a test sees the objects the engine's requests leave behind.
func Typed(cs kubernetes.Interface) API { return API{cs} }

// Secrets serves kube.SecretsGetter.
func (a API) Secrets(ns string) kube.SecretInterface { return a.cs.CoreV1().Secrets(ns) }

// ConfigMaps serves kube.ConfigMapsGetter.
func (a API) ConfigMaps(ns string) kube.ConfigMapInterface { return a.cs.CoreV1().ConfigMaps(ns) }

// CronJobs serves kube.CronJobsGetter.
func (a API) CronJobs(ns string) kube.CronJobInterface { return a.cs.BatchV1().CronJobs(ns) }

// Leases serves kube.LeasesGetter.
func (a API) Leases(ns string) kube.LeaseInterface { return a.cs.CoordinationV1().Leases(ns) }

// Events serves kube.EventsGetter.
func (a API) Events(ns string) kube.EventInterface { return a.cs.EventsV1().Events(ns) }

// EndpointSlices serves kube.EndpointSlicesGetter.
func (a API) EndpointSlices(ns string) kube.EndpointSliceInterface {
	return a.cs.DiscoveryV1().EndpointSlices(ns)
}

// ApplyVerb is how Verbs lists a server-side apply.
const ApplyVerb = "patch:" + string(types.ApplyPatchType)

// Verbs lists the client's actions on one resource as "verb" or
// "patch:<type>", so a test can assert exactly which requests went out.
func Verbs(c *fake.Clientset, resource string) []string {
	var out []string
	for _, a := range c.Actions() {
		if a.GetResource().Resource != resource {
			continue
		}
		v := a.GetVerb()
		if p, ok := a.(k8stesting.PatchAction); ok {
			v += ":" + string(p.GetPatchType())
		}
		out = append(out, v)
	}
	return out
}
