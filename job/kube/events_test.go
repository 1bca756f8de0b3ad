package kube_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/job/redact"
)

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
			j := &kube.JobEvents{Events: kubetest.Typed(c), Namespace: kube.Namespace, JobName: "manual-5", Redact: redact.New("CODE-\x1b0000")}
			require.NoError(t, j.Record(context.Background(), kube.JobEvent{Warning: true, Reason: kube.ReasonOperatorFailed, Action: "Report",
				Note: tc.note, Server: "smt\x1b]0;x\x07.susecloud.net"}))
			list, err := c.EventsV1().Events(kube.Namespace).List(context.Background(), metav1.ListOptions{})
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
	j := &kube.JobEvents{Events: kubetest.Typed(c), Namespace: kube.Namespace, JobName: "manual-6"}
	note := ""
	for range kube.MaxNote {
		note += "\x1b"
	}
	require.NoError(t, j.Record(context.Background(), kube.JobEvent{Warning: true, Reason: kube.ReasonFailed, Action: "Register", Note: note}))
	list, err := c.EventsV1().Events(kube.Namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	got := list.Items[0].Note
	assert.LessOrEqual(t, len(got), kube.MaxNote)
	assert.NotContains(t, got, "\x1b")
}
