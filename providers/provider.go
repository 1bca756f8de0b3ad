// Package providers answers "where am I running, and can I prove it?". It
// detects the cloud (phase 1) and defines what a cloud must hand to the rest
// of the run after proving its identity (phase 2): the instance data the
// update server verifies and the region hint the region servers use.
//
// It never imports job: the engine depends on providers, not the other way
// round, so a provider can be tested without a Kubernetes client in sight.
package providers

import "context"

// Cloud names a supported cloud. The zero value means "none found".
type Cloud string

// The clouds detection knows. Only Azure can prove its identity today; the
// others are detected so that the error says which cloud this is.
const (
	None  Cloud = ""
	Azure Cloud = "azure"
	GCP   Cloud = "gcp"
	AWS   Cloud = "aws"
)

// Evidence is what a cloud proves about this deployment. InstanceData is
// sensitive (it carries a signed identity document) and must never be logged.
type Evidence struct {
	Cloud Cloud
	// InstanceData is the `<document>…</document>` string the update server
	// verifies; it becomes the Secret's instanceData key.
	InstanceData string
	// RegionHint is the lower-case cloud region ("westeurope"), sent to the
	// region servers as regionHint; empty when unknown.
	RegionHint string
	// Secrets are the parts of the evidence that must never appear in a
	// log, an Event or an error, besides InstanceData itself: each cloud
	// knows its document's shape (Azure: the PKCS#7 signature alone, which
	// a peer that re-serializes the document still quotes verbatim).
	Secrets []string
}

// Prover proves the identity of one cloud (phase 2). It returns an error
// marked permanent (see package failure) when another attempt cannot succeed,
// such as a Marketplace plan mismatch or a forged document.
type Prover interface {
	Prove(ctx context.Context) (*Evidence, error)
}
