package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/rancher/registration-engine/internal/failure"
)

// ReleaseTimeout bounds the release of the Lease. Release runs after the run
// may have been cancelled, so it gets a context of its own.
const ReleaseTimeout = 5 * time.Second

// LeaseMargin is how much longer than the run deadline the Lease lasts: the
// run records its Event (10 s) and releases the Lease (ReleaseTimeout) after
// its deadline, and the next run judges expiry on its own node's clock,
// which may run ahead of this one's.
const LeaseMargin = 2 * time.Minute

// Annotations on the Lease naming the Job whose pod holds it.
const (
	AnnotationLeaseJobUID  = "registration-engine.cattle.io/job-uid"
	AnnotationLeaseJobName = "registration-engine.cattle.io/job-name"
)

// The names the manifests and the chart give the engine's own objects, and
// the defaults of LEASE_NAME and CRONJOB_NAME. The status command looks for
// them under these names too.
const (
	// LeaseName is the Lease that keeps two runs apart.
	LeaseName = "registration-engine"
	// CronJobName is the CronJob that starts the runs.
	CronJobName = "registration-engine"
)

// Lease keeps two runs apart: the CronJob's concurrencyPolicy Forbid stops
// two scheduled runs, but not a manual Job started beside a scheduled one.
// It is a coordination.k8s.io/v1 Lease in the Secret's namespace, held by
// the pod's name for the run deadline.
//
// It is not leader election: a one-shot run takes the Lease once, never
// renews it, and releases it at the end. A run that dies without releasing
// (OOM, node loss, SIGKILL) blocks other Jobs' runs until the Lease
// expires, which is why Duration must be the run deadline and not longer;
// the Lease lasts LeaseMargin more, since it is judged on another node's
// clock and the run's release and Event come after its deadline. Its own
// Job's retry pod is not blocked: the Lease records the Job (JobUID), and a
// pod of the same Job takes it over at once. A Job runs one pod at a time
// (parallelism 1, and with a podFailurePolicy the replacement is created
// only once the failed pod is terminal), so a predecessor of the same Job
// holding the Lease is a dead one.
type Lease struct {
	Leases    LeasesGetter
	Namespace string // required
	Name      string // LEASE_NAME; required
	// Holder is this run's identity (the pod name); required. Two runs with
	// the same holder are one run as far as the Lease knows.
	Holder string
	// Duration is how long the Lease protects a run (the run deadline);
	// the Lease lasts LeaseMargin more.
	Duration time.Duration
	// JobName and JobUID name the Job that runs this pod (JOB_NAME,
	// JOB_UID); recorded in the Lease, so that this Job's next pod takes
	// the Lease over from this one if it dies holding it. Empty: a run
	// outside a Job, which only expiry frees.
	JobName, JobUID string
	Clock           clock.PassiveClock // nil means the real clock
	Log             *slog.Logger
}

// Release gives up the Lease Acquire took and, in the same write, stores
// the run's record that follow computes from the one there (as SaveRun
// does), unless follow is nil. Call it when the run ends, failed or not,
// even with a cancelled context: it uses a context of its own bounded by
// ReleaseTimeout.
type Release func(ctx context.Context, follow Follow) error

