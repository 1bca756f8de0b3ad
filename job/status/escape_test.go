package status

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rancher/registration-engine/job/escape"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
)

// TestWriteTextEscapesForeignText: whoever may create an Event in the
// namespace, hold the Lease or write the Secret's URL cannot send a
// terminal control sequence to the admin who runs status: the verdict
// stays the first line, and no ESC, C1 or OSC reaches the output.
func TestWriteTextEscapesForeignText(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const hostile = "\x1b[1A\x1b[2K\rRegistered: all fine\x1b]52;c;cm0gLXJmIH4=\x07\u009b2J"
	renewed := metav1.NewMicroTime(now.Add(-time.Minute))
	src := &source{
		secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: operator.SecretName, Namespace: operator.Namespace},
			Data: map[string][]byte{operator.KeyRegistrationType: []byte("online"), operator.KeyRegCode: []byte("CODE"),
				operator.KeyRegistrationURL: []byte("https://smt-azure.susecloud.net/" + hostile)}},
		lease: &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pod" + hostile), LeaseDurationSeconds: ptr.To(int32(900)), RenewTime: &renewed}},
		jobs:  []batchv1.Job{{ObjectMeta: metav1.ObjectMeta{Name: "manual-1", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}},
		events: []eventsv1.Event{{Regarding: corev1.ObjectReference{Kind: "Job", Name: "manual-1"}, ReportingController: kube.ReportingController,
			ReportingInstance: "x" + hostile, Reason: kube.ReasonRegistered, Note: "wrote it" + hostile, EventTime: metav1.NewMicroTime(now.Add(-time.Minute))}},
	}
	r := Gather(context.Background(), src, Options{Exits: testExits, Now: now})
	var out bytes.Buffer
	require.NoError(t, r.WriteText(&out))
	text := out.String()
	for _, c := range []string{"\x1b", "\x07", "\r", "\u009b"} {
		assert.NotContains(t, text, c)
	}
	first, _, _ := strings.Cut(text, "\n")
	assert.Equal(t, escape.Printable(r.Verdict.Line), first, "the verdict is the first line")
	assert.NotContains(t, first, "\x1b")
	assert.Contains(t, text, `wrote it\x1b[1A\x1b[2K\rRegistered: all fine\x1b]52;c;cm0gLXJmIH4=\a\u009b2J`, "the note, escaped")
	assert.Contains(t, text, `pod\x1b[1A`, "the Lease holder, escaped")
	assert.Contains(t, text, `not a pod of this Job`, "an engine Event from no pod of the Job is flagged")
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		assert.False(t, strings.HasPrefix(l, "Registered"), "no forged line: %q", l)
	}
}

// TestGatherPrefersTheJobsOwnEvents: anyone with create on events can
// write an Event naming the engine as its controller; the one status
// shows for a Job is the engine's from a pod of that Job, even when a
// forged one is newer.
func TestGatherPrefersTheJobsOwnEvents(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	event := func(instance, reason string, m int) eventsv1.Event {
		return eventsv1.Event{Regarding: corev1.ObjectReference{Kind: "Job", Name: "manual-1"}, ReportingController: kube.ReportingController,
			ReportingInstance: instance, Reason: reason, EventTime: metav1.NewMicroTime(now.Add(time.Duration(m) * time.Minute))}
	}
	src := &source{
		jobs: []batchv1.Job{{ObjectMeta: metav1.ObjectMeta{Name: "manual-1", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}},
		pods: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "manual-1-abcde", Labels: map[string]string{JobNameLabel: "manual-1"}}}},
		events: []eventsv1.Event{
			event("manual-1-abcde", kube.ReasonFailed, -30),
			event("attacker", kube.ReasonRegistered, -1),
		},
	}
	r := Gather(context.Background(), src, Options{Exits: testExits, Now: now})
	require.Len(t, r.Jobs.Items, 1)
	ev := r.Jobs.Items[0].Event
	require.NotNil(t, ev)
	assert.Equal(t, kube.ReasonFailed, ev.Reason, "the Job's own pod's Event, not the newer forged one")
	assert.True(t, ev.FromJobPod)
	assert.Equal(t, "manual-1-abcde", ev.Instance)
}

// TestWriteJSONEscapesForeignText: `status -o json` piped to a terminal
// (or read by a tool that prints its strings) carries no C1 control, DEL or
// bidi override raw; encoding/json escapes only C0. A JSON reader gets the
// foreign strings back unchanged.
func TestWriteJSONEscapesForeignText(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const hostile = "\x1b[2K\u009b2J\u009d52;c;eA==\u009c\x7f\u202eedoc\U000e0041"
	renewed := metav1.NewMicroTime(now.Add(-time.Minute))
	src := &source{
		secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: operator.SecretName, Namespace: operator.Namespace},
			Data: map[string][]byte{operator.KeyRegistrationType: []byte("online"), operator.KeyRegCode: []byte("CODE"),
				operator.KeyRegistrationURL: []byte("https://smt-azure.susecloud.net/" + hostile)}},
		lease: &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pod" + hostile), LeaseDurationSeconds: ptr.To(int32(900)), RenewTime: &renewed}},
		jobs:  []batchv1.Job{{ObjectMeta: metav1.ObjectMeta{Name: "manual-1", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}},
		events: []eventsv1.Event{{Regarding: corev1.ObjectReference{Kind: "Job", Name: "manual-1"}, ReportingController: kube.ReportingController,
			ReportingInstance: "x" + hostile, Reason: kube.ReasonRegistered, Note: "wrote it" + hostile, EventTime: metav1.NewMicroTime(now.Add(-time.Minute))}},
	}
	r := Gather(context.Background(), src, Options{Exits: testExits, Now: now})
	var out bytes.Buffer
	require.NoError(t, r.WriteJSON(&out))
	doc := out.String()
	for _, r := range doc {
		assert.False(t, (r < 0x20 && r != '\n') || (r >= 0x7f && r <= 0x9f) || r == '\u202e' || r == '\U000e0041', "%U raw in the JSON report", r)
	}
	assert.Contains(t, doc, `wrote it\u001b[2K\u009b2J\u009d52;c;eA==\u009c\u007f\u202eedoc\udb40\udc41`, "the note, escaped")
	var back struct {
		Jobs struct {
			Items []struct {
				Event struct {
					Note string `json:"note"`
				} `json:"event"`
			} `json:"items"`
		} `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &back))
	require.Len(t, back.Jobs.Items, 1)
	assert.Equal(t, "wrote it"+hostile, back.Jobs.Items[0].Event.Note, "a JSON reader gets the note as it was")
}
