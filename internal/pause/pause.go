// Package pause is the one way the engine waits: for a duration, or until the
// run's context ends, whichever comes first. The startup sleep, the pauses
// between region-server passes and the backoffs of the Kubernetes and IMDS
// retries all wait through For, so a SIGTERM or the run deadline cuts every
// one of them short the same way. Both providers and job use it, so it
// depends on nothing of the engine.
package pause

import (
	"context"
	"time"
)

// For waits d, or until ctx ends. It returns nil after a full wait and
// ctx.Err() when the context ended first (at once when it has already
// ended, also for d ≤ 0); the caller adds the context's cause when it wants
// one. Its signature is that of the Sleep fields that tests replace with a
// recorder.
func For(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