// Acquire takes the Lease, or returns a *LeaseHeldError (errors.Is
// ErrLeaseHeld) when another run holds it and it has not expired; release
// gives it up. last is what the Lease held of the runs before, read with
// it (nil when this run created the Lease): a run judges its failure by it
// (is the cluster still in its first contact, since when has it been
// failing).
//
// An absent Lease is created by server-side apply (the Role limits leases by
// resourceNames, which a POST can never satisfy), without Force and under a
// field manager of this holder: two runs racing to create it then conflict
// instead of both winning. An existing Lease is taken over by an Update
// carrying the resourceVersion just read, so of two runs taking over an
// expired Lease only one succeeds; the other gets ErrLeaseHeld.
func (l *Lease) Acquire(ctx context.Context) (release Release, last *Stored, err error) {
	ns := l.Namespace
	if ns == "" || l.Name == "" || l.Holder == "" || l.Duration <= 0 {
		return nil, nil, failure.Permanent(fmt.Errorf("kube: lease: namespace, name, holder and a positive duration are required (namespace %q, name %q, holder %q, duration %s)", ns, l.Name, l.Holder, l.Duration))
	}
	need := Access{Verbs: []string{"get", "create", "update", "patch"}, Resource: "leases/" + l.Name, Namespace: ns}
	wrap := func(err error) error { return fmt.Errorf("kube: lease %s/%s: %w", ns, l.Name, err) }
	leases := l.Leases.Leases(ns)
	now := l.now()

	cur, err := leases.Get(ctx, l.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		meta := map[string]any{"name": l.Name, "namespace": ns}
		if a := l.jobAnnotations(); a != nil {
			meta["annotations"] = a
		}
		body, err := json.Marshal(map[string]any{
			"apiVersion": coordinationv1.SchemeGroupVersion.String(),
			"kind":       "Lease",
			"metadata":   meta,
			"spec": map[string]any{
				"holderIdentity":       l.Holder,
				"leaseDurationSeconds": l.durationSeconds(),
				"acquireTime":          metav1.NewMicroTime(now),
				"renewTime":            metav1.NewMicroTime(now),
			},
		})
		if err != nil {
			return nil, nil, wrap(failure.Permanent(err))
		}
		force := false
		_, err = leases.Patch(ctx, l.Name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: l.fieldManager(), Force: &force})
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			return nil, nil, l.heldBy(ctx, ns)
		}
		if err != nil {
			return nil, nil, wrap(APIError(err, need))
		}
	case err != nil:
		return nil, nil, wrap(APIError(err, need))
	default:
		// The Lease exists: a run was here before. Its record and the
		// Lease's creation time, which no writer of the Lease can move,
		// judge this run's failure.
		last = &Stored{Record: cur.Annotations[AnnotationLastRun], Created: cur.CreationTimestamp.Time}
		holder, until := holderOf(cur)
		sameJob := l.JobUID != "" && cur.Annotations[AnnotationLeaseJobUID] == l.JobUID
		if holder != "" && holder != l.Holder && now.Before(until) && !sameJob {
			return nil, nil, &LeaseHeldError{Namespace: ns, Name: l.Name, Holder: holder, Until: until}
		}
		next := cur.DeepCopy()
		for k, v := range l.jobAnnotations() {
			if next.Annotations == nil {
				next.Annotations = map[string]string{}
			}
			next.Annotations[k] = v
		}
		if l.JobUID == "" {
			delete(next.Annotations, AnnotationLeaseJobUID)
			delete(next.Annotations, AnnotationLeaseJobName)
		}
		next.Spec.HolderIdentity = &l.Holder
		d := l.durationSeconds()
		next.Spec.LeaseDurationSeconds = &d
		next.Spec.AcquireTime = ptrMicro(now)
		next.Spec.RenewTime = ptrMicro(now)
		if holder != l.Holder {
			n := int32(1)
			if cur.Spec.LeaseTransitions != nil {
				n = *cur.Spec.LeaseTransitions + 1
			}
			next.Spec.LeaseTransitions = &n
		}
		_, err := leases.Update(ctx, next, metav1.UpdateOptions{FieldManager: l.fieldManager()})
		if apierrors.IsConflict(err) {
			return nil, nil, l.heldBy(ctx, ns)
		}
		if err != nil {
			return nil, nil, wrap(APIError(err, need))
		}
		switch {
		case holder != "" && holder != l.Holder && now.Before(until):
			logger(l.Log).Info("took over the lease from an earlier pod of this Job, which died holding it", slog.String("lease", ns+"/"+l.Name),
				slog.String("previousHolder", holder), slog.String("job", l.JobName), slog.Time("wouldExpire", until))
		case holder != "" && holder != l.Holder:
			logger(l.Log).Info("took over an expired lease", slog.String("lease", ns+"/"+l.Name), slog.String("previousHolder", holder), slog.Time("expired", until))
		}
	}
	logger(l.Log).Debug("lease acquired", slog.String("lease", ns+"/"+l.Name), slog.String("holder", l.Holder))
	return func(ctx context.Context, follow Follow) error { return l.release(ctx, ns, follow) }, last, nil
}

