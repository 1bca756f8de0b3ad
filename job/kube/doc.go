// Package kube is the engine's client of the Kubernetes API: it builds the
// REST client, writes the scc-registration Secret that rancher/scc-operator
// reads (phase 6), keeps two runs apart with a Lease, and turns API errors
// into ones a person can act on (APIError). The in-cluster DNS entry is
// written through the same client by job/incluster/coredns.
//
// Everything here works against any *rest.Config, so the same code runs in a
// pod, from a workstation with --kubeconfig, against a real kube-apiserver in
// the control-plane tests, and against client-go's fake clientset in unit
// tests.
//
// Two rules hold for every write. First, the Secret and the Lease are
// written with server-side apply, never created with a POST: the Role in
// manifests/base limits both to one name with resourceNames, and Kubernetes
// authorizes a POST create without a name, so a POST is always denied, while
// an apply that creates is authorized as "create" with the name. Second,
// write only what we own: the Secret is shared with the operator, which
// stamps labels, a salt and an annotation on it; a full Update, or a label of
// our own, makes it lose track of the registration.
package kube
