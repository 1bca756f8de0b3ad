package operator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/pause"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/redact"
)

// SecretStore writes the Values into the operator's Secret (phase 6).
//
// It reads the Secret first and writes nothing when our five keys already
// hold the wanted values: every write that changes regCode, registrationUrl
// or registrationType makes the operator deregister and register afresh, and
// an unchanged run must cost one GET and no write. When something differs it
// applies our keys with server-side apply; see Write for why that is the
// only write that works under the Role in manifests/base.
type SecretStore struct {
	Secrets   kube.SecretsGetter
	Namespace string // default Namespace
	Name      string // default SecretName

	// RetryMax is the number of attempts (K8S_RETRY_MAX, default 5);
	// RetryBackoff multiplies the pause after each one (K8S_RETRY_BACKOFF,
	// default 2.0), starting at 1 s and capped at 30 s.
	RetryMax     int
	RetryBackoff float64
	// Sleep waits between attempts; nil means a real timer. Tests inject
	// one that returns at once.
	Sleep func(ctx context.Context, d time.Duration) error
	// PollInterval is the pause between two reads while Recreate waits
	// for a deleted Secret to go; 0 means 500 ms.
	PollInterval time.Duration
	Log          *slog.Logger
	// Redact learns the code kept from the Secret when none is
	// configured, so that a refusal quoting it is redacted like the
	// configured one; nil learns nothing.
	Redact *redact.Registry
}

// Write makes the Secret carry r, and reports whether it wrote anything.
//
// The write is a server-side apply of only our five data keys and the type,
// with Force and kube.FieldManager "registration-engine":
//   - Absent, the apply creates the Secret. The API server authorizes that as
//     "create" with the Secret's name, which a Role limited by resourceNames
//     allows; a POST carries no name and is always denied.
//   - Present, the apply changes only the fields in our apply configuration.
//     Labels, annotations, the salt and any data key another manager set are
//     not in it, so they stay; we never set app.kubernetes.io/managed-by,
//     which would make the operator refuse the Secret. Force takes over our
//     keys from whoever wrote them before (kubectl, the Python engine).
//   - We apply data, not stringData: the API server folds stringData into
//     data only after the apply, so managedFields would record stringData
//     keys that are never stored, and we would never own the data keys.
//
// An empty r.RegCode means "none configured", never "blank it": the code
// already in the Secret (an operator's, or an earlier run's) is carried into
// the apply unchanged. Leaving regCode out of the apply would not do: server-
// side apply deletes a field this manager applied before and now omits, so
// the run after one that wrote the code would wipe it, and the operator
// would deregister the cluster. With no code configured and none in the
// Secret, Write fails with a permanent ErrNoRegCode and writes nothing.
//
// When the Secret exists, the apply carries the resourceVersion just read:
// a change made between the read and the apply (an operator setting a new
// code) is a conflict and a re-read, never overwritten by a stale value.
//
// A Secret another tool writes (FindOtherWriter: Rancher's chart, a GitOps
// controller) is never written: a permanent ErrSecretOtherWriter names the
// writer and the choice a person must make. One SUSE's Python engine wrote
// is not another tool's: the apply takes it over.
//
// Conflicts, throttling, 5xx and network errors are retried (the whole
// read-compare-apply, so a retry re-reads); a 403 fails at once with an
// error naming what the Role must allow.
func (s *SecretStore) Write(ctx context.Context, r Values) (changed bool, err error) {
	ns, name := cmp.Or(s.Namespace, Namespace), cmp.Or(s.Name, SecretName)
	log := logger(s.Log).With(slog.String("secret", ns+"/"+name))
	need := kube.Access{Verbs: []string{"get", "create", "patch"}, Resource: "secrets/" + name, Namespace: ns}

	deleted := false
	err = kube.NewRetrier(s.RetryMax, s.RetryBackoff, s.Sleep, s.Log).Do(ctx, "secret "+ns+"/"+name, func(ctx context.Context) error {
		cur, err := s.Secrets.Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			cur = nil
		case err != nil:
			return kube.APIError(err, need)
		}
		if cur != nil && cur.DeletionTimestamp != nil {
			return failure.Permanent(fmt.Errorf("%w%s", ErrSecretTerminating, terminating(cur)))
		}
		if cur == nil && r.Left != nil {
			deleted = true // not retried here: this run recreates nothing
			return nil
		}
		if w := FindOtherWriter(cur); w != nil {
			return failure.Permanent(fmt.Errorf("%w: %s", ErrSecretOtherWriter, w.Verdict(ns, name)))
		}
		if cur != nil && cur.Type != "" && cur.Type != corev1.SecretTypeOpaque {
			return failure.Permanent(fmt.Errorf("%w: %s is %q, the operator reads an Opaque Secret and a type cannot change; delete it (which deregisters the cluster) and the next run recreates it", ErrSecretType, name, cur.Type))
		}
		want := r.Data()
		if r.RegCode == "" {
			kept := ""
			if cur != nil {
				kept = s.keptCode(cur)
			}
			if kept == "" {
				return errNoRegCode()
			}
			want[KeyRegCode] = kept
		}
		diff := differingKeys(cur, want)
		if cur != nil && len(diff) == 0 {
			changed = false
			return nil
		}

		resourceVersion := ""
		if cur != nil {
			resourceVersion = cur.ResourceVersion
		}
		body, err := secretApplyPatch(ns, name, resourceVersion, want)
		if err != nil {
			return failure.Permanent(err)
		}
		// Force only over a Secret just read: creating, a Secret someone
		// else created since the read (Rancher's registration page, a
		// person's code) is a conflict and a re-read, never overwritten.
		force := cur != nil
		if _, err := s.Secrets.Secrets(ns).Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: kube.FieldManager, Force: &force}); err != nil {
			return kube.APIError(err, need)
		}
		changed = true
		log.Info("registration secret written", slog.Bool("created", cur == nil), slog.Any("changedKeys", diff), slog.Bool("regCodeKept", r.RegCode == ""))
		return nil
	})
	if err == nil && deleted {
		err = errDeleted(ns, name, *r.Left)
	}
	if err != nil {
		return false, fmt.Errorf("operator: secret %s/%s: %w", ns, name, err)
	}
	if !changed {
		log.Debug("registration secret unchanged")
	}
	return changed, nil
}

