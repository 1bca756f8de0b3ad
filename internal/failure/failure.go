// Package failure carries the one classification every error of a run needs:
// is it worth trying again? The answer decides the process exit code, and with
// it whether the Kubernetes Job retries (transient) or fails at once through
// its podFailurePolicy (permanent). A permanent error that is misclassified as
// transient makes the Job hammer Azure and the region servers for nothing; a
// transient one marked permanent leaves a cluster unregistered until the next
// schedule. Both providers and job use it, so it depends on nothing.
package failure

import (
	"errors"
	"strings"
)

// ErrPermanent marks an error that another attempt cannot fix: bad
// configuration, no supported cloud, a Marketplace plan mismatch, a forged
// attested document. Test with errors.Is or IsPermanent.
var ErrPermanent = errors.New("permanent failure")

// Permanent marks err as permanent. The message is unchanged; errors.Is(err,
// ErrPermanent) becomes true and errors.Is/As still reach the wrapped error.
// Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil || errors.Is(err, ErrPermanent) {
		return err
	}
	return permanentError{err}
}

// IsPermanent reports whether err, or anything it wraps, is permanent.
func IsPermanent(err error) bool { return errors.Is(err, ErrPermanent) }

type permanentError struct{ err error }

func (e permanentError) Error() string        { return e.err.Error() }
func (e permanentError) Unwrap() error        { return e.err }
func (e permanentError) Is(target error) bool { return target == ErrPermanent }

// ErrSettling marks an error a cloud gives while it is still propagating a
// new identity or role assignment: Azure's ARM answering 401 or 403 for a
// role assigned minutes ago (it documents up to 30 minutes), Entra refusing
// a federated credential created minutes ago, IMDS not knowing a managed
// identity still being attached to the node. The same error an hour later
// is a misconfiguration. Only the run knows which (it remembers whether the
// cluster ever registered, and since when it fails), so a settling error is
// not permanent until the run says so: job.Run marks it permanent once the
// cluster's first-contact window has closed.
var ErrSettling = errors.New("the cloud may still be propagating an identity or role assignment")

// Settling marks err as settling (see ErrSettling), leaving its message and
// its class unchanged. Settling(nil) is nil.
func Settling(err error) error {
	if err == nil || errors.Is(err, ErrSettling) {
		return err
	}
	return settlingError{err}
}

// IsSettling reports whether err, or anything it wraps, is settling.
func IsSettling(err error) bool { return errors.Is(err, ErrSettling) }

type settlingError struct{ err error }

func (e settlingError) Error() string        { return e.err.Error() }
func (e settlingError) Unwrap() error        { return e.err }
func (e settlingError) Is(target error) bool { return target == ErrSettling }

// List reports several errors on one line, which is what a log line or a
// Job's last words need (errors.Join writes one per line), while errors.Is
// and errors.As still reach each of them. Like any multi-error it is
// permanent (IsPermanent) as soon as one of its errors is.
type List []error

func (l List) Error() string {
	parts := make([]string, len(l))
	for i, err := range l {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

// Unwrap returns the errors, for errors.Is and errors.As.
func (l List) Unwrap() []error { return l }
