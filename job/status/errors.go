package status

import (
	"errors"

	"github.com/rancher/registration-engine/internal/failure"
)

// Errors Command.Run returns for the verdicts that are not "registered";
// the command's caller maps their class to ExitCodes.NotYet and
// ExitCodes.ActionNeeded.
var (
	// ErrNotYetRegistered: a run or the operator is still working
	// (transient).
	ErrNotYetRegistered = errors.New("status: not registered yet")
	// ErrActionNeeded: a person must act, or look with more access
	// (permanent).
	ErrActionNeeded = failure.Permanent(errors.New("status: action needed"))
	// ErrWaitTimeout: --wait's --timeout passed while the verdict was
	// still "not yet"; the caller maps it to ExitCodes.WaitTimeout.
	ErrWaitTimeout = errors.New("status: --wait timed out")
)