// DefaultGoneWait bounds how long Recreate waits for the operator's
// finalizer to let the deleted Secret go. The operator's cleanup is a few
// API calls (measured well under a second); a minute covers a busy
// operator without holding a run that will not succeed.
const DefaultGoneWait = time.Minute

// RecreateResult is what Recreate did.
type RecreateResult struct {
	// Deleted: the Secret read for the report was deleted (and is gone).
	Deleted bool
	// Gone is how long the operator took to let it go after the delete.
	Gone time.Duration
}

// Recreate deletes the Secret the operator failed and writes it afresh
// with r's values, which is what rancher/scc-operator asks for before it
// registers again: "delete the entrypoint secret, give it time to clean up,
// and then create a new one". The new Secret gets a new salt from the
// operator, and with it a new Registration.
//
// It deletes only the Secret read for the report: uid and resourceVersion
// are preconditions of the delete, so a change made since (a person setting
// a new code) is a conflict, ErrSecretChanged, and nothing is deleted. An
// empty r.RegCode keeps the code of that Secret, as Write does.
//
// After the delete it waits up to goneWait (0: DefaultGoneWait) until the
// operator's finalizer has let the Secret go. One still there then is
// ErrSecretTerminating, permanent: it is never written over (an apply to a
// Terminating Secret would be lost with it), and later runs say so until
// the operator has let it go.
func (s *SecretStore) Recreate(ctx context.Context, r Values, uid types.UID, resourceVersion string, goneWait time.Duration) (RecreateResult, error) {
	ns, name := cmp.Or(s.Namespace, Namespace), cmp.Or(s.Name, SecretName)
	wrap := func(err error) error { return fmt.Errorf("operator: secret %s/%s: %w", ns, name, err) }
	need := kube.Access{Verbs: []string{"get", "delete"}, Resource: "secrets/" + name, Namespace: ns}
	secrets := s.Secrets.Secrets(ns)
	var res RecreateResult

	cur, err := secrets.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cur = nil
	case err != nil:
		return res, wrap(kube.APIError(err, need))
	}
	if cur != nil {
		if cur.UID != uid || cur.ResourceVersion != resourceVersion {
			return res, wrap(fmt.Errorf("%w: read at uid %s resourceVersion %s, now uid %s resourceVersion %s; nothing deleted", ErrSecretChanged, uid, resourceVersion, cur.UID, cur.ResourceVersion))
		}
		if cur.DeletionTimestamp != nil {
			return res, wrap(failure.Permanent(fmt.Errorf("%w%s", ErrSecretTerminating, terminating(cur))))
		}
		if r.RegCode == "" {
			r.RegCode = s.keptCode(cur)
		}
		err := secrets.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &resourceVersion}})
		switch {
		case apierrors.IsConflict(err):
			return res, wrap(fmt.Errorf("%w: the delete's precondition (uid %s, resourceVersion %s) failed; nothing deleted: %v", ErrSecretChanged, uid, resourceVersion, err))
		case apierrors.IsNotFound(err):
		case err != nil:
			return res, wrap(kube.APIError(err, need))
		default:
			res.Deleted = true
		}
		t := time.Now()
		if err := s.waitGone(ctx, uid, orDuration(goneWait, DefaultGoneWait)); err != nil {
			return res, wrap(err)
		}
		res.Gone = time.Since(t)
		logger(s.Log).Info("registration secret deleted; the operator let it go", slog.String("secret", ns+"/"+name), slog.Int64("goneMs", res.Gone.Milliseconds()))
		r.Left = nil // this run deleted it: writing it afresh undoes no one's deletion
	}
	if _, err := s.Write(ctx, r); err != nil {
		return res, err
	}
	return res, nil
}

