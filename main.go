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
	if len(args) > 0 && args[0] == "attestation" {
		return job.RunAttestation(ctx, args[1:], stdin, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "cleanup" {
		return job.RunCleanup(ctx, args[1:], getenv, stderr)
	}
	if len(args) > 0 && args[0] == "status" {
		return job.RunStatus(ctx, args[1:], getenv, stdout, stderr)
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
