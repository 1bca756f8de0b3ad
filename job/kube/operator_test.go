package kube_test

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/job/redact"
)

// registrationsFake serves Registrations from memory; states are handed out
// one per Get, the last repeated.
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

// adopted is scc-registration as the operator leaves it after processing
// the given regCode: salted, and labelled with the name of its Registration.
func adopted(regCode, labelFor string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kube.SecretName, Namespace: kube.Namespace, Labels: map[string]string{kube.LabelSalt: salt}},
		Data: map[string][]byte{
			kube.KeyRegistrationType: []byte("online"), kube.KeyRegCode: []byte(regCode),
			kube.KeyRegistrationURL: []byte("https://smt-azure.susecloud.net"), kube.KeyRegistrationURLCert: []byte("PEM"),
		},
	}
	if labelFor != "" {
		s.Labels[kube.LabelNameSuffix] = suffix(labelFor)
	}
	return s
}

// suffix is the operator's name hash (extractRegistrationParamsFromSecret):
// md5 over salt, type, code and URL, concatenated.
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
	name := kube.RegistrationPrefix + suffix("CODE")
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
			secret: adopted("CODE", ""), served: false, wait: time.Hour, state: kube.OperatorAbsent, message: "not installed",
		},
		"done and activated": {
			secret: adopted("CODE", "CODE"), served: true, states: map[string][]*kube.SCCRegistration{name: {done(name)}},
			state: kube.OperatorActive, regName: name,
		},
		"progressing, then done within the wait": {
			secret: adopted("CODE", "CODE"), served: true, states: map[string][]*kube.SCCRegistration{name: {progressing(name), progressing(name), done(name)}},
			wait: time.Minute, state: kube.OperatorActive, regName: name,
		},
		"failed, with the operator's message": {
			secret: adopted("CODE", "CODE"), served: true, states: map[string][]*kube.SCCRegistration{name: {progressing(name), failed(name, "401 Unknown Registration Code.")}},
			wait: time.Minute, state: kube.OperatorFailed, message: "401 Unknown Registration Code.", regName: name,
		},
		"still progressing when the wait ends: pending": {
			secret: adopted("CODE", "CODE"), served: true, states: map[string][]*kube.SCCRegistration{name: {progressing(name)}},
			wait: 50 * time.Millisecond, state: kube.OperatorPending, message: `is "Progressing", not Done yet`, regName: name,
		},
		"not adopted yet: pending": {
			secret: func() *corev1.Secret { s := adopted("CODE", ""); s.Labels = nil; return s }(), served: true,
			wait: 50 * time.Millisecond, state: kube.OperatorPending, message: "has not adopted",
		},
		"labelled for the values before the write: the old Registration's Done is not ours": {
			secret: adopted("CODE", "OLD-CODE"), served: true,
			states: map[string][]*kube.SCCRegistration{kube.RegistrationPrefix + suffix("OLD-CODE"): {done(kube.RegistrationPrefix + suffix("OLD-CODE"))}},
			wait:   50 * time.Millisecond, state: kube.OperatorPending, message: "not processed the current values", regName: name,
		},
		"registrations refused by RBAC: pending, naming the ClusterRole": {
			secret: adopted("CODE", "CODE"), served: true,
			err:  apierrors.NewForbidden(schema.GroupResource{Group: kube.RegistrationGroup, Resource: kube.RegistrationResource}, name, nil),
			wait: 0, state: kube.OperatorPending, message: "ClusterRole", regName: name,
		},
	}
	for tn, tc := range tests {
		t.Run(tn, func(t *testing.T) {
			regs := &registrationsFake{served: tc.served, states: tc.states, err: tc.err}
			w := &kube.OperatorWatch{Secrets: kubetest.Typed(fake.NewClientset(tc.secret)), Registrations: regs, Interval: time.Millisecond}
			start := time.Now()
			got := w.Report(context.Background(), tc.wait)
			assert.Equal(t, tc.state, got.State, got.Message)
			assert.Contains(t, got.Message, tc.message)
			assert.Equal(t, tc.regName, got.Registration)
			if tc.state == kube.OperatorAbsent {
				assert.Less(t, time.Since(start), time.Second, "no wait for an operator that is not there")
				assert.Zero(t, regs.gets)
			}
		})
	}
}

func TestRegistrationNameIsTheOperatorsHash(t *testing.T) {
	got, ok := kube.RegistrationName(adopted("CODE", ""))
	require.True(t, ok)
	assert.Equal(t, kube.RegistrationPrefix+suffix("CODE"), got)
	s := adopted("CODE", "")
	s.Data[kube.KeyInstanceData] = []byte("<document>other</document>")
	s.Data[kube.KeyRegistrationURLCert] = []byte("rotated")
	again, _ := kube.RegistrationName(s)
	assert.Equal(t, got, again, "instanceData and registrationUrlCert do not change the Registration")
	_, ok = kube.RegistrationName(&corev1.Secret{})
	assert.False(t, ok, "no salt before the operator adopted it")
}

