package azure

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/rancher/registration-engine/providers"
)

// DocumentInspector is Azure's providers.DocumentInspector: status's
// offline check of the Secret's instanceData (against the pinned roots, or
// ATTESTATION_ROOTS_FILE's, never fetching an intermediate), and
// `attestation inspect` (InspectCommand).
type DocumentInspector struct {
	rootsFile, intersFile string
	opts                  InspectOptions
}

var _ providers.DocumentInspector = (*DocumentInspector)(nil)

// AddFlags adds --attestation-roots (ATTESTATION_ROOTS_FILE) and
// --intermediates.
func (d *DocumentInspector) AddFlags(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&d.rootsFile, "attestation-roots", getenv("ATTESTATION_ROOTS_FILE"), "PEM trust anchors for instanceData instead of the pinned Azure roots (ATTESTATION_ROOTS_FILE)")
	fs.StringVar(&d.intersFile, "intermediates", "", "PEM intermediates for instanceData's chain (it is checked offline)")
}

// ReadFlags reads the files the flags name; an error names the flag and
// the file.
func (d *DocumentInspector) ReadFlags() error {
	d.opts = InspectOptions{}
	if err := d.opts.ReadTrust(d.rootsFile, ""); err != nil {
		return fmt.Errorf("--attestation-roots: %w", err)
	}
	if err := d.opts.ReadTrust("", d.intersFile); err != nil {
		return fmt.Errorf("--intermediates: %w", err)
	}
	return nil
}

// Inspect verifies instanceData as at at (Inspect), offline: status never
// fetches an intermediate.
func (d *DocumentInspector) Inspect(ctx context.Context, instanceData []byte, at time.Time) (providers.DocumentCheck, error) {
	opts := d.opts
	opts.Offline, opts.At = true, at
	rep, err := Inspect(ctx, instanceData, opts)
	if err != nil {
		return providers.DocumentCheck{}, err
	}
	return rep.Check(), nil
}

// Command is `registration-engine attestation inspect` (InspectCommand).
func (d *DocumentInspector) Command(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return InspectCommand(ctx, args, stdin, stdout, stderr)
}

// Check is the report as status shows it: each verdict's state, the first
// failing verdict's detail (the signer's name when all hold), and the
// signed createdOn.
func (r *InspectReport) Check() providers.DocumentCheck {
	c := providers.DocumentCheck{Signature: r.Signature.State(), Signer: r.Signer.State(), Chain: r.Chain.State(), Claims: r.Claims.State()}
	for _, v := range []Verdict{r.Signature, r.Signer, r.Chain, r.Claims} {
		if !v.OK {
			c.Detail = v.Detail
			break
		}
	}
	if c.Detail == "" {
		c.Detail = r.Signer.Detail
	}
	var content struct {
		TimeStamp struct {
			CreatedOn string `json:"createdOn"`
		} `json:"timeStamp"`
	}
	if json.Unmarshal(r.Content, &content) == nil {
		c.CreatedOn = content.TimeStamp.CreatedOn
	}
	return c
}
