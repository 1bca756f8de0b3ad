package kube

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/rancher/registration-engine/providers/pause"
)

// What rancher/scc-operator makes of the Secret (pkg/controllers on branch
// add-rmt-support and main alike).
const (
	// RegistrationGroup, RegistrationVersion and RegistrationResource name
	// the operator's cluster-scoped Registration, whose CRD it installs.
	RegistrationGroup    = "scc.cattle.io"
	RegistrationVersion  = "v1"
	RegistrationResource = "registrations"
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

// Operator states a run reports (operator=… in the run summary).
const (
	// OperatorActive: the Registration is Done and activated.
	OperatorActive = "active"
	// OperatorFailed: the Registration has Failure=True; the operator
	// ignores the Secret until scc-registration is deleted and recreated.
	OperatorFailed = "failed"
	// OperatorPending: neither, yet (or the Registration could not be read).
	OperatorPending = "pending"
	// OperatorAbsent: registrations.scc.cattle.io is not served; no
	// operator is installed.
	OperatorAbsent = "absent"
)

// SCCRegistration is what the engine reads of the operator's Registration.
type SCCRegistration struct {
	Name string
	// Current is status.currentCondition.type ("Done" once registered).
	Current string
	// Activated is status.activationStatus.activated.
	Activated bool
	// Conditions are status.conditions: type → status and message.
	Conditions []RegistrationCondition
}

// RegistrationCondition is one of the Registration's status conditions.
type RegistrationCondition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Message string `json:"message"`
	// LastUpdateTime is when the operator last set it (RFC 3339).
	LastUpdateTime string `json:"lastUpdateTime"`
}

func (r *SCCRegistration) condition(typ string) (RegistrationCondition, bool) {
	i := slices.IndexFunc(r.Conditions, func(c RegistrationCondition) bool { return c.Type == typ })
	if i < 0 {
		return RegistrationCondition{}, false
	}
	return r.Conditions[i], true
}

// Failed reports Failure=True and the operator's message.
func (r *SCCRegistration) Failed() (string, bool) {
	c, ok := r.condition("Failure")
	return c.Message, ok && c.Status == string(corev1.ConditionTrue)
}

// Active reports Done=True with the activation confirmed.
func (r *SCCRegistration) Active() bool {
	c, ok := r.condition("Done")
	return ok && c.Status == string(corev1.ConditionTrue) && r.Activated
}

// RegistrationsInterface reads the operator's Registrations.
type RegistrationsInterface interface {
	// Get reads one Registration; a missing one is a NotFound API error.
	Get(ctx context.Context, name string) (*SCCRegistration, error)
	// Served reports whether the API server serves registrations.scc.cattle.io
	// (through discovery, which every authenticated client may read).
	Served(ctx context.Context) (bool, error)
}

// OperatorReport is what the operator made of the Secret, for the run
// summary and the Job's Event.
type OperatorReport struct {
	// State is OperatorActive, OperatorFailed, OperatorPending or
	// OperatorAbsent.
	State string
	// Registration is the Registration's name, when known.
	Registration string
	// Message is the operator's failure message (failed), or what has not
	// happened yet (pending, absent).
	Message string
	// SecretUID and SecretResourceVersion identify the Secret this report
	// was read from: a recovery deletes exactly that one (preconditions),
	// so a change made since is never lost.
	SecretUID             types.UID
	SecretResourceVersion string
	// Target is TargetHash of the Secret's regCode and registrationUrl:
	// what a recovery record is kept for.
	Target string
}

