// Package controlplane runs a real Kubernetes control plane (etcd,
// kube-apiserver and kube-controller-manager as plain processes on loopback)
// for tests that must see what a fake clientset cannot: RBAC as the API server
// enforces it, server-side apply, Leases, and the CronJob and Job controllers.
//
// The binaries are built once by e2e/scripts/k8s-testbin.sh and found through
// the K8S_TESTBIN directory (see Binaries). There is no kubelet, scheduler or
// container runtime: pods that Jobs create stay Pending until a Kubelet from
// this package runs them as host processes and reports their exit codes
// through pods/status, which is enough for the Job controller to complete or
// fail the Job.
//
// A RequestLog in front of a plane's API server counts a program's
// requests by verb and resource (benchrun's Kubernetes figures). A plane
// started WithAuditLog has the API server itself log every request, by
// anyone (the controllers, the Kubelet, a program), which ReadAudit reads:
// what a workload costs the API server in all.
//
// A test binary normally shares one plane (Shared, stopped by Main from
// TestMain): a cold start costs a few seconds, each test then uses its own
// namespaces.
package controlplane
