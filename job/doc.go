// Package job is the engine: one run, start to finish. main builds a Config
// (LoadConfig), assembles a Job from it (New) and calls Run once. Run is
// the run's table of contents: the startup sleep, the Lease, then the
// seed's six phases, each one call into the package that does its work —
// detect (providers), prove (providers/azure), load-config (the
// regionserverclnt.cfg LoadConfig read and checked at start,
// job/regionconfig), find-update-server (job/smt, whose health check races
// the two address families through job/happyeyeballs), race-addresses (the
// address that race reached), write-secret (job/incluster maps the name in
// CoreDNS and waits for the handover; job/kube writes the Secret) — then
// the operator step: what rancher/scc-operator made of it (job/kube) and,
// for a Registration it failed, job/recovery's answer. It returns an
// error whose class ExitCode turns into the exit code.
//
// The root package only orchestrates and holds the command-line surface:
// Config and its settings table (config.go, settings.go, parse.go,
// help.go), where each package's own settings are held whole
// (azure.Config, smt.Config, incluster.Config, recovery.Config) and
// checked by that package's Validate; the Secret type that keeps codes
// out of logs; the dry-run and file outputs; and the dispatch of the
// subcommands, which live with their packages: `status` (job/status) and
// `attestation inspect` (providers/azure), handed the version and the exit
// codes from here.
package job
