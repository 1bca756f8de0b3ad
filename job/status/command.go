package status

import (
	"cmp"
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
2 action needed or unknown (the address is no API server, cannot connect,
a read refused); with --wait, 124 when --timeout passed before a verdict
other than not yet. Right after an install:
  registration-engine status --wait

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
	timeout := fs.Duration("timeout", 0, fmt.Sprintf("bound on all reads together (default %s); with --wait, how long to wait for a verdict (default %s)", ReadTimeout, WaitTimeout))
	wait := fs.Bool("wait", false, "right after an install: ask again every --interval while the verdict is \"Not registered yet\" (a run, a retry or the operator still working), until another verdict or --timeout; exit "+fmt.Sprint(c.Exits.WaitTimeout)+" when it passes")
	interval := fs.Duration("interval", 10*time.Second, "with --wait, the pause between two looks")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return failure.Permanent(fmt.Errorf("status: %w", err))
	}
	if *output != "text" && *output != "json" {
		return failure.Permanent(fmt.Errorf("status: -o %q: want text or json", *output))
	}
	if *timeout < 0 || *interval <= 0 {
		return failure.Permanent(fmt.Errorf("status: --timeout %s, --interval %s: want a positive duration", *timeout, *interval))
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
		return c.verdictOnly(stdout, *output, NoCluster(err, *kubeconfig, getenv("KUBECONFIG"), c.Exits))
	}
	server := escape.Printable(cfg.Host)
	opts := Options{Namespace: *namespace, Exits: c.Exits, Inspect: inspect}
	// look is one pass: is the address an API server, then every read,
	// within the read bound.
	look := func(bound time.Duration) (*Report, bool) {
		ctx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		if v, bad := Reach(ctx, reader, server, c.Exits); bad {
			return &Report{Verdict: v}, true
		}
		return Gather(ctx, reader, opts), false
	}
	if !*wait {
		report, only := look(cmp.Or(*timeout, ReadTimeout))
		return c.write(stdout, *output, report, only)
	}
	return c.wait(ctx, look, cmp.Or(*timeout, WaitTimeout), *interval, *output, stdout, stderr)
}

// ReadTimeout bounds all of one look's reads together, WaitTimeout how
// long --wait waits by default: a first verdict takes minutes after an
// install, and Azure may take up to 30 minutes to propagate a new
// identity's role assignment, during which the verdict stays "Not
// registered yet" (waiting for Azure).
const (
	ReadTimeout = 30 * time.Second
	WaitTimeout = 30 * time.Minute
)

// wait looks every interval until the verdict is not StateNotYet, or until
// timeout has passed; each new "not yet" verdict goes to stderr as it
// comes, the last report to stdout. A look in progress when the time is up
// finishes, so that a verdict is never made of reads cut short.
func (c Command) wait(ctx context.Context, look func(time.Duration) (*Report, bool), timeout, interval time.Duration, output string, stdout, stderr io.Writer) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	start := time.Now()
	var last string
	for {
		report, only := look(ReadTimeout)
		if report.Verdict.State != StateNotYet {
			return c.write(stdout, output, report, only)
		}
		if line := report.Verdict.Line; line != last {
			fmt.Fprintf(stderr, "waiting (%s so far): %s\n", time.Since(start).Round(time.Second), escape.Printable(line))
			last = line
		}
		select {
		case <-ctx.Done():
			return errors.Join(c.write(stdout, output, report, only), context.Cause(ctx))
		case <-deadline.C:
			if err := c.write(stdout, output, report, only); err != nil && !errors.Is(err, ErrNotYetRegistered) {
				return err
			}
			return fmt.Errorf("%w: still not registered after %s (pass a longer --timeout to wait longer)", ErrWaitTimeout, timeout)
		case <-time.After(interval):
		}
	}
}

// verdictOnly prints v alone (there was nothing to read) and returns
// ErrActionNeeded.
func (c Command) verdictOnly(stdout io.Writer, output string, v Verdict) error {
	return c.write(stdout, output, &Report{Verdict: v}, true)
}

// write prints report (its verdict alone when only) as text or JSON and
// returns the error of its verdict's state.
func (c Command) write(stdout io.Writer, output string, report *Report, only bool) error {
	var err error
	switch {
	case only && output == "json":
		err = writeJSON(stdout, struct {
			Verdict Verdict `json:"verdict"`
		}{report.Verdict})
	case only:
		_, err = fmt.Fprintln(stdout, escape.Printable(report.Verdict.Line))
	case output == "json":
		err = report.WriteJSON(stdout)
	default:
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
