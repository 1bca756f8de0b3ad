// Package sccoperator runs the real rancher/scc-operator, the component that
// reads the Secret the engine writes and registers the cluster, as a process
// against a real control plane (e2e/controlplane), so tests can see what the
// operator makes of that Secret.
//
// The operator is built from source by e2e/scripts/scc-operator.sh (`make
// scc-operator`) into $SCC_OPERATOR_DIR/<commit>/operator; Binary finds it.
// Install puts into the plane what Rancher would (the CRDs and Settings the
// operator reads, the metrics Secret) and the operator's ServiceAccount with
// the least RBAC it runs with; Run starts it with a kubeconfig for that
// ServiceAccount and stops it with SIGTERM when the test ends. Registrations
// and Recorder read the operator's answer: the Registration's conditions,
// its activation and its failure message, every state it went through.
//
// The process tier has no pod network, so the operator cannot ask the
// cluster's DNS itself. ClusterDNS runs a real CoreDNS on kube-system's
// ConfigMaps (the engine's HANDOVER_DNS_SERVER asks it), and the operator
// reaches the update server under its real name through Proxy, an HTTP
// CONNECT proxy on loopback that it uses through HTTPS_PROXY (connect-ng's
// transport honours it): the proxy answers CONNECT <name>:443 by asking
// that CoreDNS (ClusterDNS.Route), or a fixed table (StaticRoute), and
// connecting to the address on the fake update server's port; it refuses
// everything else. TLS runs end to end between the operator and the fake,
// so the operator checks the certificate against the name exactly as in a
// cluster.
//
// Only one operator runs on a machine at a time: it binds :8080 hard-coded
// (and ignores the bind error, so a second one would run without its health
// endpoint), and two operators on one plane would fight over their leader
// Lease. Run holds a lock file for the operator's lifetime, which also
// orders operators started by different test binaries.
package sccoperator
