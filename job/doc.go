// Package job is the engine: one run, start to finish. main builds a Config
// (LoadConfig), assembles a Job from it (New) and calls Run once; Run
// returns an error whose class ExitCode turns into the exit code.
//
// Run reads as the design card's table of contents, each phase handing its
// value on to the next (job.go):
//
//	startup sleep, Lease    job/kube (Lease)
//	1 detect                providers (Detector: DMI, then the metadata servers)
//	2 prove                 providers/<cloud>, chosen in provers.go
//	3 load-config           job/regionconfig, read and checked at start
//	4 find-update-server    job/smt, whose health check races the two
//	5 race-addresses          address families (job/happyeyeballs)
//	6 write-secret          job/incluster maps the name in the cluster's DNS
//	                          (job/incluster/coredns) and waits for the handover
//	                          (job/incluster/handover); job/operator's
//	                          SecretStore writes the Secret
//	  operator step         job/operator: what rancher/scc-operator made of
//	                          it, and the recovery of a Registration it failed
//
// Phases 3 and 5 do no work of their own in a run (LoadConfig and phase 4's
// race did it); their log lines say which step did.
//
// Where a change goes:
//   - a new cloud: providers/<cloud>/ (detection, a Config with Validate, a
//     Prover that reports which of its evidence is secret, a
//     DocumentInspector for status and attestation inspect), its line in
//     provers.go (prover and inspector together), its Config's field and
//     Validate call in config.go, its settings in settings.go.
//   - a new consumer (another operator reading the same values from a
//     Secret of its own): a package beside job/operator holding its
//     contract (the Secret's names and keys, its Values, a store with the
//     write rules) and its answer (a watch and a Step); assemble.go builds
//     its store and Step, job.go calls the Step after the write. job/kube,
//     the Kubernetes client, stays as it is.
//   - a new setting: settings.go (name, variables, default, help), held
//     whole in the owning package's Config and checked by its Validate.
//
// The root package only orchestrates and holds the command-line surface:
// Config and its settings table (config.go; settings.go, the table, with
// parse.go's parsers; load.go, which fills a Config from flags, variables
// and defaults; help.go); the Secret type that keeps codes out of logs;
// the dry-run and file outputs; and the dispatch of the subcommands
// (subcommand.go), which live with their packages: `status` (job/status),
// `cleanup` (job/cleanup) and `attestation inspect` (the proving cloud's
// DocumentInspector), handed the version, the exit codes, the inspector
// and the API server's client options from here.
package job
