// Package operator is everything the engine knows about rancher/scc-operator,
// the consumer of the Secret phase 6 writes: the Secret's contract (its
// names and keys, Values, contract.go), the rules for writing it
// (SecretStore: write only on change, keep a code the Secret holds, never
// write over one being deleted or one another tool writes, recreate it for a
// recovery), how to read its answer (Watch:
// the Secret's labels lead to the Registration, whose conditions say active,
// failed or pending), what a failure means (Classify: can another attempt
// with the same values succeed), whether it is running (LeaderLease), and
// the run's answer to a Registration it failed (Recovery: delete and write
// the Secret afresh, as the operator asks a person to, for a cause a retry
// can fix, at most MaxRecoveries times in a row, remembered on the engine's
// Lease).
//
// Package job calls it once per run, after the write (Step.Run); job/status
// asks it what the operator did (Judge), what a run will do about it
// (Decide) and, when the run leaves it to a person, why and what to do
// (Decision.Remedy), so the run and status never disagree. Each rule's
// words for --help and the docs live beside the rule (RecoveryLimit,
// RecoverableCauses, LivenessRule), held to it by tests. job/kube is the client it
// reads and writes through: this package holds no Kubernetes plumbing of its
// own, only what the objects mean to the operator.
//
// The operator never retries a Failed Registration; it asks a person to
// delete scc-registration, let it clean up, and create it again. A run does
// that itself only when this very run has shown the operator can now
// succeed: phases 1–5 passed and the handover check found the name
// resolving in the cluster and the update server answering TLS with the
// pinned certificate. For any other cause, or with recovery off, it fails
// the run with the remedy and deletes nothing. Package job owns the exit
// codes: this package marks what no retry can fix permanent
// (failure.Permanent) and leaves the rest transient.
//
// A second consumer of the same values (another operator reading a Secret
// of its own) gets a package beside this one with the same shape: its
// contract and store, a watch of its answer and a Step that package job
// calls after the write.
package operator
