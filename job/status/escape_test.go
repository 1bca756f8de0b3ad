package status

import (
	"bytes"
	"context"
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

	"github.com/rancher/registration-engine/job/kube"
)

func TestPrintable(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"plain text, spaces, arrows and dashes stay":      {"smt-azure.susecloud.net → 20.1.2.3 — ok", "smt-azure.susecloud.net → 20.1.2.3 — ok"},
		"ESC cursor up and erase line":                    {"x\x1b[1A\x1b[2KRegistered: fine", `x\x1b[1A\x1b[2KRegistered: fine`},
		"OSC 52 clipboard write, BEL-terminated":          {"\x1b]52;c;Y3VybCBldmlsfHNo\x07", `\x1b]52;c;Y3VybCBldmlsfHNo\a`},
		"8-bit CSI (C1) as UTF-8":                         {"a\u009b2Jb", `a\u009b2Jb`},
		"newline and carriage return cannot forge a line": {"note\r\nRegistered: ok", `note\r\nRegistered: ok`},
		"DEL":                      {"a\x7fb", `a\x7fb`},
		"bidi override":            {"abc\u202edcba", `abc\u202edcba`},
		"bytes that are not UTF-8": {"a\xff\xc3b", `a\xff\xc3b`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Printable(tc.in)
			assert.Equal(t, tc.want, got)
			for _, r := range got {
				assert.False(t, r < 0x20 || (r >= 0x7f && r <= 0x9f), "control character %U left in %q", r, got)
			}
		})
	}
}

// TestWriteTextEscapesForeignText: whoever may create an Event in the
// namespace, hold the Lease or write the Secret's URL cannot send a
// terminal control sequence to the admin who runs status: the verdict
// stays the first line, and no ESC, C1 or OSC reaches the output.
func TestWriteTextEscapesForeignText(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const hostile = "\x1b[1A\x1b[2K\rRegistered: all fine\x1b]52;c;cm0gLXJmIH4=\x07\u009b2J"
	renewed := metav1.NewMicroTime(now.Add(-time.Minute))
	src := &source{
		secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: kube.SecretName, Namespace: kube.Namespace},
			Data: map[string][]byte{kube.KeyRegistrationType: []byte("online"), kube.KeyRegCode: []byte("CODE"),
				kube.KeyRegistrationURL: []byte("https://smt-azure.susecloud.net/" + hostile)}},
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
	assert.Equal(t, Printable(r.Verdict.Line), first, "the verdict is the first line")
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
