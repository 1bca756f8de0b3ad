package job

import (
	"errors"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/status"
)

// Exit codes of the binary. The CronJob's podFailurePolicy turns
// ExitPermanent into a failed Job without retries; every other non-zero code
// lets the Job's backoffLimit retry.
const (
	// ExitOK: registered, already current, or rightly skipped (another run
	// holds the Lease).
	ExitOK = 0
	// ExitTransient: a peer was unreachable, slow or throttling; a retry may
	// succeed.
	ExitTransient = 1
	// ExitPermanent: bad configuration, no supported cloud, a Marketplace plan
	// mismatch, a forged document, RBAC refusing us; a retry cannot succeed.
	// Also a run whose Registration rancher/scc-operator marked Failed
	// (failedPhase "operator") for a cause a retry with the same values
	// cannot fix, or whose one recovery failed again: the Job fails where
	// `kubectl get jobs` shows it, and the next attempt is the next
	// schedule's, not a Job retry seconds later.
	ExitPermanent = 2
	// ExitDeadline: the run deadline passed before the run finished.
	ExitDeadline = 124
	// ExitTerminated: SIGTERM or SIGINT (128 + 15, as shells report it).
	ExitTerminated = 143
)

// ErrTerminated is the cancellation cause main sets when a signal arrives.
var ErrTerminated = errors.New("terminated by signal")

// ErrDeadline is the cancellation cause of the run deadline.
var ErrDeadline = errors.New("run deadline exceeded")

// ExitCode maps the error a run returned to the process exit code. It is the
// only place that decides; main calls os.Exit with its answer.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrTerminated):
		return ExitTerminated
	case errors.Is(err, ErrDeadline), errors.Is(err, status.ErrWaitTimeout):
		return ExitDeadline
	case failure.IsPermanent(err):
		return ExitPermanent
	default:
		return ExitTransient
	}
}
