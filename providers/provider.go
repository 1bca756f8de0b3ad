// Package providers answers "where am I running, and can I prove it?". It
// detects the cloud (phase 1) and defines what a cloud must hand to the rest
// of the run after proving its identity (phase 2): the instance data the
// update server verifies and the region hint the region servers use.
//
// It never imports job: the engine depends on providers, not the other way
// round, so a provider can be tested without a Kubernetes client in sight.
package providers

import (
	"context"
	"errors"
	"flag"
	"io"
	"time"

	"github.com/rancher/registration-engine/internal/failure"
)

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

// DocumentCheck is a cloud's offline verification of the instance data a
// run wrote, as `registration-engine status` shows it.
type DocumentCheck struct {
	// Signature, Signer, Chain and Claims are each OK, FAILED or
	// UNAVAILABLE (the check could not be made offline): the signature over
	// the content, the signer's name, its chain to the cloud's roots, and
	// the signed claims the prover requires.
	Signature string `json:"signature,omitempty"`
	Signer    string `json:"signer,omitempty"`
	Chain     string `json:"chain,omitempty"`
	Claims    string `json:"claims,omitempty"`
	// Detail is the first failing check's detail, or the signer's name
	// when all hold.
	Detail string `json:"detail,omitempty"`
	// CreatedOn is when the document was signed, as it says.
	CreatedOn string `json:"createdOn,omitempty"`
}

// DocumentInspector checks the instance data its cloud's prover writes,
// outside a run: `registration-engine status` on the Secret's instanceData
// (Inspect, offline) and `registration-engine attestation inspect` on a
// document a customer sent (Command, with trust flags of its own).
type DocumentInspector interface {
	// AddFlags adds the trust settings to status's flags; getenv serves
	// their variables. ReadFlags then reads the files they name; its error
	// names the flag and the file.
	AddFlags(fs *flag.FlagSet, getenv func(string) string)
	ReadFlags() error
	// Inspect verifies instanceData offline as at at. Its error says the
	// input is no document of this cloud at all; a forged or broken one is
	// a DocumentCheck whose states say so.
	Inspect(ctx context.Context, instanceData []byte, at time.Time) (DocumentCheck, error)
	// Command is `registration-engine attestation inspect`, args starting
	// at "inspect". A document that did not verify returns ErrNotVerified
	// after the report, which says why.
	Command(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

// ErrNotVerified is `attestation inspect`'s error when a document was read
// but did not verify; its report, already written, says why (permanent).
var ErrNotVerified = failure.Permanent(errors.New("attestation: the document did not verify"))