// waitGone polls until the Secret of uid is gone (or replaced by another
// one), up to wait. Only the end of that wait is ErrSecretTerminating
// (permanent: the finalizer holds it); the run's own end (a signal, its
// deadline) is returned as its cause, so that the run exits 143 or 124 and
// its Job retries, instead of blaming the finalizer.
func (s *SecretStore) waitGone(ctx context.Context, uid types.UID, wait time.Duration) error {
	ns, name := cmp.Or(s.Namespace, Namespace), cmp.Or(s.Name, SecretName)
	wctx, cancel := context.WithTimeoutCause(ctx, wait, errGoneWaitOver)
	defer cancel()
	interval := orDuration(s.PollInterval, 500*time.Millisecond)
	var last *corev1.Secret
	for {
		cur, err := s.Secrets.Secrets(ns).Get(wctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err == nil && cur.UID != uid:
			return nil
		case err == nil:
			last = cur
		}
		if pause.For(wctx, interval) != nil {
			if cause := context.Cause(wctx); !errors.Is(cause, errGoneWaitOver) {
				return fmt.Errorf("waiting for %s/%s to go after the delete: %w", ns, name, cause)
			}
			msg := fmt.Sprintf(": still there %s after the delete", wait)
			if last != nil {
				msg = terminating(last)
			}
			return failure.Permanent(fmt.Errorf("%w%s", ErrSecretTerminating, msg))
		}
	}
}

// errGoneWaitOver is the cause of waitGone's own timeout.
var errGoneWaitOver = errors.New("the wait for the deleted secret to go is over")

// TerminatingMessage says what holds a deleted Secret: the finalizers left
// and since when. The operator's finalizer runs only while the operator
// does.
func TerminatingMessage(s *corev1.Secret) string {
	return fmt.Sprintf("%s/%s is being deleted%s", s.Namespace, s.Name, terminating(s))
}

// terminating is what follows "is being deleted" in a Secret-being-deleted
// message: since when, and the finalizers it waits for.
func terminating(s *corev1.Secret) string {
	since := ""
	if s.DeletionTimestamp != nil {
		since = fmt.Sprintf(" since %s (%s ago)", s.DeletionTimestamp.UTC().Format(time.RFC3339), time.Since(s.DeletionTimestamp.Time).Round(time.Second))
	}
	return fmt.Sprintf("%s and waits for its finalizers %v; rancher/scc-operator removes its finalizer once it has cleaned up, which needs it running; the engine never writes over a Secret being deleted, and writes it afresh once it is gone",
		since, s.Finalizers)
}

