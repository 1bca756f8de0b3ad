package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/pause"
)

// Defaults of the seed's K8S_RETRY_MAX and K8S_RETRY_BACKOFF.
const (
	DefaultRetryMax     = 5
	DefaultRetryBackoff = 2.0

	retryBaseDelay = time.Second
	// retryMaxDelay caps one pause, so a large K8S_RETRY_BACKOFF cannot
	// park a run for hours; the run deadline bounds the sum.
	retryMaxDelay = 30 * time.Second
)

// Retrier runs one API operation up to attempts times, pausing
// base×backoff^(n-1) between attempts, and only on errors another attempt
// can fix: 409, 429, 5xx and answers that never came (network errors).
type Retrier struct {
	attempts int
	backoff  float64
	sleep    func(ctx context.Context, d time.Duration) error
	log      *slog.Logger
}

func NewRetrier(attempts int, backoff float64, sleep func(context.Context, time.Duration) error, log *slog.Logger) Retrier {
	if attempts <= 0 {
		attempts = DefaultRetryMax
	}
	if backoff < 1 {
		backoff = DefaultRetryBackoff
	}
	if sleep == nil {
		sleep = pause.For
	}
	return Retrier{attempts: attempts, backoff: backoff, sleep: sleep, log: logger(log)}
}

// Do calls op until it succeeds, fails for good, or the attempts run out.
// op returns the raw client error; what names the operation in logs and in
// the returned error.
func (r Retrier) Do(ctx context.Context, what string, op func(ctx context.Context) error) error {
	delay := retryBaseDelay
	var last error
	for attempt := 1; attempt <= r.attempts; attempt++ {
		last = op(ctx)
		if last == nil || !retryable(last) {
			return last
		}
		if attempt == r.attempts {
			break
		}
		r.log.Warn("kubernetes request failed, retrying",
			slog.String("operation", what), slog.Int("attempt", attempt), slog.Int("attempts", r.attempts),
			slog.Int64("delayMs", delay.Milliseconds()), slog.String("error", last.Error()))
		if err := r.sleep(ctx, delay); err != nil {
			return fmt.Errorf("%w (last error: %w)", err, last)
		}
		delay = min(time.Duration(float64(delay)*r.backoff), retryMaxDelay)
	}
	return fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, r.attempts, last)
}

// retryable reports whether another attempt can fix err: a write conflict,
// throttling, a server-side failure, or a request that got no answer at all.
// A cancelled or expired context is never retried.
func retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, failure.ErrPermanent) || errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrLeaseHeld) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		// No status from the API server: connection refused or reset, TLS
		// handshake, client timeout. The request may not even have arrived.
		return true
	}
	code := status.Status().Code
	return code == http.StatusConflict || code == http.StatusTooManyRequests || code >= 500 ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
}

// Access is what a call needs from RBAC, for the message of a 403.
type Access struct {
	// Verbs the Role must allow, e.g. get, create, patch.
	Verbs []string
	// Resource names the objects, e.g. secrets/scc-registration.
	Resource, Namespace string
}

// APIError turns a client error into one a person can act on. A 403 becomes
// a permanent *ForbiddenError naming what the Role must allow (need), a 401
// ErrUnauthorized; 400, 405, 415 and 422 become permanent, since the same
// request will be refused again. Everything else is returned as it came, so
// that retryable still sees the status.
func APIError(err error, need Access) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err):
		return failure.Permanent(&ForbiddenError{Verbs: need.Verbs, Resource: need.Resource, Namespace: need.Namespace, Err: err})
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%w: %w", ErrUnauthorized, err)
	case apierrors.IsBadRequest(err), apierrors.IsInvalid(err), apierrors.IsMethodNotSupported(err), apierrors.IsUnsupportedMediaType(err):
		return failure.Permanent(err)
	default:
		return err
	}
}

var discard = slog.New(slog.DiscardHandler)

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return discard
	}
	return l
}