// release clears holderIdentity if we still hold the Lease and, with
// follow, stores the run's record: one read and one write for both (modify). It
// leaves the holder of a Lease another run has taken over alone (the
// record is still written: the run did what it records), and a Lease that
// is gone when there is nothing to record.
func (l *Lease) release(ctx context.Context, ns string, follow Follow) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	err := l.modify(ctx, ns, func(next *coordinationv1.Lease) (bool, error) {
		changed := false
		if holder, _ := holderOf(next); holder == l.Holder {
			next.Spec.HolderIdentity = nil
			changed = true
		}
		if follow != nil {
			v, err := follow(next.Annotations[AnnotationLastRun])
			if err != nil {
				return false, err
			}
			setAnnotation(next, AnnotationLastRun, &v)
			changed = true
		}
		return changed, nil
	})
	if apierrors.IsNotFound(err) && follow == nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kube: lease %s/%s: release: %w", ns, l.Name, err)
	}
	logger(l.Log).Debug("lease released", slog.String("lease", ns+"/"+l.Name), slog.Bool("recorded", follow != nil))
	return nil
}

// modify is the Lease's read-modify-write: it reads the Lease, lets change
// edit a copy, and writes the copy with the resourceVersion it read (the
// Role grants get and update, no delete), read and changed again on a
// conflict. Nothing is written when change reports no change. An error of
// change stops it and is returned as it is; the API's carries what the
// Role must grant (APIError).
func (l *Lease) modify(ctx context.Context, ns string, change func(next *coordinationv1.Lease) (changed bool, err error)) error {
	leases := l.Leases.Leases(ns)
	var changeErr error
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := leases.Get(ctx, l.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		next := cur.DeepCopy()
		changed, err := change(next)
		if err != nil {
			changeErr = err
			return nil
		}
		if !changed {
			return nil
		}
		_, err = leases.Update(ctx, next, metav1.UpdateOptions{FieldManager: l.fieldManager()})
		return err
	})
	if changeErr != nil {
		return changeErr
	}
	return APIError(err, Access{Verbs: []string{"get", "update"}, Resource: "leases/" + l.Name, Namespace: ns})
}

// setAnnotation sets key on le to *value, or removes it when value is nil;
// it reports whether that changed le.
func setAnnotation(le *coordinationv1.Lease, key string, value *string) bool {
	old, ok := le.Annotations[key]
	switch {
	case value == nil && !ok, value != nil && ok && old == *value:
		return false
	case value == nil:
		delete(le.Annotations, key)
	default:
		if le.Annotations == nil {
			le.Annotations = map[string]string{}
		}
		le.Annotations[key] = *value
	}
	return true
}

// heldBy reads the Lease back after losing a race, to name the winner. If it
// cannot be read, the error still says the Lease was taken.
func (l *Lease) heldBy(ctx context.Context, ns string) error {
	held := &LeaseHeldError{Namespace: ns, Name: l.Name}
	if cur, err := l.Leases.Leases(ns).Get(ctx, l.Name, metav1.GetOptions{}); err == nil {
		held.Holder, held.Until = holderOf(cur)
		if held.Holder == l.Holder {
			// Our own write landed although the call reported a conflict;
			// still step back: the caller has no release to call.
			held.Holder = ""
		}
	} else if !errors.Is(err, context.Canceled) {
		logger(l.Log).Debug("could not read the lease after losing it", slog.String("error", err.Error()))
	}
	return held
}

