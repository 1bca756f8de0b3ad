package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/rancher/registration-engine/providers/pause"
)

// The memory of the engine's recoveries of Failed Registrations. It must
// survive the Secret's deletion (a recovery deletes it), so it lives on the
// engine's own Lease, as one annotation that a person can read and clear:
//
//	kubectl -n cattle-scc-system annotate lease registration-engine registration-engine.cattle.io/operator-recovery-
const (
	// AnnotationRecovery on the engine's Lease holds the RecoveryRecord
	// as JSON.
	AnnotationRecovery = "registration-engine.cattle.io/operator-recovery"
	// MaxRecoveries is how many recoveries in a row that met the same
	// cause the engine makes before it stops and leaves the cluster to a
	// person (exit 2), until the code or the URL changes or the record is
	// cleared.
	MaxRecoveries = 3
)

// Recovery outcomes a record keeps.
const (
	// RecoveryFailed: the new Registration failed again.
	RecoveryFailed = "failed"
	// RecoveryPending: the new Registration was neither active nor failed
	// when OPERATOR_WAIT ended.
	RecoveryPending = "pending"
	// RecoveryTerminating: the deleted Secret was still held by a
	// finalizer when the wait for it ended.
	RecoveryTerminating = "terminating"
	// RecoveryIncomplete: the Secret was deleted but could not be written
	// afresh; the next run writes it.
	RecoveryIncomplete = "incomplete"
	// RecoveryRecovered: the new Registration became active; Attempts is 0.
	RecoveryRecovered = "recovered"
)

// RecoveryRecord is what the engine remembers of its recoveries.
type RecoveryRecord struct {
	// Attempts counts the recoveries in a row, for the same Target, that
	// replaced a failure of the same Cause, with no active Registration
	// seen in between. At MaxRecoveries the engine stops.
	Attempts int `json:"attempts"`
	// Time is when the last recovery was made (or the record reset).
	Time time.Time `json:"time"`
	// Cause is the cause of the failure the last recovery replaced
	// (FailureVerdict.Cause).
	Cause string `json:"cause"`
	// Message is the operator's last failure message: the one the last
	// recovery ended with, else the one it replaced.
	Message string `json:"message,omitempty"`
	// Outcome is one of the Recovery constants.
	Outcome string `json:"outcome"`
	// Registration is the Registration the last recovery led to.
	Registration string `json:"registration,omitempty"`
	// Target is TargetHash of the code and URL the recoveries were for.
	Target string `json:"target"`
}

// Exhausted says whether a recovery of a failure with cause, for target,
// would be one too many.
func (r RecoveryRecord) Exhausted(target, cause string) bool {
	return r.Attempts >= MaxRecoveries && r.Target == target && r.Cause == cause
}

// Next is the attempt number a recovery of cause for target would be.
func (r RecoveryRecord) Next(target, cause string) int {
	if r.Target == target && r.Cause == cause && r.Outcome != RecoveryRecovered {
		return r.Attempts + 1
	}
	return 1
}

// TargetHash names a registration code and URL without revealing the code:
// 48 bits of their SHA-256, enough to notice a change and too few to tell
// a code from the many that share them.
func TargetHash(regCode, url string) string {
	sum := sha256.Sum256([]byte(regCode + "\n" + url))
	return hex.EncodeToString(sum[:6])
}

// ParseRecoveryRecord reads the record from a Lease's annotations; ok is
// false when there is none. A record that does not parse is an error.
func ParseRecoveryRecord(annotations map[string]string) (rec RecoveryRecord, ok bool, err error) {
	raw, ok := annotations[AnnotationRecovery]
	if !ok || raw == "" {
		return rec, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return rec, false, fmt.Errorf("annotation %s: %w", AnnotationRecovery, err)
	}
	return rec, true, nil
}

// LoadRecovery reads the recovery record from the Lease.
func (l *Lease) LoadRecovery(ctx context.Context) (RecoveryRecord, bool, error) {
	ns := orDefault(l.Namespace, Namespace)
	cur, err := l.Leases.Leases(ns).Get(ctx, l.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return RecoveryRecord{}, false, nil
	}
	if err != nil {
		return RecoveryRecord{}, false, fmt.Errorf("kube: lease %s/%s: recovery record: %w", ns, l.Name, APIError(err, Access{Verbs: []string{"get"}, Resource: "leases/" + l.Name, Namespace: ns}))
	}
	rec, ok, err := ParseRecoveryRecord(cur.Annotations)
	if err != nil {
		return RecoveryRecord{}, false, fmt.Errorf("kube: lease %s/%s: %w; clear it with %s", ns, l.Name, err, ClearRecoveryCommand(ns, l.Name))
	}
	return rec, ok, nil
}

