// Package kube is the engine's client of the Kubernetes API, one subject: it
// builds the REST client, retries what another attempt can fix and turns API
// errors into ones a person can act on (Retrier, APIError), keeps two runs
// apart with a Lease that also carries each run's record, records Events on
// the run's Job, reads what status reports (Reader), and reads
// rancher/scc-operator's Registration through its CRD's REST. What those
// objects mean to the operator (the Secret's contract and the rules for
// writing it) lives in job/operator; the in-cluster DNS entry is written
// through the same client by job/incluster/coredns.
//
// Everything here works against any *rest.Config, so the same code runs in a
// pod, from a workstation with --kubeconfig, against a real kube-apiserver in
// the control-plane tests, and against client-go's fake clientset in unit
// tests.
//
// Every object the engine writes is written under FieldManager, and never
// created with a POST: the Role in manifests/base limits the Secret and the
// Lease to one name with resourceNames, and Kubernetes authorizes a POST
// create without a name, so a POST is always denied, while a server-side
// apply that creates is authorized as "create" with the name.
package kube
