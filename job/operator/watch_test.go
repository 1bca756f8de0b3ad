package operator_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/job/operator"
)

type registrationsFake struct {
	mu     sync.Mutex
	served bool
	states map[string][]*kube.SCCRegistration
	err    error
	gets   int
}

func (f *registrationsFake) Served(context.Context) (bool, error) { return f.served, nil }

func (f *registrationsFake) Get(_ context.Context, name string) (*kube.SCCRegistration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.err != nil {
		return nil, f.err
	}
	s := f.states[name]
	if len(s) == 0 {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: kube.RegistrationGroup, Resource: kube.RegistrationResource}, name)
	}
	r := s[0]
	if len(s) > 1 {
		f.states[name] = s[1:]
	}
	return r, nil
}

const salt = "0a1b2c3d"

func adopted(regCode, labelFor string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: operator.SecretName, Namespace: operator.Namespace, Labels: map[string]string{operator.LabelSalt: salt}},
		Data: map[string][]byte{
			operator.KeyRegistrationType: []byte("online"), operator.KeyRegCode: []byte(regCode),
			operator.KeyRegistrationURL: []byte("https://smt-azure.susecloud.net"), operator.KeyRegistrationURLCert: []byte("PEM"),
		},
	}
	if labelFor != "" {
		s.Labels[operator.LabelNameSuffix] = suffix(labelFor)
	}
	return s
}

func suffix(regCode string) string {
	sum := md5.Sum([]byte(salt + "online" + regCode + "https://smt-azure.susecloud.net"))
	return hex.EncodeToString(sum[:])
}

func done(name string) *kube.SCCRegistration {
	return &kube.SCCRegistration{Name: name, Current: "Done", Activated: true, Conditions: []kube.RegistrationCondition{{Type: "Done", Status: "True"}, {Type: "Failure", Status: "False"}}}
}

func failed(name, msg string) *kube.SCCRegistration {
	return &kube.SCCRegistration{Name: name, Current: "Failure", Conditions: []kube.RegistrationCondition{{Type: "Failure", Status: "True", Message: msg}, {Type: "Done", Status: "False"}}}
}

func progressing(name string) *kube.SCCRegistration {
	return &kube.SCCRegistration{Name: name, Current: "Progressing", Conditions: []kube.RegistrationCondition{{Type: "Progressing", Status: "True"}}}
}

func TestOperatorWatchReport(t *testing.T) {
	name := operator.RegistrationPrefix + suffix("CODE")
	tests := map[string]struct {
		secret  *corev1.Secret
		served  bool
		states  map[string][]*kube.SCCRegistration
		err     error
		wait    time.Duration
		state   string
		message string
		regName string
	}{
		"no operator installed: absent at once, whatever the wait": {
			secret: adopted("CODE", ""), served: false, wait: time.Hour, state: operator.StateAbsent, message: "not installed",
		},
		"done and activated": {
			secret: adopted("CODE", "CODE"), served: true, states: map[string][]*kube.SCCRegistration{name: {done(name)}},
			state: operator.StateActive, regName: name,
		},
		"progressing, then done within the wait": {
			secret: adopted("CODE", "CODE"), served: true, states: map[string][]*kube.SCCRegistration{name: {progressing(name), progressing(name), done(name)}},
			wait: time.Minute, state: operator.StateActive, regName: name,
		},
		"failed, with the operator's message": {
			secret: adopted("CODE", "CODE"), served: true, states: map[string][]*kube.SCCRegistration{name: {progressing(name), failed(name, "401 Unknown Registration Code.")}},
			wait: time.Minute, state: operator.StateFailed, message: "401 Unknown Registration Code.", regName: name,
		},
		"still progressing when the wait ends: pending": {
			secret: adopted("CODE", "CODE"), served: true, states: map[string][]*kube.SCCRegistration{name: {progressing(name)}},
			wait: 50 * time.Millisecond, state: operator.StatePending, message: `is "Progressing", not Done yet`, regName: name,
		},
		"not adopted yet: pending": {
			secret: func() *corev1.Secret { s := adopted("CODE", ""); s.Labels = nil; return s }(), served: true,
			wait: 50 * time.Millisecond, state: operator.StatePending, message: "has not adopted",
		},
		"labelled for the values before the write: the old Registration's Done is not ours": {
			secret: adopted("CODE", "OLD-CODE"), served: true,
			states: map[string][]*kube.SCCRegistration{operator.RegistrationPrefix + suffix("OLD-CODE"): {done(operator.RegistrationPrefix + suffix("OLD-CODE"))}},
			wait:   50 * time.Millisecond, state: operator.StatePending, message: "not processed the current values", regName: name,
		},
		"registrations refused by RBAC: pending, naming the ClusterRole": {
			secret: adopted("CODE", "CODE"), served: true,
			err:  apierrors.NewForbidden(schema.GroupResource{Group: kube.RegistrationGroup, Resource: kube.RegistrationResource}, name, nil),
			wait: 0, state: operator.StatePending, message: "ClusterRole", regName: name,
		},
	}
	for tn, tc := range tests {
		t.Run(tn, func(t *testing.T) {
			regs := &registrationsFake{served: tc.served, states: tc.states, err: tc.err}
			w := &operator.Watch{Secrets: kubetest.Typed(fake.NewClientset(tc.secret)), Registrations: regs, Interval: time.Millisecond}
			start := time.Now()
			got := w.Report(context.Background(), tc.wait)
			assert.Equal(t, tc.state, got.State, got.Message)
			assert.Contains(t, got.Message, tc.message)
			assert.Equal(t, tc.regName, got.Registration)
			if tc.state == operator.StateAbsent {
				assert.Less(t, time.Since(start), time.Second, "no wait for an operator that is not there")
				assert.Zero(t, regs.gets)
			}
		})
	}
}

func TestRegistrationNameIsTheOperatorsHash(t *testing.T) {
	got, ok := operator.RegistrationName(adopted("CODE", ""))
	require.True(t, ok)
	assert.Equal(t, operator.RegistrationPrefix+suffix("CODE"), got)
	s := adopted("CODE", "")
	s.Data[operator.KeyInstanceData] = []byte("<document>other</document>")
	s.Data[operator.KeyRegistrationURLCert] = []byte("rotated")
	again, _ := operator.RegistrationName(s)
	assert.Equal(t, got, again, "instanceData and registrationUrlCert do not change the Registration")
	_, ok = operator.RegistrationName(&corev1.Secret{})
	assert.False(t, ok, "no salt before the operator adopted it")
}
