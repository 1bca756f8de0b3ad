package kube

import (
	"cmp"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rancher/registration-engine/job/escape"
	"github.com/rancher/registration-engine/job/redact"
)

// Reasons of the Events a run records on its Job.
const (
	// ReasonRegistered: the run wrote the Secret (Normal).
	ReasonRegistered = "Registered"
	// ReasonUnchanged: the Secret already held the wanted values (Normal).
	ReasonUnchanged = "Unchanged"
	// ReasonOperatorFailed: the operator's Registration has Failure=True
	// (Warning); the note carries its message and the remedy.
	ReasonOperatorFailed = "OperatorRegistrationFailed"
	// ReasonOperatorRecovered: the operator had failed the Registration for
	// a passing cause and the run recovered it (Normal); the note quotes
	// the failure it replaced.
	ReasonOperatorRecovered = "OperatorRegistrationRecovered"
	// ReasonFailed: the engine's own run failed (Warning); the note names
	// the phase.
	ReasonFailed = "RegistrationFailed"
	// ReasonSkipped: another run held the Lease, so this one did nothing
	// (Normal); the note names the holder and until when.
	ReasonSkipped = "Skipped"
	// ReasonWaiting: the run failed while Azure may still be propagating
	// the identity or its role assignment, in the cluster's first contact
	// (Normal: no verdict yet); the note says the attempt, when the next
	// comes and when a person is needed.
	ReasonWaiting = "WaitingForAzure"
	// ReasonCodeMissing: no registration code is configured and the
	// Secret holds none, so the run wrote nothing and waits for one
	// (Warning, exit 0); the note says how to set it.
	ReasonCodeMissing = "RegistrationCodeMissing"

	// AnnotationAddress and AnnotationServer on a run's Event hold the
	// update server's address the run reached and its name, so that status
	// can compare them with the CoreDNS entry without reading the note.
	AnnotationAddress = "registration-engine.cattle.io/address"
	AnnotationServer  = "registration-engine.cattle.io/server"

	// ReportingController names the engine in its Events.
	ReportingController = "registration-engine"
	// maxNote is the API server's limit on an Event's note.
	maxNote = 1024
)

type (
	// EventInterface creates one namespace's events.k8s.io/v1 Events.
	EventInterface interface {
		Create(ctx context.Context, event *eventsv1.Event, opts metav1.CreateOptions) (*eventsv1.Event, error)
	}
	// EventsGetter hands out the per-namespace interface.
	EventsGetter interface {
		Events(namespace string) EventInterface
	}
)

// JobEvent is one Event about the Job that ran the engine.
type JobEvent struct {
	// Warning makes it type Warning; otherwise Normal.
	Warning bool
	// Reason is one of the Reason constants; Action what the engine did
	// (Register, Report).
	Reason, Action string
	// Note is the human-readable text, one line: redacted, every
	// character a terminal could act on escaped (escape.Printable), cut
	// to 1 kB.
	Note string
	// Address and Server are the update server the run reached, when
	// known; they become the Event's annotations.
	Address, Server string
}

// JobEvents records Events on the Job that runs the engine, so that
// `kubectl describe job` and `kubectl get events` show what a run did.
type JobEvents struct {
	Events    EventsGetter
	Namespace string
	// JobName and JobUID come from the pod's labels (downward API).
	JobName, JobUID string
	// Instance is the reporting instance: the pod's name.
	Instance string
	Now      func() time.Time
	// Redact redacts the note and the annotations: a note quotes a peer's
	// error or the operator's message, either of which may quote a secret.
	Redact *redact.Registry
}

// Record creates e on the Job. Its error is for a warning in the log only:
// an Event is a report, never a reason to fail a run.
func (j *JobEvents) Record(ctx context.Context, e JobEvent) error {
	typ := corev1.EventTypeNormal
	if e.Warning {
		typ = corev1.EventTypeWarning
	}
	now := time.Now
	if j.Now != nil {
		now = j.Now
	}
	// Redacted, escaped (the note quotes a peer or the operator, and
	// kubectl describe and kubectl get events print it to a terminal as it
	// is), then cut: escape.Record, as every record the engine keeps.
	note := escape.Record(e.Note, j.Redact.String, maxNote)
	var annotations map[string]string
	for k, v := range map[string]string{AnnotationAddress: e.Address, AnnotationServer: e.Server} {
		if v = escape.Printable(j.Redact.String(v)); v != "" {
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[k] = v
		}
	}
	t := now()
	ev := &eventsv1.Event{
		// Named as client-go's recorders name theirs: a generateName
		// ending in a dot is refused.
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", j.JobName, t.UnixNano()), Namespace: j.Namespace, Annotations: annotations},
		EventTime:           metav1.NewMicroTime(t),
		ReportingController: ReportingController,
		ReportingInstance:   cmp.Or(j.Instance, ReportingController),
		Action:              e.Action,
		Reason:              e.Reason,
		Type:                typ,
		Note:                note,
		Regarding: corev1.ObjectReference{
			APIVersion: "batch/v1",
			Kind:       "Job",
			Namespace:  j.Namespace,
			Name:       j.JobName,
			UID:        types.UID(j.JobUID),
		},
	}
	if _, err := j.Events.Events(j.Namespace).Create(ctx, ev, metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("kube: event %s on job %s/%s: %w", e.Reason, j.Namespace, j.JobName, APIError(err, Access{Verbs: []string{"create"}, Resource: "events.events.k8s.io", Namespace: j.Namespace}))
	}
	return nil
}
