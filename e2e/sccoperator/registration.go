package sccoperator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// The operator's objects, as rancher/scc-operator names them.
var (
	// RegistrationResource is the operator's cluster-scoped Registration,
	// whose CRD it installs itself.
	RegistrationResource = schema.GroupVersionResource{Group: "scc.cattle.io", Version: "v1", Resource: "registrations"}
)

const (
	// LabelNameSuffix is the label the operator puts on the Secret it
	// adopted; its value ends the Registration's name.
	LabelNameSuffix = "scc.cattle.io/related-name-suffix"
	// RegistrationPrefix starts the name of the Registration made from
	// scc-registration: scc-registration-<LabelNameSuffix>.
	RegistrationPrefix = "scc-registration-"
)

// Condition types of a Registration, as the operator sets them.
const (
	ConditionDone      = "Done"
	ConditionFailure   = "Failure"
	ConditionActivated = "RegistrationActivated"
	ConditionAnnounced = "RegistrationAnnounced"
)

// ErrNotLabelled means the Secret does not (yet) carry LabelNameSuffix: the
// operator has not adopted it.
var ErrNotLabelled = errors.New("secret not adopted by the operator")

// Condition is one of a Registration's status conditions.
type Condition struct {
	Type, Status, Reason, Message string
}

// Registration is the state of one Registration, as far as a test or a
// report needs it.
type Registration struct {
	Name, ResourceVersion string
	// Current is status.currentCondition.type ("Done" once registered).
	Current string
	// Conditions are status.conditions in the operator's order.
	Conditions []Condition
	// Activated is status.activationStatus.activated.
	Activated bool
	// SystemID is status.sccSystemID, 0 before the announce.
	SystemID int64
	// RegisteredProduct is status.registeredProduct ("Rancher Prime 2.12.3").
	RegisteredProduct string
	// Deleted marks the last state a Recorder saw before the object went.
	Deleted bool
	// Seen is when a Recorder saw this state (zero from Get).
	Seen time.Time
}

// Condition returns the condition of type typ, if the operator set it.
func (r Registration) Condition(typ string) (Condition, bool) {
	i := slices.IndexFunc(r.Conditions, func(c Condition) bool { return c.Type == typ })
	if i < 0 {
		return Condition{}, false
	}
	return r.Conditions[i], true
}

// IsTrue reports whether condition typ is True.
func (r Registration) IsTrue(typ string) bool {
	c, ok := r.Condition(typ)
	return ok && c.Status == string(corev1.ConditionTrue)
}

// Done reports whether the cluster is registered and active: Done=True and
// activationStatus.activated.
func (r Registration) Done() bool { return r.IsTrue(ConditionDone) && r.Activated }

// Failed reports whether the operator gave up: Failure=True. It then
// ignores the Secret until scc-registration is deleted.
func (r Registration) Failed() bool { return r.IsTrue(ConditionFailure) }

// Terminal reports whether the Registration is Done or Failed.
func (r Registration) Terminal() bool { return r.Done() || r.Failed() }

// FailureMessage is the message of the Failure condition when it is True,
// the operator's own words ("" otherwise).
func (r Registration) FailureMessage() string {
	if c, ok := r.Condition(ConditionFailure); ok && c.Status == string(corev1.ConditionTrue) {
		return c.Message
	}
	return ""
}

// String is a one-line summary for test output.
func (r Registration) String() string {
	var conds []string
	for _, c := range r.Conditions {
		conds = append(conds, c.Type+"="+c.Status)
	}
	s := fmt.Sprintf("%s rv=%s current=%s activated=%t [%s]", r.Name, r.ResourceVersion, r.Current, r.Activated, strings.Join(conds, " "))
	if m := r.FailureMessage(); m != "" {
		s += fmt.Sprintf(" failure=%q", m)
	}
	if r.Deleted {
		s += " (deleted)"
	}
	return s
}

