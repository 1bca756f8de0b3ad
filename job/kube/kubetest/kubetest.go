// Package kubetest holds what the tests of the engine's Kubernetes writers
// share: a reading of the requests that went out to client-go's fake
// clientset. Only tests import it.
package kubetest

import (
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

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
