package kube

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationLastRun on the engine's Lease holds the record of the last run
// that did something (a run skipped for a held Lease records nothing): the
// retry rule's record (job/retry.Record), which this package stores as it
// is given and never reads. Events are gone after an hour; this stays until
// the next run, and kubectl alone reads it:
//
//	kubectl -n cattle-scc-system get lease registration-engine -o jsonpath='{.metadata.annotations.registration-engine\.cattle\.io/last-run}'
const AnnotationLastRun = "registration-engine.cattle.io/last-run"

// Stored is what the engine's Lease holds of the runs: the last run's
// record as it was written ("" when none), and when the API server created
// the Lease (the engine's first run), which nothing that may write the
// Lease can move.
type Stored struct {
	Record  string
	Created time.Time
}

// Follow computes the record to store from the one stored before (prev, ""
// when none); it is called again with the fresh value when another writer
// got in between the read and the write.
type Follow func(prev string) (string, error)

// LastRun reads what the Lease holds of the runs; ok is false when there
// is no Lease. The retry CronJob's looks read it to decide whether an
// attempt is due; an error is the API server's (nothing was read).
func (l *Lease) LastRun(ctx context.Context) (s Stored, ok bool, err error) {
	ns := l.Namespace
	cur, err := l.Leases.Leases(ns).Get(ctx, l.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("kube: lease %s/%s: run record: %w", ns, l.Name, APIError(err, Access{Verbs: []string{"get"}, Resource: "leases/" + l.Name, Namespace: ns}))
	}
	return Stored{Record: cur.Annotations[AnnotationLastRun], Created: cur.CreationTimestamp.Time}, true, nil
}

// SaveRun stores the record follow computes from the one there, in one
// read and one write (UpdateAnnotation): for a run that ends without
// holding the Lease; one that holds it records with the release (Release).
func (l *Lease) SaveRun(ctx context.Context, follow Follow) error {
	return l.UpdateAnnotation(ctx, AnnotationLastRun, func(raw string, _ bool) (*string, error) {
		v, err := follow(raw)
		return &v, err
	})
}