// Parse reads a Registration from its unstructured form; fields the
// operator has not set stay zero.
func Parse(u *unstructured.Unstructured) Registration {
	r := Registration{Name: u.GetName(), ResourceVersion: u.GetResourceVersion()}
	r.Current, _, _ = unstructured.NestedString(u.Object, "status", "currentCondition", "type")
	r.Activated, _, _ = unstructured.NestedBool(u.Object, "status", "activationStatus", "activated")
	r.SystemID, _, _ = unstructured.NestedInt64(u.Object, "status", "sccSystemID")
	r.RegisteredProduct, _, _ = unstructured.NestedString(u.Object, "status", "registeredProduct")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		r.Conditions = append(r.Conditions, Condition{Type: str("type"), Status: str("status"), Reason: str("reason"), Message: str("message")})
	}
	return r
}

// NameForSecret is the name of the Registration the operator made from an
// adopted Secret; ErrNotLabelled when it carries no LabelNameSuffix yet.
func NameForSecret(s *corev1.Secret) (string, error) {
	suffix := s.Labels[LabelNameSuffix]
	if suffix == "" {
		return "", fmt.Errorf("%s/%s: %w", s.Namespace, s.Name, ErrNotLabelled)
	}
	return RegistrationPrefix + suffix, nil
}

// Get reads one Registration by name.
func Get(ctx context.Context, dyn dynamic.Interface, name string) (Registration, error) {
	u, err := dyn.Resource(RegistrationResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Registration{}, fmt.Errorf("registration %s: %w", name, err)
	}
	return Parse(u), nil
}

// WaitForSecret polls Secret ns/name until the operator has adopted it and
// returns the name of its Registration. A missing Secret is waited for too.
func WaitForSecret(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, error) {
	var reg string
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			last = err
			return false, nil
		}
		if err != nil {
			return false, err
		}
		reg, last = NameForSecret(s)
		return last == nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("wait for the operator to adopt %s/%s: %w (last: %w)", ns, name, err, last)
	}
	return reg, nil
}

// Recorder keeps every state of every Registration from the moment it
// starts, from a watch (through an informer, so a dropped watch is resumed
// and nothing in between is lost), so a test can assert not only where a
// Registration ended but also what it passed through. Start it before the
// operator sees the Secret; Stop it at the end.
type Recorder struct {
	mu      sync.Mutex
	states  map[string][]Registration
	changed chan struct{} // closed and replaced on every change
	stop    context.CancelFunc
	factory dynamicinformer.DynamicSharedInformerFactory
}

// Record starts a Recorder as the client of cfg. The Registration CRD must
// exist (Run returns once the operator installed it).
func Record(ctx context.Context, cfg *rest.Config) (*Recorder, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &Recorder{states: map[string][]Registration{}, changed: make(chan struct{}), stop: cancel}
	r.factory = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := r.factory.ForResource(RegistrationResource).Informer()
	add := func(obj any, deleted bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		reg := Parse(u)
		reg.Deleted = deleted
		reg.Seen = time.Now()
		r.mu.Lock()
		defer r.mu.Unlock()
		r.states[reg.Name] = append(r.states[reg.Name], reg)
		close(r.changed)
		r.changed = make(chan struct{})
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { add(obj, false) },
		UpdateFunc: func(_, obj any) { add(obj, false) },
		DeleteFunc: func(obj any) { add(obj, true) },
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("recorder: %w", err)
	}
	r.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		r.Stop()
		return nil, fmt.Errorf("recorder: registrations never synced: %w", context.Cause(ctx))
	}
	return r, nil
}

// Stop ends the watch.
func (r *Recorder) Stop() {
	r.stop()
	r.factory.Shutdown()
}

// States returns every state of Registration name seen so far, in order.
func (r *Recorder) States(name string) []Registration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.states[name])
}

// Wait returns the first state of Registration name for which done is
// true, looking at the states already seen and then at each new one, until
// ctx ends.
func (r *Recorder) Wait(ctx context.Context, name string, done func(Registration) bool) (Registration, error) {
	seen := 0
	for {
		r.mu.Lock()
		states := r.states[name][seen:]
		changed := r.changed
		r.mu.Unlock()
		for _, s := range states {
			if done(s) {
				return s, nil
			}
		}
		seen += len(states)
		select {
		case <-changed:
		case <-ctx.Done():
			last := "never seen"
			if all := r.States(name); len(all) > 0 {
				last = all[len(all)-1].String()
			}
			return Registration{}, fmt.Errorf("registration %s: %w (last state: %s)", name, context.Cause(ctx), last)
		}
	}
}