// OperatorWatch reads the operator's answer to the Secret: the Secret's
// labels lead to the Registration, whose conditions say active or failed.
type OperatorWatch struct {
	Secrets       SecretsGetter
	Registrations RegistrationsInterface
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
func (o *OperatorWatch) Report(ctx context.Context, wait time.Duration) OperatorReport {
	served, err := o.Registrations.Served(ctx)
	switch {
	case err != nil:
		logger(o.Log).Debug("discovery of registrations.scc.cattle.io failed; reading on", slog.String("error", err.Error()))
	case !served:
		return OperatorReport{State: OperatorAbsent, Message: "registrations.scc.cattle.io is not served: rancher/scc-operator is not installed"}
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
		if r.State != OperatorPending || wait <= 0 || pause.For(ctx, interval) != nil {
			return r
		}
	}
}

// look reads the Secret and its Registration once.
func (o *OperatorWatch) look(ctx context.Context) OperatorReport {
	ns, name := orDefault(o.Namespace, Namespace), orDefault(o.Name, SecretName)
	s, err := o.Secrets.Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return OperatorReport{State: OperatorPending, Message: fmt.Sprintf("secret %s/%s: %v", ns, name, APIError(err, Access{Verbs: []string{"get"}, Resource: "secrets/" + name, Namespace: ns}))}
	}
	rep := o.lookAt(ctx, ns, name, s)
	rep.SecretUID, rep.SecretResourceVersion = s.UID, s.ResourceVersion
	rep.Target = TargetHash(string(s.Data[KeyRegCode]), string(s.Data[KeyRegistrationURL]))
	return rep
}

// lookAt reads the Registration made from s.
func (o *OperatorWatch) lookAt(ctx context.Context, ns, name string, s *corev1.Secret) OperatorReport {
	if s.DeletionTimestamp != nil {
		return OperatorReport{State: OperatorPending, Message: terminatingMessage(s)}
	}
	want, ok := RegistrationName(s)
	if !ok {
		return OperatorReport{State: OperatorPending, Message: fmt.Sprintf("the operator has not adopted %s/%s yet (no label %s)", ns, name, LabelSalt)}
	}
	if got := s.Labels[LabelNameSuffix]; RegistrationPrefix+got != want {
		return OperatorReport{State: OperatorPending, Registration: want, Message: fmt.Sprintf("the operator has not processed the current values of %s/%s yet", ns, name)}
	}
	reg, err := o.Registrations.Get(ctx, want)
	switch {
	case apierrors.IsNotFound(err):
		return OperatorReport{State: OperatorPending, Registration: want, Message: "registration " + want + " not created yet"}
	case err != nil:
		err = APIError(err, Access{Verbs: []string{"get"}, Resource: RegistrationResource + "." + RegistrationGroup + "/" + want + " (ClusterRole)", Namespace: "the cluster"})
		return OperatorReport{State: OperatorPending, Registration: want, Message: "registration " + want + ": " + err.Error()}
	}
	if msg, failed := reg.Failed(); failed {
		return OperatorReport{State: OperatorFailed, Registration: want, Message: msg}
	}
	if reg.Active() {
		return OperatorReport{State: OperatorActive, Registration: want}
	}
	return OperatorReport{State: OperatorPending, Registration: want, Message: fmt.Sprintf("registration %s is %q, not Done yet", want, reg.Current)}
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

// registrations serves RegistrationsInterface through a REST client of
// scc.cattle.io/v1. The operator's types are not ours to import: the body
// is read into the few fields the engine needs.
type registrations struct{ client rest.Interface }

func (r registrations) Get(ctx context.Context, name string) (*SCCRegistration, error) {
	raw, err := r.client.Get().Resource(RegistrationResource).Name(name).Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var obj struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Status struct {
			CurrentCondition struct {
				Type string `json:"type"`
			} `json:"currentCondition"`
			ActivationStatus struct {
				Activated bool `json:"activated"`
			} `json:"activationStatus"`
			Conditions []RegistrationCondition `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("registration %s: %w", name, err)
	}
	return &SCCRegistration{Name: obj.Metadata.Name, Current: obj.Status.CurrentCondition.Type, Activated: obj.Status.ActivationStatus.Activated, Conditions: obj.Status.Conditions}, nil
}

func (r registrations) Served(ctx context.Context) (bool, error) {
	raw, err := r.client.Get().AbsPath("/apis", RegistrationGroup, RegistrationVersion).Do(ctx).Raw()
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(raw, &list); err != nil {
		return false, fmt.Errorf("discovery %s/%s: %w", RegistrationGroup, RegistrationVersion, err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == RegistrationResource }), nil
}
