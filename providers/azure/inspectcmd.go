package azure

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/providers"
)

// InspectCommand is `registration-engine attestation inspect`, args
// starting at "inspect": the support engineer's view of an attested
// document a customer sent. It parses its flags, reads the document from
// a file or stdin, and writes Inspect's report on stdout; a problem that
// stops it (a flag, a file, not a document) is its error, permanent, for
// the caller to print. A document that does not verify returns
// providers.ErrNotVerified after the report.
func InspectCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	usage := func() {
		fmt.Fprint(stderr, `Usage: registration-engine attestation inspect [flags] FILE|-

Reads an Azure attested document (the IMDS JSON {"encoding":"pkcs7","signature":...},
the bare base64 PKCS#7, or an instanceData <document>...</document>), prints the
signed JSON and four separate verdicts: the signature over the content, the
signer's name, the certificate chain at the given time, and the signed claims
the engine requires (subscriptionId and vmId present, createdOn not ahead of
that time). Exit 0 only when all four hold.

Flags:
`)
	}
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
		usage() // asked for: exit 0, as `attestation inspect --help` does
		return nil
	}
	if len(args) == 0 || args[0] != "inspect" {
		usage()
		return failure.Permanent(errors.New("attestation: want the subcommand inspect"))
	}
	fs := flag.NewFlagSet("attestation inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(); fs.PrintDefaults() }
	at := fs.String("at", "", "check the chain at this time (RFC 3339), e.g. for an old document; default now")
	roots := fs.String("roots", "", "PEM file of trust anchors instead of the pinned Azure roots")
	inters := fs.String("intermediates", "", "PEM file of intermediate certificates to use")
	offline := fs.Bool("offline", false, "never fetch intermediates from the AIA URL")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return failure.Permanent(fmt.Errorf("attestation: %w", err))
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return failure.Permanent(errors.New("attestation: want exactly one FILE, or - for standard input"))
	}
	opts := InspectOptions{At: time.Now(), Offline: *offline}
	if *at != "" {
		t, err := time.Parse(time.RFC3339, *at)
		if err != nil {
			return failure.Permanent(fmt.Errorf("attestation: --at %q: want RFC 3339 such as 2024-05-01T12:00:00Z", *at))
		}
		opts.At = t
	}
	if err := opts.ReadTrust(*roots, *inters); err != nil {
		return failure.Permanent(fmt.Errorf("attestation: %w", err))
	}
	var input []byte
	var err error
	if name := fs.Arg(0); name == "-" {
		input, err = io.ReadAll(io.LimitReader(stdin, maxInspectBytes))
	} else {
		input, err = readLimited(name)
	}
	if err != nil {
		return failure.Permanent(fmt.Errorf("attestation: %w", err))
	}
	report, err := Inspect(ctx, input, opts)
	if err != nil {
		return failure.Permanent(fmt.Errorf("attestation: %w", err))
	}
	if err := report.WriteText(stdout); err != nil {
		return err
	}
	if !report.OK() {
		return providers.ErrNotVerified
	}
	return nil
}

// maxInspectBytes bounds what the commands read of a document or a PEM
// file.
const maxInspectBytes = 1 << 20

// ReadTrust fills the trust anchors and intermediates from the PEM files
// rootsFile and intersFile, each skipped when empty; an error names the
// file. Both commands that check an attested document (attestation
// inspect, status) take these two files.
func (o *InspectOptions) ReadTrust(rootsFile, intersFile string) error {
	var err error
	if rootsFile != "" {
		if o.Roots, err = ReadCertificates(rootsFile); err != nil {
			return err
		}
	}
	if intersFile != "" {
		if o.Intermediates, err = ReadCertificates(intersFile); err != nil {
			return err
		}
	}
	return nil
}

func readLimited(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxInspectBytes))
}

// ReadCertificates reads the PEM certificates of the file name (at most
// 1 MiB of it); an error names the file. The trust anchors and
// intermediates of both commands, and ATTESTATION_ROOTS_FILE, are read
// with it.
func ReadCertificates(name string) ([]*x509.Certificate, error) {
	data, err := readLimited(name)
	if err != nil {
		return nil, err // an *fs.PathError, which names the file
	}
	certs, err := ParsePEMCertificates(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return certs, nil
}
