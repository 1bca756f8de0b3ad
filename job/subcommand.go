package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/cleanup"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/status"
	"github.com/rancher/registration-engine/providers"
)

// The subcommands live with their packages; this file hands them what
// only the binary knows (its version, its exit codes) and prints what
// stopped them.

// statusExits are the exit codes status hands job/status: its own for
// "not yet" and "action needed", and the engine's permanent one, which it
// reads in the Job's pods. ExitCode maps status.ErrNotYetRegistered and
// status.ErrActionNeeded to the first two, status.ErrWaitTimeout (--wait)
// to ExitDeadline, the code timeout(1) uses.
var statusExits = status.ExitCodes{NotYet: ExitTransient, ActionNeeded: ExitPermanent, WaitTimeout: ExitDeadline, EnginePermanent: ExitPermanent}

// RunStatus is `registration-engine status` (job/status): it returns nil
// when the cluster is registered, status.ErrNotYetRegistered (exit 1) or
// status.ErrActionNeeded (exit 2), status.ErrWaitTimeout (exit 124, with
// --wait, printed on stderr); any other error (a flag, a file) is
// printed on stderr.
func RunStatus(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := status.Command{Version: Version, Exits: statusExits, Inspector: documentInspector()}.Run(ctx, args, getenv, stdout, stderr)
	printProblem(stderr, err, status.ErrNotYetRegistered, status.ErrActionNeeded)
	return err
}

// RunAttestation is `registration-engine attestation inspect`, the
// proving cloud's (documentInspector). A problem that stops it is printed
// on stderr; a document that does not verify returns
// providers.ErrNotVerified after the report, which says why.
func RunAttestation(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	err := documentInspector().Command(ctx, args, stdin, stdout, stderr)
	printProblem(stderr, err, providers.ErrNotVerified)
	return err
}

// RunCleanup is `registration-engine cleanup` (job/cleanup), handed the
// API server's client options from the engine's variables: unlike the
// others it always exits 0, since it runs as the chart's post-delete hook
// and a failed hook makes helm uninstall exit 1 (the release gone all the
// same).
func RunCleanup(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	options := func(kubeconfig string) kube.ClientOptions { return envClientOptions(getenv, kubeconfig, "cleanup") }
	return cleanup.Command{ClientOptions: options}.Run(ctx, args, getenv, stderr)
}

// envClientOptions are the API server's client options from the engine's
// own variables, for the commands that run before (or without) a loaded
// configuration: the cleanup and a run that cannot start. role names the
// command in the User-Agent.
func envClientOptions(getenv func(string) string, kubeconfig, role string) kube.ClientOptions {
	return kube.ClientOptions{
		Kubeconfig: kubeconfig,
		Host:       getenv("KUBERNETES_SERVICE_HOST"),
		Port:       getenv("KUBERNETES_SERVICE_PORT"),
		TokenFile:  getenv("KUBERNETES_TOKEN"),
		CACert:     getenv("KUBERNETES_CA_CERT"),
		UserAgent:  strings.TrimSpace("registration-engine/" + Version + " " + role),
	}
}

// ErrUnknownCommand is the usage error of a command the binary does not
// have (permanent: exit 2, like a bad flag).
var ErrUnknownCommand = errors.New("unknown command")

// Commands are the binary's commands, as UnknownCommand lists them.
const Commands = "status, attestation inspect, cleanup (with none, the engine runs once; see --help)"

// UnknownCommand is the usage error of `registration-engine NAME` for a
// NAME that is no command: printed on stderr with the commands there are,
// returned for the exit code. Nothing is loaded, nothing is contacted.
func UnknownCommand(name string, stderr io.Writer) error {
	err := failure.Permanent(fmt.Errorf("%w %q: the commands are %s", ErrUnknownCommand, name, Commands))
	printProblem(stderr, err)
	return err
}

// printProblem writes err on stderr for the person at the terminal, unless
// it is nil or one of verdicts, whose report on stdout already says it: a
// subcommand's exit code alone does not say what to fix.
func printProblem(stderr io.Writer, err error, verdicts ...error) {
	if err == nil {
		return
	}
	for _, v := range verdicts {
		if errors.Is(err, v) {
			return
		}
	}
	fmt.Fprintf(stderr, "registration-engine: %v\n", err)
}
