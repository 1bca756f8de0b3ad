package kube_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/redact"
)

// TestJobEventsRecord: one Event per run on the Job that ran it, its note
// cut to the API server's limit.
func TestJobEventsRecord(t *testing.T) {
	c := fake.NewClientset()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	j := &kube.JobEvents{Events: kubetest.Typed(c), Namespace: operator.Namespace, JobName: "manual-1", JobUID: "uid-1", Instance: "manual-1-abcde", Now: func() time.Time { return now }}
	long := make([]byte, 3000)
	for i := range long {
		long[i] = 'x'
	}
	require.NoError(t, j.Record(context.Background(), kube.JobEvent{Warning: true, Reason: kube.ReasonOperatorFailed, Action: "Report", Note: string(long)}))
	list, err := c.EventsV1().Events(operator.Namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	ev := list.Items[0]
	assert.Equal(t, corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: operator.Namespace, Name: "manual-1", UID: "uid-1"}, ev.Regarding)
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
	j := &kube.JobEvents{Events: kubetest.Typed(c), Namespace: operator.Namespace, JobName: "manual-3"}
	note := strings.Repeat("x", kube.MaxNote-4) + strings.Repeat("—", 10) // the cut falls inside a dash
	require.NoError(t, j.Record(context.Background(), kube.JobEvent{Warning: true, Reason: kube.ReasonFailed, Action: "Register", Note: note}))
	list, err := c.EventsV1().Events(operator.Namespace).List(context.Background(), metav1.ListOptions{})
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
	j := &kube.JobEvents{Events: kubetest.Typed(c), Namespace: operator.Namespace, JobName: "manual-2", JobUID: "uid-2"}
	require.NoError(t, j.Record(context.Background(), kube.JobEvent{Reason: kube.ReasonRegistered, Action: "Register",
		Note: "wrote it (address ::1)", Address: "::1", Server: "smt-azure.susecloud.net"}))
	list, err := c.EventsV1().Events(operator.Namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	assert.Equal(t, map[string]string{kube.AnnotationAddress: "::1", kube.AnnotationServer: "smt-azure.susecloud.net"}, list.Items[0].Annotations)
}

// TestJobEventsRecordRedacts: a note quoting a peer that quoted a secret
// (a denied apply, the operator's message) reaches the Event redacted.
func TestJobEventsRecordRedacts(t *testing.T) {
	c := fake.NewClientset()
	j := &kube.JobEvents{Events: kubetest.Typed(c), Namespace: operator.Namespace, JobName: "manual-4", JobUID: "uid-4", Redact: redact.New("KEPT-CODE-0000")}
	note := "phase write-secret failed: denied: {\"regCode\":\"" + base64.StdEncoding.EncodeToString([]byte("KEPT-CODE-0000")) + "\"} and KEPT-CODE-0000"
	require.NoError(t, j.Record(context.Background(), kube.JobEvent{Warning: true, Reason: kube.ReasonFailed, Action: "Register", Note: note}))
	list, err := c.EventsV1().Events(operator.Namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	assert.Equal(t, `phase write-secret failed: denied: {"regCode":"REDACTED"} and REDACTED`, list.Items[0].Note)
}

// TestJobEventsRecordEscapes: a note quoting the operator's message (or a
// peer's error) reaches the Event with every character a terminal acts on
// escaped, after redaction and before the cut: kubectl describe job and
// kubectl get events print notes as they are, and an ESC sequence there
// could forge a "Normal Registered" line or, with OSC 52, fill the
// clipboard of whoever looks.
func TestJobEventsRecordEscapes(t *testing.T) {
	const hostile = "\x1b[1A\x1b[2K\rNormal   Registered   wrote it\x1b]52;c;cm0gLXJmIH4=\x07\u009b2J\x7f\u202eedoc"
	tests := map[string]struct {
		note, want string
	}{
		"ESC, CSI, OSC 52, C1, DEL and a bidi override": {
			note: "registration failed: " + hostile,
			want: `registration failed: \x1b[1A\x1b[2K\rNormal   Registered   wrote it\x1b]52;c;cm0gLXJmIH4=\a\u009b2J\x7f\u202eedoc`,
		},
		"redacted before it is escaped": {
			note: "code CODE-\x1b0000 refused\n",
			want: `code REDACTED refused\n`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientset()
			j := &kube.JobEvents{Events: kubetest.Typed(c), Namespace: operator.Namespace, JobName: "manual-5", Redact: redact.New("CODE-\x1b0000")}
			require.NoError(t, j.Record(context.Background(), kube.JobEvent{Warning: true, Reason: kube.ReasonOperatorFailed, Action: "Report",
				Note: tc.note, Server: "smt\x1b]0;x\x07.susecloud.net"}))
			list, err := c.EventsV1().Events(operator.Namespace).List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			require.Len(t, list.Items, 1)
			ev := list.Items[0]
			assert.Equal(t, tc.want, ev.Note)
			assert.Equal(t, `smt\x1b]0;x\a.susecloud.net`, ev.Annotations[kube.AnnotationServer])
			for _, r := range ev.Note {
				assert.False(t, r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == '\u202e', "%U left in the note %q", r, ev.Note)
			}
		})
	}
}

// TestJobEventsRecordEscapesBeforeTheCut: the escaped note is what is cut
// to the API server's limit, so an escaped note is never refused as too
// long.
func TestJobEventsRecordEscapesBeforeTheCut(t *testing.T) {
	c := fake.NewClientset()
	j := &kube.JobEvents{Events: kubetest.Typed(c), Namespace: operator.Namespace, JobName: "manual-6"}
	note := ""
	for range kube.MaxNote {
		note += "\x1b"
	}
	require.NoError(t, j.Record(context.Background(), kube.JobEvent{Warning: true, Reason: kube.ReasonFailed, Action: "Register", Note: note}))
	list, err := c.EventsV1().Events(operator.Namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	got := list.Items[0].Note
	assert.LessOrEqual(t, len(got), kube.MaxNote)
	assert.NotContains(t, got, "\x1b")
}
