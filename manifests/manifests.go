// Package manifests holds the kustomize tree that installs the engine as a
// CronJob (base/, overlays/azure/, overlays/e2e/) and makes it available to
// Go tests: the real-control-plane and kind tests read the same files that
// users apply, so RBAC or security settings cannot drift between what is
// tested and what ships.
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
