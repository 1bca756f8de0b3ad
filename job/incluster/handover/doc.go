// Package handover decides when the operator's Secret may be written: only
// once the update server's name resolves, through the cluster's DNS, to the
// address the run mapped, and the update server answers TLS there with the
// certificate the Secret pins. rancher/scc-operator registers within seconds
// of seeing the Secret, and any failure at that step (no such host, a TLS
// error, a 4xx/5xx) leaves its Registration Failure=True until someone
// deletes scc-registration. CoreDNS takes from seconds to minutes to serve a
// new hosts entry, so the engine checks first what the operator is about to
// need, and writes nothing until it works.
package handover