// SaveRecovery writes rec onto the Lease (nil removes it), by an Update
// carrying the resourceVersion just read, retried on conflicts: the Lease
// is the engine's own, and this run holds it.
func (l *Lease) SaveRecovery(ctx context.Context, rec *RecoveryRecord) error {
	ns := orDefault(l.Namespace, Namespace)
	var raw []byte
	if rec != nil {
		var err error
		if raw, err = json.Marshal(rec); err != nil {
			return fmt.Errorf("kube: lease %s/%s: recovery record: %w", ns, l.Name, err)
		}
	}
	leases := l.Leases.Leases(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := leases.Get(ctx, l.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		next := cur.DeepCopy()
		if rec == nil {
			if _, ok := next.Annotations[AnnotationRecovery]; !ok {
				return nil
			}
			delete(next.Annotations, AnnotationRecovery)
		} else {
			if next.Annotations == nil {
				next.Annotations = map[string]string{}
			}
			next.Annotations[AnnotationRecovery] = string(raw)
		}
		_, err = leases.Update(ctx, next, metav1.UpdateOptions{FieldManager: l.fieldManager()})
		return err
	})
	if err != nil {
		return fmt.Errorf("kube: lease %s/%s: recovery record: %w", ns, l.Name, APIError(err, Access{Verbs: []string{"get", "update"}, Resource: "leases/" + l.Name, Namespace: ns}))
	}
	logger(l.Log).Debug("recovery record saved", slog.String("lease", ns+"/"+l.Name), slog.Bool("cleared", rec == nil))
	return nil
}

// Where rancher/scc-operator keeps its leader election: wrangler's leader
// package, Lease scc-controllers in --lease-namespace (default kube-system).
const (
	OperatorLeaseNamespace = "kube-system"
	OperatorLeaseName      = "scc-controllers"
	// OperatorRenewWindow is the longest a running operator goes without
	// renewing its Lease. wrangler's leader election renews every 2 s
	// (RetryPeriod) and a leader that has not renewed for 30 s
	// (RenewDeadline) stops leading and exits; so a renewTime older than
	// that means no operator is leading, whatever leaseDurationSeconds says
	// (45 s by default, 45 h with CATTLE_DEV_MODE).
	OperatorRenewWindow = 30 * time.Second
	// OperatorObserveWindow bounds how long Check watches the Lease for a
	// renewal: five of wrangler's 2 s renew periods. A renewTime within
	// OperatorRenewWindow is not proof enough: an operator stopped a few
	// seconds ago (SIGKILL, an evicted pod, a SIGTERM that did not release
	// the Lease) looks just as fresh, and a Secret deleted then would wait
	// for its finalizer for good.
	OperatorObserveWindow = 10 * time.Second
)

// OperatorLease tells whether rancher/scc-operator is running, from its
// leader-election Lease. Deleting the Secret while it is not would leave
// the Secret Terminating behind the operator's finalizer.
type OperatorLease struct {
	Leases          LeasesGetter
	Namespace, Name string // default OperatorLeaseNamespace, OperatorLeaseName
	Clock           clock.PassiveClock
	// Observe bounds the watch for a renewal (0: OperatorObserveWindow);
	// Interval is the pause between two reads (0: 500 ms).
	Observe, Interval time.Duration
}

// OperatorLiveness is what the operator's Lease says.
type OperatorLiveness struct {
	Holder string
	// Renewed is the Lease's renewTime; Age how long ago that was.
	Renewed time.Time
	Age     time.Duration
	// Window is how recent a renewal must be: the smaller of the Lease's
	// leaseDurationSeconds and OperatorRenewWindow.
	Window time.Duration
}

// Ref is namespace/name of the Lease.
func (o *OperatorLease) Ref() string {
	return orDefault(o.Namespace, OperatorLeaseNamespace) + "/" + orDefault(o.Name, OperatorLeaseName)
}

// Check returns nil when the Lease is held, was renewed within the window,
// and is seen renewed again (by its holder or a new one) within Observe;
// else an error matching ErrOperatorNotRunning that says what the Lease
// shows (or a permanent *ForbiddenError naming the missing get).
func (o *OperatorLease) Check(ctx context.Context) (OperatorLiveness, error) {
	ns, name := orDefault(o.Namespace, OperatorLeaseNamespace), orDefault(o.Name, OperatorLeaseName)
	var live OperatorLiveness
	cur, err := o.Leases.Leases(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return live, fmt.Errorf("%w: its Lease %s/%s does not exist (it has never run in this cluster, or runs with another --lease-namespace: set OPERATOR_LEASE)", ErrOperatorNotRunning, ns, name)
	case err != nil:
		return live, fmt.Errorf("kube: lease %s/%s: %w", ns, name, APIError(err, Access{Verbs: []string{"get"}, Resource: "leases/" + name, Namespace: ns}))
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
func (o *OperatorLease) observe(ctx context.Context, ns, name string, first OperatorLiveness) (OperatorLiveness, error) {
	window := orDuration(o.Observe, OperatorObserveWindow)
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

func (o *OperatorLease) liveness(le *coordinationv1.Lease) OperatorLiveness {
	now := time.Now()
	if o.Clock != nil {
		now = o.Clock.Now()
	}
	live := OperatorLiveness{Window: OperatorRenewWindow}
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
