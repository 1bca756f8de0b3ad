package job

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/status"
	"github.com/rancher/registration-engine/providers/azure"
	"github.com/rancher/registration-engine/providers/failure"
)

// Errors RunStatus returns for the verdicts that are not "registered", so
// that ExitCode maps them to 1 and 2.
var (
	// ErrNotYetRegistered: a run or the operator is still working (exit 1).
	ErrNotYetRegistered = errors.New("status: not registered yet")
	// ErrActionNeeded: a person must act, or look with more access (exit 2).
	ErrActionNeeded = failure.Permanent(errors.New("status: action needed"))
)

// statusExits are the exit codes status hands job/status: its own for
// "not yet" and "action needed", and the engine's permanent one, which it
// reads in the Job's pods.
var statusExits = status.ExitCodes{NotYet: ExitTransient, ActionNeeded: ExitPermanent, EnginePermanent: ExitPermanent}

// RunStatus is `registration-engine status`: it reads, with the caller's
// own credentials and without writing anything, every object the
// registration depends on, and prints the verdict first, then the
// evidence. It returns nil when the cluster is registered,
// ErrNotYetRegistered (exit 1) or ErrActionNeeded (exit 2); any other
// error (a flag, a file, no cluster to reach) is printed on stderr.
func RunStatus(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := runStatus(ctx, args, getenv, stdout, stderr)
	printProblem(stderr, err, ErrNotYetRegistered, ErrActionNeeded)
	return err
}

func runStatus(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
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
	namespace := fs.String("namespace", kube.Namespace, "namespace of the engine's CronJob, Lease and Secret")
	fs.StringVar(namespace, "n", kube.Namespace, "shorthand for --namespace")
	output := fs.String("o", "text", "output: text or json")
	roots := fs.String("attestation-roots", getenv("ATTESTATION_ROOTS_FILE"), "PEM trust anchors for instanceData instead of the pinned Azure roots (ATTESTATION_ROOTS_FILE)")
	inters := fs.String("intermediates", "", "PEM intermediates for instanceData's chain (it is checked offline)")
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
	inspect := azure.InspectOptions{Offline: true}
	if err := readTrust(&inspect, *roots, *inters); err != nil {
		return failure.Permanent(fmt.Errorf("status: %w", err))
	}
	cfg, err := kube.WorkstationConfig(*kubeconfig, *kubeContext)
	var reader *kube.Reader
	if err == nil {
		cfg.UserAgent = "registration-engine-status/" + Version
		reader, err = kube.NewReader(cfg)
	}
	if err != nil {
		// Still a verdict, last line and exit code as ever: a person (or a
		// script) reads the verdict line, not client-go's advice.
		v := status.NoCluster(err, *kubeconfig, getenv("KUBECONFIG"), statusExits)
		if *output == "json" {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			err = enc.Encode(struct {
				Verdict status.Verdict `json:"verdict"`
			}{v})
		} else {
			_, err = fmt.Fprintln(stdout, status.Printable(v.Line))
		}
		if err != nil {
			return err
		}
		return ErrActionNeeded
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	report := status.Gather(ctx, reader, status.Options{
		Namespace: *namespace,
		Exits:     statusExits,
		Inspect: func(ctx context.Context, doc []byte) (*azure.InspectReport, error) {
			opts := inspect
			opts.At = time.Now()
			return azure.Inspect(ctx, doc, opts)
		},
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
	case status.StateRegistered:
		return nil
	case status.StateNotYet:
		return ErrNotYetRegistered
	default:
		return ErrActionNeeded
	}
}
