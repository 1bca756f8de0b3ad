// Package kube is the engine's only contact with the Kubernetes API: it
// writes the scc-registration Secret that rancher/scc-operator reads (phase
// 6), keeps two runs apart with a Lease, makes the update server's name
// resolve inside the cluster through CoreDNS, and decides whether a run was
// started by the CronJob's schedule (and so takes the startup sleep).
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
