package status

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/escape"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/providers"
)

// Command is `registration-engine status` with what it receives from the
// binary: its version (for the User-Agent) and the exit codes, which
// package job owns.
type Command struct {
	Version string
	Exits   ExitCodes
	// Inspector checks the Secret's instanceData offline (the proving
	// cloud's; its flags are status's); nil skips the check.
	Inspector providers.DocumentInspector
}

// Run is `registration-engine status`: it reads, with the caller's own
// credentials and without writing anything, every object the
// registration depends on, and prints the verdict first, then the
// evidence. It returns nil when the cluster is registered,
// ErrNotYetRegistered or ErrActionNeeded; any other error (a flag, a
// file) is permanent and the caller's to print. getenv serves
// ATTESTATION_ROOTS_FILE and KUBECONFIG.
func (c Command) Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: registration-engine status [flags]

Tells whether this cluster is registered, and if not, the first broken link
and what to do. Read-only; runs with your own kubeconfig (KUBECONFIG,
~/.kube/config) or in a pod with its ServiceAccount.
Exit 0 registered, 1 not yet (a run or the operator is still working),
2 action needed.

Flags:
`)
		fs.PrintDefaults()
	}
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: KUBECONFIG, then ~/.kube/config, then in-cluster)")
	kubeContext := fs.String("context", "", "kubeconfig context (default: the current one)")
	namespace := fs.String("namespace", operator.Namespace, "namespace of the engine's CronJob, Lease and Secret")
	fs.StringVar(namespace, "n", operator.Namespace, "shorthand for --namespace")
	output := fs.String("o", "text", "output: text or json")
	if c.Inspector != nil {
		c.Inspector.AddFlags(fs, getenv)
	}
	timeout := fs.Duration("timeout", 30*time.Second, "bound on all reads together")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return failure.Permanent(fmt.Errorf("status: %w", err))
	}
	if *output != "text" && *output != "json" {
		return failure.Permanent(fmt.Errorf("status: -o %q: want text or json", *output))
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return failure.Permanent(fmt.Errorf("status: unexpected argument %q", fs.Arg(0)))
	}
	var inspect func(ctx context.Context, doc []byte) (providers.DocumentCheck, error)
	if c.Inspector != nil {
		if err := c.Inspector.ReadFlags(); err != nil {
			return failure.Permanent(fmt.Errorf("status: %w", err))
		}
		inspect = func(ctx context.Context, doc []byte) (providers.DocumentCheck, error) {
			return c.Inspector.Inspect(ctx, doc, time.Now())
		}
	}
	cfg, err := kube.WorkstationConfig(*kubeconfig, *kubeContext)
	var reader *kube.Reader
	if err == nil {
		cfg.UserAgent = "registration-engine-status/" + c.Version
		reader, err = kube.NewReader(cfg)
	}
	if err != nil {
		// Still a verdict, last line and exit code as ever: a person (or a
		// script) reads the verdict line, not client-go's advice.
		v := NoCluster(err, *kubeconfig, getenv("KUBECONFIG"), c.Exits)
		if *output == "json" {
			err = writeJSON(stdout, struct {
				Verdict Verdict `json:"verdict"`
			}{v})
		} else {
			_, err = fmt.Fprintln(stdout, escape.Printable(v.Line))
		}
		if err != nil {
			return err
		}
		return ErrActionNeeded
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	report := Gather(ctx, reader, Options{
		Namespace: *namespace,
		Exits:     c.Exits,
		Inspect:   inspect,
	})
	if *output == "json" {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	switch report.Verdict.State {
	case StateRegistered:
		return nil
	case StateNotYet:
		return ErrNotYetRegistered
	default:
		return ErrActionNeeded
	}
}
