// Package e2e holds the end-to-end tests: the built registration-engine
// binary against the built fakecloud binary (always), against a real
// kube-apiserver (when the control-plane binaries are present; see
// e2e/controlplane), and in a kind cluster (build tag e2e).
//
// The rooms:
//
//   - e2e/harness: what every suite here stands on, importable and tested
//     on its own: the built binaries (harness.Main), a fake cloud process
//     (StartCloud), the engine as a process with only the environment it
//     is given (RunEngine, StartEngine), and the shared control plane with
//     manifests/overlays/e2e applied (SetupCluster): runs as the engine's
//     ServiceAccount (Cluster.RunAs), the process kubelet that runs Jobs'
//     pods as engine processes (Cluster.StartKubelet), the cluster's DNS
//     as a real CoreDNS, and the objects the cases share.
//   - e2e/controlplane: a real kube-apiserver, controller-manager and etcd,
//     one process supervisor (Process) and the process kubelet's core.
//   - e2e/sccoperator: the real rancher/scc-operator, the cluster's CoreDNS
//     (ClusterDNS) and the CONNECT proxy that resolves through it.
//   - e2e/fakecloud and e2e/cmd/fakecloud: every peer of the engine.
//   - internal/pki: the one certificate builder of them all (the unit
//     tests of the release scripts use it too, through internal/testkit).
//   - e2e/kind: the kind tier; e2e/cmd/benchrun: make bench.
//
// Where a new case goes:
//
//   - A peer misbehaving (a slow IMDS, a 429 from ARM, a region server with
//     the wrong certificate, an IPv6 black hole): add a fault to the fake
//     cloud's table (fakecloud.Faults in e2e/fakecloud/cloud.go, switched on
//     with --fault), then a row of TestEngineAgainstFakeCloud or
//     TestReliability in the package that owns the behaviour, and a row of
//     docs/RELIABILITY.md.
//   - The binary itself (flags, environment, exit codes, what reaches stdout
//     and stderr, the attestation subcommand): engine_test.go, through
//     harness.RunEngine.
//   - The API server (server-side apply, the Lease, CoreDNS, the CronJob and
//     Job controllers, the engine as its ServiceAccount): cluster_test.go.
//     What RBAC allows and refuses the engine's ServiceAccount:
//     rbac_test.go. Both run on the shared control plane of e2e/controlplane,
//     which is the harness only and holds no test of the engine. The
//     cluster's DNS there is a real CoreDNS serving kube-system's CoreDNS
//     ConfigMaps as the kubelet would mount them
//     (sccoperator.StartClusterDNS): the engine's handover wait asks it
//     over DNS and rancher/scc-operator reaches the update server through a
//     CONNECT proxy that asks it, so a name resolves only where CoreDNS
//     itself reads the engine's entry. Real pods, the kubelet's volume sync
//     and CoreDNS's reload plugin are the kind tier's.
//   - The image, the manifests as a user applies them, the fake cloud as a
//     pod: e2e/kind/kind_test.go (build tag e2e, make e2e-kind).
//   - A case that needs a cluster of its own (the chart owns objects the
//     overlay applies): controlplane.Start gives it a plane, and the case
//     calls t.Parallel, so that go test runs such cases side by side once
//     the shared plane's cases are done. Most of their time is spent
//     waiting (the Job controller's pod backoff, a hook's deadline), and
//     nothing is shared between planes.
//   - The documentation's promises (every test docs/RELIABILITY.md cites
//     exists): docs_test.go.
//
// Which tier proves what. The process kubelet (e2e/harness,
// Cluster.StartKubelet) runs a Job's pod as a process with the pod's
// environment, token and exit code; it is where the cases that need many
// runs or a fault a pod cannot be given live: RBAC refusals, the Lease
// between runs, every recovery path of a Failed Registration (503, reset,
// 401, the operator stopped, three in a row; make e2e-long, LONG_TESTS),
// status in each state, both Kubernetes versions (make e2e-lts runs
// LTS_TESTS on the oldest supported one), both operator revisions, the
// chart's workload-identity install. The
// kind tier proves once, with real pods, what a process cannot: the image
// and its user, the CronJob controller making the Job, podFailurePolicy
// ending it on the real kubelet's exit code, the kubelet syncing CoreDNS's
// ConfigMap volume and the reload plugin loading it, the operator as a
// pod, the chart as the Marketplace installs it, AKS's CoreDNS layout, and
// one recovery end to end.
//
// What only kind proves is not repeated here: a permanent failure ending
// the Job through podFailurePolicy after one pod is kind's "wrong plan
// fails the Job at once" (TestStatus still runs such a Job through the
// process kubelet, for the status it leaves). What the process tier
// proves beyond kind stays in both: a manual Job runs without the startup
// sleep and carries the CronJob's code (TestCluster); the operator
// registers from the Job's Secret on both versions and both revisions
// (TestOperator).
package e2e
