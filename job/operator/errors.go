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

	// ErrSecretType means a Secret of the right name exists with a type
	// other than Opaque. A Secret's type is immutable, so nothing but
	// deleting it helps. Permanent.
	ErrSecretType = errors.New("secret has the wrong type")

	// ErrNoRegCode means no registration code is configured and the Secret
	// holds none either: a first install without one. Nothing is written,
	// since rancher/scc-operator refuses online registration without a
	// code. Permanent: only the configuration can supply it.
	ErrNoRegCode = errors.New("no registration code")

	// ErrSecretTerminating means the Secret was deleted but its finalizers
	// (rancher/scc-operator's) still hold it. Permanent: nothing is written
	// over it, since an apply to a Secret being deleted is lost with it.
	ErrSecretTerminating = errors.New("the registration secret is being deleted")

	// ErrSecretOtherWriter means another tool writes the registration
	// Secret: a Helm release owns it (Rancher's own chart creates it when
	// registration.enabled is set), or a field manager that is neither the
	// engine, rancher/scc-operator, a person with kubectl nor SUSE's Python
	// engine owns its data. Two writers overwrite each other, and each
	// change of the code or URL makes the operator register afresh, so the
	// engine writes nothing. Permanent: a person must choose one writer.
	ErrSecretOtherWriter = errors.New("another tool writes the registration secret")

	// ErrSecretDeleted means the Secret the engine's last successful run
	// left in place is gone and nothing has replaced it yet: someone
	// deleted it since. Rancher's registration page deletes it before it
	// creates its own with the code a person typed, so recreating it in
	// the same run would take the person's place (their create then fails
	// with AlreadyExists). Not permanent: the run writes nothing and exits
	// 1; the Job's retry, seconds later, writes it afresh if it is still
	// absent (its record is of a failed run), or finds the person's.
	ErrSecretDeleted = errors.New("the registration secret was deleted since the last run")

	// ErrSecretChanged means the Secret changed between the read a
	// recovery was decided on and its delete: nothing was deleted. Not
	// permanent: the next run reads afresh.
	ErrSecretChanged = errors.New("the registration secret changed since it was read")
)
