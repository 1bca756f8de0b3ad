// Package proxycheck decides, before the engine hands the Secret over,
// whether rancher/scc-operator's request to registrationUrl would go
// through an egress proxy.
//
// Since rancher/rancher #55445 the operator inherits Rancher's HTTP_PROXY,
// HTTPS_PROXY and NO_PROXY. A proxy resolves the update server's name in
// its own DNS, where it does not exist (or names another server than the
// one the engine checked and pinned in CoreDNS), so the operator's
// Registration fails, and keeps failing after every recovery. The engine
// cannot fix the operator's environment; it can decide, exactly as Go's
// net/http will in the operator (golang.org/x/net/http/httpproxy), and stop
// with a verdict naming the variable and the name it must carry, instead
// of writing a Secret that is bound to fail.
//
// Decide is pure; ReadOperatorEnv reads the operator's Deployment (one
// get, by name). Neither writes anything.
package proxycheck
