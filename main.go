// Command registration-engine registers a Rancher / SUSE Pay-As-You-Go
// deployment from the Azure Marketplace with SUSE's update infrastructure and
// writes the Secret rancher/scc-operator reads. It runs once and exits; see
// docs/troubleshoot.md for the exit codes.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/rancher/registration-engine/job"
)

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	go func() { <-sigs; cancel(job.ErrTerminated) }()

	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	cancel(nil)
	os.Exit(job.ExitCode(err))
}

// run is the whole program minus the process (signals and the exit code):
// it dispatches to a subcommand (status, attestation), or loads the
// configuration and runs the Job once. Its arguments, environment and streams are
// parameters so that nothing below main reads the process's own.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "attestation":
			return job.RunAttestation(ctx, args[1:], stdin, stdout, stderr)
		case "cleanup":
			return job.RunCleanup(ctx, args[1:], getenv, stderr)
		case "status":
			if f, ok := stdin.(*os.File); ok {
				stdout = job.AfterAttach(stdout, f, getenv)
			}
			return job.RunStatus(ctx, args[1:], getenv, stdout, stderr)
		}
		// A word that is no flag is a command, never the engine's run: a
		// typo (stauts) must not start a registration.
		if !strings.HasPrefix(args[0], "-") {
			return job.UnknownCommand(args[0], stderr)
		}
	}
	cfg, err := job.LoadConfig(args, getenv)
	if err != nil {
		job.ReportStartFailure(ctx, err, nil, getenv, stderr)
		return err
	}
	if cfg.ShowHelp {
		job.WriteHelp(stdout)
		return nil
	}
	if cfg.ShowVersion {
		fmt.Fprintln(stdout, "registration-engine", job.Version)
		return nil
	}
	log, secrets := job.NewLogger(stderr, cfg)
	klog.SetSlogLogger(log)
	log.Info("registration-engine starting", slog.String("version", job.Version), slog.Any("config", cfg))

	j, err := job.New(cfg, log, secrets, stdout)
	if err != nil {
		job.ReportStartFailure(ctx, err, log, getenv, stderr)
		return err
	}
	_, err = j.Run(ctx)
	return err
}