func TestJobEventsRecord(t *testing.T) {
	c := fake.NewClientset()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	j := &kube.JobEvents{Events: kubetest.Typed(c), Namespace: kube.Namespace, JobName: "manual-1", JobUID: "uid-1", Instance: "manual-1-abcde", Now: func() time.Time { return now }}
	long := make([]byte, 3000)
	for i := range long {
		long[i] = 'x'
	}
	require.NoError(t, j.Record(context.Background(), kube.JobEvent{Warning: true, Reason: kube.ReasonOperatorFailed, Action: "Report", Note: string(long)}))
	list, err := c.EventsV1().Events(kube.Namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	ev := list.Items[0]
	assert.Equal(t, corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: kube.Namespace, Name: "manual-1", UID: "uid-1"}, ev.Regarding)
	assert.Equal(t, "Warning", ev.Type)
	assert.Equal(t, kube.ReasonOperatorFailed, ev.Reason)
	assert.Equal(t, kube.ReportingController, ev.ReportingController)
	assert.Equal(t, "manual-1-abcde", ev.ReportingInstance)
	assert.Equal(t, now, ev.EventTime.Time)
	assert.Len(t, ev.Note, 1024, "the API server refuses a note over 1 kB")
	assert.Equal(t, fmt.Sprintf("manual-1.%x", now.UnixNano()), ev.Name)
	assert.Empty(t, ev.Annotations, "no update server known, no annotations")
}

// A note cut to the API server's limit stays valid UTF-8: the engine's
// messages carry "…" and "—", and a rune split in two would be sent as
// replacement characters, longer than the limit.
func TestJobEventsRecordCutsOnARune(t *testing.T) {
	c := fake.NewClientset()
	j := &kube.JobEvents{Events: kubetest.Typed(c), Namespace: kube.Namespace, JobName: "manual-3"}
	note := strings.Repeat("x", kube.MaxNote-4) + strings.Repeat("—", 10) // the cut falls inside a dash
	require.NoError(t, j.Record(context.Background(), kube.JobEvent{Warning: true, Reason: kube.ReasonFailed, Action: "Register", Note: note}))
	list, err := c.EventsV1().Events(kube.Namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	got := list.Items[0].Note
	assert.True(t, utf8.ValidString(got), "note %q", got[len(got)-10:])
	assert.LessOrEqual(t, len(got), kube.MaxNote)
	assert.Equal(t, strings.Repeat("x", kube.MaxNote-4)+"...", got)
}

// TestJobEventsRecordAddress: a run that reached an update server says
// which, as structured data status compares with the CoreDNS entry.
func TestJobEventsRecordAddress(t *testing.T) {
	c := fake.NewClientset()
	j := &kube.JobEvents{Events: kubetest.Typed(c), Namespace: kube.Namespace, JobName: "manual-2", JobUID: "uid-2"}
	require.NoError(t, j.Record(context.Background(), kube.JobEvent{Reason: kube.ReasonRegistered, Action: "Register",
		Note: "wrote it (address ::1)", Address: "::1", Server: "smt-azure.susecloud.net"}))
	list, err := c.EventsV1().Events(kube.Namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	assert.Equal(t, map[string]string{kube.AnnotationAddress: "::1", kube.AnnotationServer: "smt-azure.susecloud.net"}, list.Items[0].Annotations)
}

// TestJobEventsRecordRedacts: a note quoting a peer that quoted a secret
// (a denied apply, the operator's message) reaches the Event redacted.
func TestJobEventsRecordRedacts(t *testing.T) {
	c := fake.NewClientset()
	j := &kube.JobEvents{Events: kubetest.Typed(c), Namespace: kube.Namespace, JobName: "manual-4", JobUID: "uid-4", Redact: redact.New("KEPT-CODE-0000")}
	note := "phase write-secret failed: denied: {\"regCode\":\"" + base64.StdEncoding.EncodeToString([]byte("KEPT-CODE-0000")) + "\"} and KEPT-CODE-0000"
	require.NoError(t, j.Record(context.Background(), kube.JobEvent{Warning: true, Reason: kube.ReasonFailed, Action: "Register", Note: note}))
	list, err := c.EventsV1().Events(kube.Namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	assert.Equal(t, `phase write-secret failed: denied: {"regCode":"REDACTED"} and REDACTED`, list.Items[0].Note)
}
