// Package coredns is the engine's in-cluster DNS: it makes the update
// server's name resolve, inside the cluster, to the address phase 5 reports,
// by editing CoreDNS's configuration (AKS's coredns-custom, or the Corefile
// elsewhere). Public DNS does not resolve the update servers' names, yet
// rancher/scc-operator must connect to https://<name> for the certificate to
// match. IN_CLUSTER_DNS=false turns it off.
//
// It speaks to the API through job/kube's narrow interfaces and reports
// RBAC refusals through kube.APIError, like every other write of the engine.
package coredns
