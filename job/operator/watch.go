package operator

import (
	"cmp"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rancher/registration-engine/internal/pause"
	"github.com/rancher/registration-engine/job/kube"
)

// What rancher/scc-operator makes of the Secret (pkg/controllers on branch
// add-rmt-support and main alike).
const (
	// RegistrationPrefix starts the name of the Registration made from
	// scc-registration: scc-registration-<LabelNameSuffix>.
	RegistrationPrefix = "scc-registration-"
	// LabelNameSuffix is set by the operator on the Secret it processed: the
	// md5 of LabelSalt, registrationType, regCode and registrationUrl, which
	// ends the Registration's name.
	LabelNameSuffix = "scc.cattle.io/related-name-suffix"
	// LabelSalt is the random salt the operator adds when it adopts the
	// Secret.
	LabelSalt = "scc.cattle.io/instance-salt"
)

// The operator's states a run reports (operator=… in the run summary).
const (
	// StateActive: the Registration is Done and activated.
	StateActive = "active"
	// StateFailed: the Registration has Failure=True; the operator
	// ignores the Secret until scc-registration is deleted and recreated.
	StateFailed = "failed"
	// StatePending: neither, yet (or the Registration could not be read).
	StatePending = "pending"
	// StateAbsent: registrations.scc.cattle.io is not served; no operator
	// is installed.
	StateAbsent = "absent"
)

// Report is what the operator made of the Secret, for the run summary, the
// Job's Event and the recovery.
type Report struct {
	// State is StateActive, StateFailed, StatePending or StateAbsent.
	State string
	// Registration is the Registration's name, when known.
	Registration string
	// Message is the operator's failure message (failed), or what has not
	// happened yet (pending, absent).
	Message string
	// Verdict is the failure's class (StateFailed only): read once, here,
	// for the run, its recovery and status alike.
	Verdict Verdict
	// SecretUID and SecretResourceVersion identify the Secret this report
	// was read from: a recovery deletes exactly that one (preconditions),
	// so a change made since is never lost.
	SecretUID             types.UID
	SecretResourceVersion string
	// Target is TargetHash of the Secret's regCode and registrationUrl:
	// what a recovery record is kept for.
	Target string
}

// Judge is what the operator's Registration says, as a run and status both
// read it: active, failed (with its verdict), or neither (pending).
func Judge(reg *kube.SCCRegistration) (state, message string, v Verdict) {
	if msg, failed := reg.Failed(); failed {
		return StateFailed, msg, Classify(msg)
	}
	if reg.Active() {
		return StateActive, "", Verdict{}
	}
	return StatePending, "", Verdict{}
}

// Watch reads the operator's answer to the Secret: the Secret's labels lead
// to the Registration, whose conditions say active or failed.
type Watch struct {
	Secrets       kube.SecretsGetter
	Registrations kube.RegistrationsInterface
	Namespace     string // default Namespace
	Name          string // default SecretName
	// Interval is the pause between two reads; 0 means 2 s.
	Interval time.Duration
	Log      *slog.Logger
}

// Report returns what the operator made of the Secret's current values,
// waiting up to wait (0: one look) for it to be active or failed. It
// returns at once when no operator is installed (the CRD is not served).
// It has no error: what could not be read is a pending report saying so.
func (o *Watch) Report(ctx context.Context, wait time.Duration) Report {
	served, err := o.Registrations.Served(ctx)
	switch {
	case err != nil:
		logger(o.Log).Debug("discovery of registrations.scc.cattle.io failed; reading on", slog.String("error", err.Error()))
	case !served:
		return Report{State: StateAbsent, Message: "registrations.scc.cattle.io is not served: rancher/scc-operator is not installed"}
	}
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	interval := o.Interval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	for {
		r := o.look(ctx)
		if r.State != StatePending || wait <= 0 || pause.For(ctx, interval) != nil {
			return r
		}
	}
}

// look reads the Secret and its Registration once.
func (o *Watch) look(ctx context.Context) Report {
	ns, name := cmp.Or(o.Namespace, Namespace), cmp.Or(o.Name, SecretName)
	s, err := o.Secrets.Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Report{State: StatePending, Message: fmt.Sprintf("secret %s/%s: %v", ns, name, kube.APIError(err, kube.Access{Verbs: []string{"get"}, Resource: "secrets/" + name, Namespace: ns}))}
	}
	rep := o.lookAt(ctx, ns, name, s)
	rep.SecretUID, rep.SecretResourceVersion = s.UID, s.ResourceVersion
	rep.Target = TargetHash(string(s.Data[KeyRegCode]), string(s.Data[KeyRegistrationURL]))
	return rep
}

// lookAt reads the Registration made from s.
func (o *Watch) lookAt(ctx context.Context, ns, name string, s *corev1.Secret) Report {
	if s.DeletionTimestamp != nil {
		return Report{State: StatePending, Message: TerminatingMessage(s)}
	}
	want, ok := RegistrationName(s)
	if !ok {
		return Report{State: StatePending, Message: fmt.Sprintf("the operator has not adopted %s/%s yet (no label %s)", ns, name, LabelSalt)}
	}
	if got := s.Labels[LabelNameSuffix]; RegistrationPrefix+got != want {
		return Report{State: StatePending, Registration: want, Message: fmt.Sprintf("the operator has not processed the current values of %s/%s yet", ns, name)}
	}
	reg, err := o.Registrations.Get(ctx, want)
	switch {
	case apierrors.IsNotFound(err):
		return Report{State: StatePending, Registration: want, Message: "registration " + want + " not created yet"}
	case err != nil:
		err = kube.APIError(err, kube.Access{Verbs: []string{"get"}, Resource: kube.RegistrationResource + "." + kube.RegistrationGroup + "/" + want + " (ClusterRole)", Namespace: "the cluster"})
		return Report{State: StatePending, Registration: want, Message: "registration " + want + ": " + err.Error()}
	}
	state, msg, v := Judge(reg)
	if state == StatePending {
		msg = fmt.Sprintf("registration %s is %q, not Done yet", want, reg.Current)
	}
	return Report{State: state, Registration: want, Message: msg, Verdict: v}
}

// RegistrationName is the name of the Registration the operator makes from
// s's current values: scc-registration-<md5(salt, registrationType,
// regCode, registrationUrl)>, as the operator derives it
// (extractRegistrationParamsFromSecret). Comparing it with the Secret's
// LabelNameSuffix tells whether the operator has processed what the engine
// just wrote, rather than the values before. ok is false before the
// operator adopted the Secret (no salt).
func RegistrationName(s *corev1.Secret) (name string, ok bool) {
	salt, ok := s.Labels[LabelSalt]
	if !ok {
		return "", false
	}
	sum := md5.Sum(slices.Concat([]byte(salt), s.Data[KeyRegistrationType], s.Data[KeyRegCode], s.Data[KeyRegistrationURL]))
	return RegistrationPrefix + hex.EncodeToString(sum[:]), true
}

func orDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
