package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The API of rancher/scc-operator's Registration, as the engine reads it.
// What the operator's answer means for a run is job/operator's.
const (
	// RegistrationGroup, RegistrationVersion and RegistrationResource name
	// the operator's cluster-scoped Registration, whose CRD it installs.
	RegistrationGroup    = "scc.cattle.io"
	RegistrationVersion  = "v1"
	RegistrationResource = "registrations"
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
