package kube

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

var (
	// ErrLeaseHeld means another run holds the Lease and it has not expired,
	// or another run took it over first. The run was rightly skipped; it is
	// not a failure. Returned as a *LeaseHeldError.
	ErrLeaseHeld = errors.New("lease held by another run")

	// ErrForbidden means RBAC refused a request. Returned as a permanent
	// *ForbiddenError naming the verbs and the resource the Role must grant:
	// another attempt with the same ServiceAccount cannot succeed.
	ErrForbidden = errors.New("forbidden by RBAC")

	// ErrUnauthorized means the API server rejected our credentials: the
	// ServiceAccount token expired or was revoked, or the kubeconfig's user
	// is wrong. It is not marked permanent: a new pod gets a fresh token.
	ErrUnauthorized = errors.New("unauthorized: the API server rejected the token (expired or revoked)")

	// ErrNotInCluster means there is no --kubeconfig and the process does
	// not run in a pod (KUBERNETES_SERVICE_HOST is unset). Permanent.
	ErrNotInCluster = errors.New("not running in a Kubernetes cluster and no kubeconfig given")

	// ErrRetriesExhausted means every attempt allowed by K8S_RETRY_MAX met
	// a transient error (conflict, throttling, a 5xx, the network). The
	// error is transient; the last API error is wrapped beside it.
	ErrRetriesExhausted = errors.New("retries exhausted")
)

// LeaseHeldError says who holds the Lease and until when. It matches
// ErrLeaseHeld with errors.Is; use errors.As to log the holder.
type LeaseHeldError struct {
	Namespace, Name string
	// Holder is the holderIdentity (a pod name); empty when another run won
	// a race and the Lease could not be read back.
	Holder string
	// Until is when the Lease expires; zero when unknown.
	Until time.Time
}

func (e *LeaseHeldError) Error() string {
	switch {
	case e.Holder == "":
		return fmt.Sprintf("lease %s/%s was taken by another run", e.Namespace, e.Name)
	case e.Until.IsZero():
		return fmt.Sprintf("lease %s/%s is held by %s", e.Namespace, e.Name, e.Holder)
	default:
		return fmt.Sprintf("lease %s/%s is held by %s until %s", e.Namespace, e.Name, e.Holder, e.Until.UTC().Format(time.RFC3339))
	}
}

// Is makes errors.Is(err, ErrLeaseHeld) true.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

// ForbiddenError says what RBAC refused and what the Role must allow. It
// matches ErrForbidden with errors.Is and unwraps to the API server's error,
// so apierrors.IsForbidden holds too.
type ForbiddenError struct {
	// Verbs the Role must allow, e.g. get, create, patch.
	Verbs []string
	// Resource names the objects, e.g. secrets/scc-registration.
	Resource  string
	Namespace string
	Err       error
}

func (e *ForbiddenError) Error() string {
	v := strings.Join(e.Verbs, ", ")
	if i := strings.LastIndex(v, ", "); i >= 0 {
		v = v[:i] + " and " + v[i+2:]
	}
	return fmt.Sprintf("%s: the Role must allow %s on %s in %s: %v", ErrForbidden, v, e.Resource, e.Namespace, e.Err)
}

// Is makes errors.Is(err, ErrForbidden) true.
func (e *ForbiddenError) Is(target error) bool { return target == ErrForbidden }

// Unwrap returns the API server's error.
func (e *ForbiddenError) Unwrap() error { return e.Err }
