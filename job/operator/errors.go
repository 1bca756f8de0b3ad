package operator

import "errors"

var (
	// ErrOperatorFailed means rancher/scc-operator marked the Registration
	// made from our Secret Failed. Permanent when nothing this run can do
	// helps (a cause that needs a person, a recovery that failed again,
	// three in a row); transient when the recovery could not start (the
	// operator not running, the record not written, the Secret changed
	// meanwhile).
	ErrOperatorFailed = errors.New("rancher/scc-operator failed the registration")

	// ErrOperatorNotRunning means rancher/scc-operator's Lease is not held,
	// or not renewed recently: no operator is running to release the
	// Secret's finalizer, so a recovery must not delete the Secret.
	ErrOperatorNotRunning = errors.New("rancher/scc-operator is not running")
)
