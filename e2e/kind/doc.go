// Package kind is the kind tier of the end-to-end tests, the whole product
// in one cluster: the engine's image, its CronJob from
// manifests/overlays/e2e, the fake cloud as a pod, and rancher/scc-operator
// as a pod with the stand-in Rancher objects of e2e/sccoperator, in a kind
// cluster whose node image is built on this machine with no registry pull
// (host.sh, bins.sh, images.sh here). `make e2e-kind` builds
// everything and runs the tests, which carry the build tag e2e so that
// `go test ./...` never needs Docker. docs/development.md, "kind e2e", says what each
// step proves and what it costs.
package kind
