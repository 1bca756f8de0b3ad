// Package job is the engine: one run, start to finish. main builds a Config
// (LoadConfig), assembles a Job from it (New) and calls Run once; Run takes
// the startup sleep and the Lease, executes the six phases in order, writes
// the Secret and returns an error whose class ExitCode turns into the exit
// code. It is also the command-line surface: the settings and their help,
// whether a run was started by the CronJob's schedule, and the
// subcommands `status` (is this cluster registered, and if not why) and
// `attestation inspect` (a support engineer's look at an attested
// document). Everything cloud-specific lives in
// providers; the region-server, update-server, Happy Eyeballs, Kubernetes
// and in-cluster DNS pieces live in subpackages.
package job
