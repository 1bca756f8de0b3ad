// Package harness is what every end-to-end suite of e2e stands on: the
// built binaries (Main builds the engine and the fake cloud once per test
// binary), a fake cloud process (StartCloud), the engine run as a process
// with only the environment it is given (RunEngine, StartEngine), and the
// shared control plane with manifests/overlays/e2e applied (SetupCluster):
// the engine's runs as its ServiceAccount, the process kubelet that runs
// Jobs' pods as engine processes (Cluster.StartKubelet), the cluster's DNS
// as a real CoreDNS, and the fixtures and helpers the cases share.
//
// Only tests import it; the product never does.
package harness
