package operator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/rancher/registration-engine/internal/pause"
	"github.com/rancher/registration-engine/job/kube"
)

// Where rancher/scc-operator keeps its leader election: wrangler's leader
// package, Lease scc-controllers in --lease-namespace (default kube-system).
const (
	LeaseNamespace = "kube-system"
	LeaseName      = "scc-controllers"
	// RenewWindow is the longest a running operator goes without renewing
	// its Lease. wrangler's leader election renews every 2 s (RetryPeriod)
	// and a leader that has not renewed for 30 s (RenewDeadline) stops
	// leading and exits; so a renewTime older than that means no operator
	// is leading, whatever leaseDurationSeconds says (45 s by default, 45 h
	// with CATTLE_DEV_MODE).
	RenewWindow = 30 * time.Second
	// ObserveWindow bounds how long Check watches the Lease for a renewal:
	// five of wrangler's 2 s renew periods. A renewTime within RenewWindow
	// is not proof enough: an operator stopped a few seconds ago (SIGKILL,
	// an evicted pod, a SIGTERM that did not release the Lease) looks just
	// as fresh, and a Secret deleted then would wait for its finalizer for
	// good.
	ObserveWindow = 10 * time.Second
)

// LivenessRule words, for --help and the docs, what Check requires of
// the operator's Lease before a recovery deletes anything, from
// RenewWindow and ObserveWindow.
var LivenessRule = fmt.Sprintf("held, renewed within the last %d s and seen renewed again within %d s", int(RenewWindow.Seconds()), int(ObserveWindow.Seconds()))

// LeaderLease tells whether rancher/scc-operator is running, from its
// leader-election Lease. Deleting the Secret while it is not would leave
// the Secret Terminating behind the operator's finalizer.
type LeaderLease struct {
	Leases          kube.LeasesGetter
	Namespace, Name string // default LeaseNamespace, LeaseName
	Clock           clock.PassiveClock
	// Observe bounds the watch for a renewal (0: ObserveWindow); Interval
	// is the pause between two reads (0: 500 ms).
	Observe, Interval time.Duration
}

// Liveness is what the operator's Lease says.
type Liveness struct {
	Holder string
	// Renewed is the Lease's renewTime; Age how long ago that was.
	Renewed time.Time
	Age     time.Duration
	// Window is how recent a renewal must be: the smaller of the Lease's
	// leaseDurationSeconds and RenewWindow.
	Window time.Duration
}

// Ref is namespace/name of the Lease.
func (o *LeaderLease) Ref() string {
	return cmp.Or(o.Namespace, LeaseNamespace) + "/" + cmp.Or(o.Name, LeaseName)
}

// Check returns nil when the Lease is held, was renewed within the window,
// and is seen renewed again (by its holder or a new one) within Observe;
// else an error matching ErrOperatorNotRunning that says what the Lease
// shows (or a permanent *kube.ForbiddenError naming the missing get).
func (o *LeaderLease) Check(ctx context.Context) (Liveness, error) {
	ns, name := cmp.Or(o.Namespace, LeaseNamespace), cmp.Or(o.Name, LeaseName)
	var live Liveness
	cur, err := o.Leases.Leases(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return live, fmt.Errorf("%w: its Lease %s/%s does not exist (it has never run in this cluster, or runs with another --lease-namespace: set OPERATOR_LEASE)", ErrOperatorNotRunning, ns, name)
	case err != nil:
		return live, fmt.Errorf("kube: lease %s/%s: %w", ns, name, kube.APIError(err, kube.Access{Verbs: []string{"get"}, Resource: "leases/" + name, Namespace: ns}))
	}
	live = o.liveness(cur)
	switch {
	case live.Holder == "":
		return live, fmt.Errorf("%w: its Lease %s/%s is held by nobody (released %s ago: the operator stopped)", ErrOperatorNotRunning, ns, name, live.Age.Round(time.Second))
	case live.Renewed.IsZero():
		return live, fmt.Errorf("%w: its Lease %s/%s, held by %s, was never renewed", ErrOperatorNotRunning, ns, name, live.Holder)
	case live.Age > live.Window:
		return live, fmt.Errorf("%w: its Lease %s/%s was last renewed by %s %s ago, more than %s (a running operator renews it every few seconds)", ErrOperatorNotRunning, ns, name, live.Holder, live.Age.Round(time.Second), live.Window)
	}
	return o.observe(ctx, ns, name, live)
}

// observe reads the Lease until its renewTime moves past first's, up to
// Observe.
func (o *LeaderLease) observe(ctx context.Context, ns, name string, first Liveness) (Liveness, error) {
	window := orDuration(o.Observe, ObserveWindow)
	ctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	for {
		if pause.For(ctx, orDuration(o.Interval, 500*time.Millisecond)) != nil {
			if cause := context.Cause(ctx); !errors.Is(cause, context.DeadlineExceeded) {
				return first, cause // the run's own end (a signal, its deadline)
			}
			return first, fmt.Errorf("%w: its Lease %s/%s, held by %s and last renewed %s ago, was not renewed again within %s (a running operator renews it every 2 s; it stopped without releasing the Lease, or is stuck)",
				ErrOperatorNotRunning, ns, name, first.Holder, (first.Age + window).Round(time.Second), window)
		}
		cur, err := o.Leases.Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		live := o.liveness(cur)
		if live.Holder != "" && live.Renewed.After(first.Renewed) {
			return live, nil
		}
	}
}

func (o *LeaderLease) liveness(le *coordinationv1.Lease) Liveness {
	now := time.Now()
	if o.Clock != nil {
		now = o.Clock.Now()
	}
	live := Liveness{Window: RenewWindow}
	if le.Spec.HolderIdentity != nil {
		live.Holder = *le.Spec.HolderIdentity
	}
	if le.Spec.LeaseDurationSeconds != nil {
		if d := time.Duration(*le.Spec.LeaseDurationSeconds) * time.Second; d > 0 && d < live.Window {
			live.Window = d
		}
	}
	switch {
	case le.Spec.RenewTime != nil:
		live.Renewed = le.Spec.RenewTime.Time
	case le.Spec.AcquireTime != nil:
		live.Renewed = le.Spec.AcquireTime.Time
	}
	if !live.Renewed.IsZero() {
		live.Age = max(now.Sub(live.Renewed), 0)
	}
	return live
}
