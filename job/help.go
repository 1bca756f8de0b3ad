package job

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteHelp documents every flag with its environment variables and default.
func WriteHelp(w io.Writer) {
	fmt.Fprint(w, `registration-engine registers a Rancher / SUSE Pay-As-You-Go deployment from the
Azure Marketplace with SUSE's update infrastructure and writes the Secret that
rancher/scc-operator reads. It runs once and exits; a CronJob runs it.

Usage:
  registration-engine [flags]
  registration-engine status [--kubeconfig FILE] [--context NAME] [-n NAMESPACE] [-o text|json] [--wait [--timeout D]]
  registration-engine attestation inspect [--at RFC3339] [--roots PEM] [--intermediates PEM] [--offline] FILE|-
  registration-engine cleanup [--kubeconfig FILE]   (the chart's uninstall hook: removes the
      engine's CoreDNS entry and its Lease; always exits 0, logs what it could not do)

Every flag can also be set by the environment variable(s) beside it; a flag
wins over the environment, the environment over the default.
`)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, s := range settings {
		if s.flag == "" {
			fmt.Fprintf(tw, "\n%s:\n", s.group)
			continue
		}
		def := ""
		if s.def != "" {
			def = " (default " + s.def + ")"
		}
		fmt.Fprintf(tw, "  --%s\t%s\t%s%s\n", s.flag, strings.Join(s.envs, " | "), s.help, def)
	}
	fmt.Fprintf(tw, "\n  --help\t\tshow this help\n  --version\t\tprint the version\n")
	_ = tw.Flush()
	fmt.Fprintf(w, "\nExit codes: %d registered or rightly skipped, %d transient failure (the Job retries),\n%d permanent failure, or a Registration rancher/scc-operator marked Failed (the Job fails at once),\n%d run deadline exceeded, %d terminated.\n",
		ExitOK, ExitTransient, ExitPermanent, ExitDeadline, ExitTerminated)
}
