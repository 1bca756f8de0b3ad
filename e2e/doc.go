// Package e2e holds the end-to-end tests: the built registration-engine
// binary against the built fakecloud binary (always), against a real
// kube-apiserver (when the control-plane binaries are present; see
// e2e/controlplane), and in a kind cluster (build tag e2e).
package e2e