// Check fails, before the run changes anything in the cluster, when Write
// certainly would: no registration code configured (r.RegCode empty) and
// none in the Secret to keep. Without it a first install with no code would
// edit CoreDNS and wait out the handover only to fail at the write. With a
// code configured it reads nothing.
func (s *SecretStore) Check(ctx context.Context, r Values) error {
	if r.RegCode != "" {
		return nil
	}
	ns, name := cmp.Or(s.Namespace, Namespace), cmp.Or(s.Name, SecretName)
	need := kube.Access{Verbs: []string{"get"}, Resource: "secrets/" + name, Namespace: ns}
	deleted := false
	err := kube.NewRetrier(s.RetryMax, s.RetryBackoff, s.Sleep, s.Log).Do(ctx, "secret "+ns+"/"+name, func(ctx context.Context) error {
		cur, err := s.Secrets.Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && r.Left != nil:
			deleted = true
			return nil
		case apierrors.IsNotFound(err):
			return errNoRegCode()
		case err != nil:
			return kube.APIError(err, need)
		case FindOtherWriter(cur) != nil:
			return failure.Permanent(fmt.Errorf("%w: %s", ErrSecretOtherWriter, FindOtherWriter(cur).Verdict(ns, name)))
		case s.keptCode(cur) == "":
			return errNoRegCode()
		}
		return nil
	})
	if err == nil && deleted {
		err = errDeleted(ns, name, *r.Left)
	}
	if err != nil {
		return fmt.Errorf("operator: secret %s/%s: %w", ns, name, err)
	}
	return nil
}

// errDeleted is Check's and Write's error for a Secret deleted since the
// run at left ended with it in place: what happened, before the first
// "; " (status's line), then why nothing is written and what comes next.
// Not permanent: the Job's retry, seconds later, writes the Secret afresh
// if it is still absent, and finds a person's if Rancher's page created
// one meanwhile.
func errDeleted(ns, name string, left time.Time) error {
	return fmt.Errorf("%w: %s/%s was deleted after the engine's last successful run (%s) and nothing has replaced it yet; "+
		"this run does not recreate what someone just deleted: Rancher's registration page deletes it, then creates its own with the code a person typed, moments later. "+
		"The next attempt (the Job's retry, the retry CronJob, or %s) writes it afresh if it is still absent, and leaves a person's Secret alone",
		ErrSecretDeleted, ns, name, left.UTC().Format(time.RFC3339), RunNowCommand(ns, "", kube.CronJobName+"-manual"))
}

// errNoRegCode is Check's and Write's error for a run with no code
// configured and none in the Secret.
func errNoRegCode() error {
	return failure.Permanent(fmt.Errorf("%w: none is configured and the Secret holds none", ErrNoRegCode))
}

// secretApplyPatch is the whole of what we claim in the Secret, as a
// server-side apply body: its type and our data keys. No labels, no
// annotations: whatever is not in here is left to the operator. A non-empty
// resourceVersion is a precondition of the apply (it is not a field anyone
// owns).
func secretApplyPatch(ns, name, resourceVersion string, want map[string]string) ([]byte, error) {
	data := make(map[string][]byte, len(want))
	for k, v := range want {
		data[k] = []byte(v) // encoding/json writes []byte as base64, as data wants
	}
	meta := map[string]string{"name": name, "namespace": ns}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	return json.Marshal(map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata":   meta,
		"type":       corev1.SecretTypeOpaque,
		"data":       data,
	})
}

// differingKeys lists, in valueKeys order, the keys whose stored value
// differs from want (all of them when cur is nil). Only the names are
// returned: the values are secret.
func differingKeys(cur *corev1.Secret, want map[string]string) []string {
	var diff []string
	for _, k := range valueKeys {
		v, ok := want[k]
		if !ok {
			continue
		}
		if cur == nil {
			diff = append(diff, k)
			continue
		}
		if have, ok := cur.Data[k]; !ok || string(have) != v {
			diff = append(diff, k)
		}
	}
	return diff
}

// keptCode is the registration code in the existing Secret, which a run
// with none configured keeps; every read of it registers it with Redact,
// so a peer quoting it is redacted like the configured one.
func (s *SecretStore) keptCode(cur *corev1.Secret) string {
	code := string(cur.Data[KeyRegCode])
	s.Redact.Add(code)
	return code
}