// holderOf returns the holder and the expiry of a Lease: renewTime (or
// acquireTime) plus leaseDurationSeconds. A Lease without times has expired.
func holderOf(le *coordinationv1.Lease) (holder string, until time.Time) {
	if le.Spec.HolderIdentity != nil {
		holder = *le.Spec.HolderIdentity
	}
	var since *metav1.MicroTime
	switch {
	case le.Spec.RenewTime != nil:
		since = le.Spec.RenewTime
	case le.Spec.AcquireTime != nil:
		since = le.Spec.AcquireTime
	default:
		return holder, time.Time{}
	}
	var secs int32
	if le.Spec.LeaseDurationSeconds != nil {
		secs = *le.Spec.LeaseDurationSeconds
	}
	return holder, since.Add(time.Duration(secs) * time.Second)
}

func (l *Lease) now() time.Time {
	if l.Clock == nil {
		return time.Now()
	}
	return l.Clock.Now()
}

// jobAnnotations records the Job in the Lease; nil outside a Job.
func (l *Lease) jobAnnotations() map[string]string {
	if l.JobUID == "" {
		return nil
	}
	return map[string]string{AnnotationLeaseJobUID: l.JobUID, AnnotationLeaseJobName: l.JobName}
}

// durationSeconds is Duration plus LeaseMargin, rounded up to whole
// seconds, the Lease's unit.
func (l *Lease) durationSeconds() int32 {
	s := math.Ceil((l.Duration + LeaseMargin).Seconds())
	return int32(min(s, math.MaxInt32))
}

// fieldManager is a manager per holder. Server-side apply lets one manager
// overwrite its own fields freely, so two runs sharing a manager would both
// "create" the Lease; with a manager each, the second apply conflicts. The
// API server allows 128 characters; longer holders are shortened with a
// hash so that two of them still differ.
func (l *Lease) fieldManager() string {
	m := FieldManager + "/" + l.Holder
	if len(m) <= 128 {
		return m
	}
	sum := sha256.Sum256([]byte(l.Holder))
	return m[:128-17] + "-" + hex.EncodeToString(sum[:8])
}

func ptrMicro(t time.Time) *metav1.MicroTime {
	m := metav1.NewMicroTime(t)
	return &m
}

// Annotation reads one annotation of the Lease; ok is false when the Lease
// or the annotation is absent. Other packages keep their memory here when it
// must outlive the Secret (job/operator's recovery record).
func (l *Lease) Annotation(ctx context.Context, key string) (value string, ok bool, err error) {
	ns := l.Namespace
	cur, err := l.Leases.Leases(ns).Get(ctx, l.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("kube: lease %s/%s: annotation %s: %w", ns, l.Name, key, APIError(err, Access{Verbs: []string{"get"}, Resource: "leases/" + l.Name, Namespace: ns}))
	}
	value, ok = cur.Annotations[key]
	return value, ok && value != "", nil
}

// SetAnnotation writes one annotation of the Lease (nil removes it), by an
// Update carrying the resourceVersion just read, retried on conflicts: the
// Lease is the engine's own, and this run holds it.
func (l *Lease) SetAnnotation(ctx context.Context, key string, value *string) error {
	return l.UpdateAnnotation(ctx, key, func(string, bool) (*string, error) { return value, nil })
}

// UpdateAnnotation rewrites one annotation of the Lease from its current
// value in one read and one write (modify): next gets the value read (ok
// false when absent or empty) and returns the one to write (nil removes
// it); on a conflict it is called again with what the other writer left.
// An error from next stops it, with nothing written.
func (l *Lease) UpdateAnnotation(ctx context.Context, key string, next func(cur string, ok bool) (*string, error)) error {
	ns := l.Namespace
	var value *string
	err := l.modify(ctx, ns, func(le *coordinationv1.Lease) (bool, error) {
		old := le.Annotations[key]
		var err error
		if value, err = next(old, old != ""); err != nil {
			return false, err
		}
		return setAnnotation(le, key, value), nil
	})
	if err != nil {
		return fmt.Errorf("kube: lease %s/%s: annotation %s: %w", ns, l.Name, key, err)
	}
	logger(l.Log).Debug("lease annotation saved", slog.String("lease", ns+"/"+l.Name), slog.String("key", key), slog.Bool("cleared", value == nil))
	return nil
}

// Ref is namespace/name of the Lease.
func (l *Lease) Ref() string { return l.Namespace + "/" + l.Name }
