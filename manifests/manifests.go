// Package manifests holds what installs the engine as a CronJob: the
// kustomize tree (base/, overlays/azure/, overlays/e2e/), the Helm chart
// (chart/registration-engine/) and the Azure Marketplace bundle's other
// parts (marketplace/). The real-control-plane and kind tests read the same
// files that users apply, so RBAC or security settings cannot drift between
// what is tested and what ships; this package's tests keep the chart's
// default rendering equal to overlays/azure.
//
// Nothing in here is compiled into the engine.
package manifests

import "embed"

// FS is base/ and overlays/ exactly as in the repository. Its files are
// kustomize inputs, not rendered manifests: a base file lacks the namespace
// its kustomization.yaml sets.
//
//go:embed base overlays
var FS embed.FS
