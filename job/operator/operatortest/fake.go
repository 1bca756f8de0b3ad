// Package operatortest holds what the tests of the operator step share: one fake
// of every collaborator job/operator and the run's operator step talk to.
// Only tests import it.
package operatortest

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
)

// Fake is the operator (its reports and its Lease), the Secret store's
// Recreate, the engine's Lease record and the Event recorder at once;
// reports are handed out one per Report, the last repeated.
type Fake struct {
	Reports []operator.Report
	Waits   []time.Duration
	Events  []kube.JobEvent
	// OperatorErr is Check's answer; RecreateErr Recreate's.
	OperatorErr error
	RecreateErr error
	// RecreateBlocks makes Recreate wait, as in the wait for the
	// operator's finalizer, until its context ends, and return the cause
	// as job/kube does. InRecreate is closed when it starts waiting.
	RecreateBlocks bool
	InRecreate     chan struct{}
	Recreated      []RecreateCall
	// Kept is the record on the Lease; Saved every record saved.
	Kept  *operator.Record
	Saved []operator.Record
	// Checked counts the looks at the operator's Lease.
	Checked int
	// LoadErr is LoadRecovery's answer; SaveErr SaveRecovery's.
	LoadErr error
	SaveErr error
}

// RecreateCall is one Recreate: the values written afresh and the
// precondition of the delete.
type RecreateCall struct {
	Reg operator.Values
	UID types.UID
	RV  string
	// SavedBefore is how many records had been saved when the delete ran.
	SavedBefore int
}

// Report hands out the next report.
func (f *Fake) Report(_ context.Context, wait time.Duration) operator.Report {
	f.Waits = append(f.Waits, wait)
	r := f.Reports[0]
	if len(f.Reports) > 1 {
		f.Reports = f.Reports[1:]
	}
	return r
}

// Record keeps the run's Event.
func (f *Fake) Record(_ context.Context, e kube.JobEvent) error {
	f.Events = append(f.Events, e)
	return nil
}

// Recreate records the call; the operator lets the Secret go in 300 ms.
func (f *Fake) Recreate(ctx context.Context, r operator.Values, uid types.UID, rv string, _ time.Duration) (operator.RecreateResult, error) {
	f.Recreated = append(f.Recreated, RecreateCall{r, uid, rv, len(f.Saved)})
	if f.RecreateBlocks {
		if f.InRecreate != nil {
			close(f.InRecreate)
		}
		<-ctx.Done()
		return operator.RecreateResult{Deleted: true}, fmt.Errorf("waiting for the deleted secret to go: %w", context.Cause(ctx))
	}
	if f.RecreateErr != nil {
		return operator.RecreateResult{Deleted: true}, f.RecreateErr
	}
	return operator.RecreateResult{Deleted: true, Gone: 300 * time.Millisecond}, nil
}

// Check is the operator's Lease, renewed 2 s ago by scc-operator-7d9.
func (f *Fake) Check(context.Context) (operator.Liveness, error) {
	f.Checked++
	return operator.Liveness{Holder: "scc-operator-7d9", Age: 2 * time.Second}, f.OperatorErr
}

// Ref names the operator's Lease.
func (f *Fake) Ref() string { return "kube-system/scc-controllers" }

// Load returns Kept.
func (f *Fake) Load(context.Context) (operator.Record, bool, error) {
	if f.LoadErr != nil {
		return operator.Record{}, false, f.LoadErr
	}
	if f.Kept == nil {
		return operator.Record{}, false, nil
	}
	return *f.Kept, true, nil
}

// Save keeps rec as Kept and in Saved; nil clears the record.
func (f *Fake) Save(_ context.Context, rec *operator.Record) error {
	if rec == nil {
		f.Kept = nil
		return nil
	}
	if f.SaveErr != nil {
		return f.SaveErr
	}
	cp := *rec
	f.Kept = &cp
	f.Saved = append(f.Saved, cp)
	return nil
}

// The operator's failure messages the tests meet, as connect-ng words
// them, and the Target the reports carry.
const (
	Msg503 = "Cannot register system to SCC: Error: Registration server returned 'Service Unavailable' (503)"
	Msg500 = "Cannot register system to SCC: Error: Registration server returned 'Internal Server Error' (500)"
	Msg401 = "non-recoverable HTTP error encountered; to reregister Rancher, resolve connection issues then try again. Original error: Cannot register system to SCC: Error: Registration server returned 'Unknown Registration Code.' (401)"
	Target = "0123456789ab"
)

// FailedReport is the operator's report of a Failed Registration read
// from Secret uid-1 at resourceVersion 41.
func FailedReport(name, msg string) operator.Report {
	return operator.Report{State: operator.StateFailed, Registration: name, Message: msg, Verdict: operator.Classify(msg), SecretUID: "uid-1", SecretResourceVersion: "41", Target: Target}
}

// ActiveReport is the operator's report of an active Registration.
func ActiveReport(name string) operator.Report {
	return operator.Report{State: operator.StateActive, Registration: name, SecretUID: "uid-2", SecretResourceVersion: "57", Target: Target}
}
