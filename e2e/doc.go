// Package e2e holds the end-to-end tests: the built registration-engine
// binary against the built fakecloud binary (always), against a real
// kube-apiserver (when the control-plane binaries are present; see
// e2e/controlplane), and in a kind cluster (build tag e2e).
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
//     runEngine.
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
//   - The documentation's promises (every test docs/RELIABILITY.md cites
//     exists): docs_test.go.
//
// Which tier proves what. The process kubelet (cluster_test.go) runs a
// Job's pod as a process with the pod's environment, token and exit code;
// it is where the cases that need many runs or a fault a pod cannot be
// given live: RBAC refusals, the Lease between runs, every recovery path of
// a Failed Registration (503, reset, 401, the operator stopped, three in a
// row), status in each state, both Kubernetes versions (make test runs
// LTS_TESTS on the oldest supported one too), both operator revisions. The
// kind tier proves once, with real pods, what a process cannot: the image
// and its user, the CronJob controller making the Job, podFailurePolicy
// ending it, the kubelet syncing CoreDNS's ConfigMap volume and the reload
// plugin loading it, the operator as a pod, the chart as the Marketplace
// installs it, AKS's CoreDNS layout, and one recovery end to end. A case
// both tiers run (a Job that registers, the no-wait failure) stays in both:
// the process tier's copy runs on every make test and on both versions.
package e2e
