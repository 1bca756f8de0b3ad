package operator_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/operator/operatortest"
)

// What a run's error makes of its exit code (package job maps them): ok
// 0, transient 1, permanent 2.
const (
	ok        = "ok"
	transient = "transient"
	permanent = "permanent"
)

func classOf(err error) string {
	switch {
	case err == nil:
		return ok
	case failure.IsPermanent(err):
		return permanent
	default:
		return transient
	}
}

// written is what the run wrote, which a recovery writes afresh.
var written = operator.Values{URL: "https://smt-azure.example", RegCode: "REGCODE-SECRET", InstanceData: "<document>{}</document>", CertPEM: []byte("PEM")}

// recoveryFor is an operator.Recovery whose every collaborator is f.
func recoveryFor(f *operatortest.Fake) *operator.Recovery {
	return &operator.Recovery{Secrets: f, Operator: f, Record: f, LeaseRef: "cattle-scc-system/registration-engine", Watch: f, Wait: 2 * time.Minute}
}

// failureOf is the Failure a run hands over for the operator's report rep.
func failureOf(rep operator.Report) operator.Failure {
	return operator.Failure{Report: rep, Server: "smt-azure.example", Written: written, SecretRef: "cattle-scc-system/scc-registration"}
}

// TestRecoverAFailedRegistration: a Registration the operator failed for a
// passing cause is deleted and written afresh, once, and the run ends as
// the new Registration does; anything else keeps the report-only
// behaviour and deletes nothing.
func TestRecoverAFailedRegistration(t *testing.T) {
	tests := map[string]struct {
		failed    operator.Report
		next      []operator.Report // the new Registration's reports
		record    *operator.Record
		operator  error
		recreate  error
		noRecover bool   // OPERATOR_RECOVERY=false
		unproven  string // why the handover check did not run

		class     string
		recreated bool
		checked   bool
		outcome   string
		reason    string
		warning   bool
		note      []string
		runFails  bool             // the run fails; its message is in the golden file
		saved     *operator.Record // the last record saved (Time ignored)
	}{
		"503 then active: recovered, exit 0, the Event quotes the failure it replaced": {
			failed: operatortest.FailedReport("scc-registration-old", operatortest.Msg503), next: []operator.Report{operatortest.ActiveReport("scc-registration-new")},
			class:     ok,
			recreated: true, checked: true, outcome: operator.Recovered,
			reason: kube.ReasonOperatorRecovered,
			note:   []string{"had failed registration scc-registration-old: " + operatortest.Msg503, "HTTP 503 Service Unavailable", "registration scc-registration-new is active", "recovery 1 of 3"},
			saved:  &operator.Record{Attempts: 0, Cause: "HTTP 503 Service Unavailable", Message: operatortest.Msg503, Outcome: operator.RecordRecovered, Registration: "scc-registration-new", Target: operatortest.Target},
		},
		"failed again: exit 2 with both messages, the attempt counted, no second recovery": {
			failed: operatortest.FailedReport("scc-registration-old", operatortest.Msg503), next: []operator.Report{operatortest.FailedReport("scc-registration-new", operatortest.Msg503)},
			class:     permanent,
			recreated: true, checked: true, outcome: operator.FailedAgain,
			reason: kube.ReasonOperatorFailed, warning: true,
			runFails: true,
			saved:    &operator.Record{Attempts: 1, Cause: "HTTP 503 Service Unavailable", Message: operatortest.Msg503, Outcome: operator.RecordFailed, Registration: "scc-registration-new", Target: operatortest.Target},
		},
		"the third failed recovery says it was the last": {
			failed: operatortest.FailedReport("scc-registration-old", operatortest.Msg503), next: []operator.Report{operatortest.FailedReport("scc-registration-new", operatortest.Msg503)},
			record:    &operator.Record{Attempts: 2, Cause: "HTTP 503 Service Unavailable", Outcome: operator.RecordFailed, Target: operatortest.Target},
			class:     permanent,
			recreated: true, checked: true, outcome: operator.FailedAgain, reason: kube.ReasonOperatorFailed, warning: true,
			runFails: true,
		},
		"a new registration that needs a person: the remedy for that": {
			failed: operatortest.FailedReport("scc-registration-old", operatortest.Msg503), next: []operator.Report{operatortest.FailedReport("scc-registration-new", operatortest.Msg401)},
			class:     permanent,
			recreated: true, checked: true, outcome: operator.FailedAgain, reason: kube.ReasonOperatorFailed, warning: true,
			runFails: true,
		},
		"503 then pending: written afresh, exit 0 with a warning": {
			failed: operatortest.FailedReport("scc-registration-old", operatortest.Msg503), next: []operator.Report{{State: operator.StatePending, Message: "registration not created yet"}},
			class:     ok,
			recreated: true, checked: true, outcome: operator.Pending, reason: kube.ReasonRegistered, warning: true,
			note:  []string{"recovery 1 of 3", "deleted cattle-scc-system/scc-registration and wrote it afresh", "operator=pending: registration not created yet"},
			saved: &operator.Record{Attempts: 1, Cause: "HTTP 503 Service Unavailable", Message: operatortest.Msg503, Outcome: operator.RecordPending, Target: operatortest.Target},
		},
		"401: needs a person, nothing deleted, the operator not even asked": {
			failed: operatortest.FailedReport("scc-registration-old", operatortest.Msg401),
			class:  permanent, outcome: operator.NeedsPerson,
			reason: kube.ReasonOperatorFailed, warning: true,
			note:     []string{"Needs you (HTTP 401 Unauthorized", "registration-code", "with no delete"},
			runFails: true,
		},
		"the operator is not running: nothing deleted, exit 1, the error says so": {
			failed:   operatortest.FailedReport("scc-registration-old", operatortest.Msg503),
			operator: fmt.Errorf("%w: its Lease kube-system/scc-controllers is held by nobody", operator.ErrOperatorNotRunning),
			class:    transient, checked: true, outcome: operator.OperatorDown,
			reason: kube.ReasonOperatorFailed, warning: true,
			note:     []string{"not recovered, nothing deleted", "rancher/scc-operator is not running", "held by nobody"},
			runFails: true,
		},
		"three recoveries in a row: stopped, nothing deleted": {
			failed: operatortest.FailedReport("scc-registration-old", operatortest.Msg503),
			record: &operator.Record{Attempts: 3, Cause: "HTTP 503 Service Unavailable", Outcome: operator.RecordFailed, Target: operatortest.Target, Time: time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)},
			class:  permanent, outcome: operator.Stopped,
			reason: kube.ReasonOperatorFailed, warning: true,
			runFails: true,
		},
		"three in a row whose causes alternate stop too (503, then 500)": {
			failed: operatortest.FailedReport("scc-registration-old", operatortest.Msg500),
			record: &operator.Record{Attempts: 3, Cause: "HTTP 503 Service Unavailable", Outcome: operator.RecordFailed, Target: operatortest.Target, Time: time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)},
			class:  permanent, outcome: operator.Stopped,
			reason: kube.ReasonOperatorFailed, warning: true,
			runFails: true,
		},
		"two of another cause count: this is the third": {
			failed: operatortest.FailedReport("scc-registration-old", operatortest.Msg500), next: []operator.Report{operatortest.ActiveReport("scc-registration-new")},
			record: &operator.Record{Attempts: 2, Cause: "HTTP 503 Service Unavailable", Outcome: operator.RecordFailed, Target: operatortest.Target},
			class:  ok, recreated: true, checked: true, outcome: operator.Recovered, reason: kube.ReasonOperatorRecovered,
			note: []string{"recovery 3 of 3"},
		},
		"three for another code or URL do not stop a recovery": {
			failed: operatortest.FailedReport("scc-registration-old", operatortest.Msg503), next: []operator.Report{operatortest.ActiveReport("scc-registration-new")},
			record: &operator.Record{Attempts: 3, Cause: "HTTP 503 Service Unavailable", Outcome: operator.RecordFailed, Target: "another"},
			class:  ok, recreated: true, checked: true, outcome: operator.Recovered, reason: kube.ReasonOperatorRecovered,
		},
		"OPERATOR_RECOVERY=false: reported only": {
			failed: operatortest.FailedReport("scc-registration-old", operatortest.Msg503), noRecover: true,
			class: permanent, outcome: operator.NotAttempted, reason: kube.ReasonOperatorFailed, warning: true,
			runFails: true,
		},
		"no handover check this run: nothing deleted": {
			failed: operatortest.FailedReport("scc-registration-old", operatortest.Msg503), unproven: "HANDOVER_TIMEOUT=0 (tests only)",
			class: permanent, outcome: operator.NotAttempted, reason: kube.ReasonOperatorFailed, warning: true,
			runFails: true,
		},
		"the finalizer never let it go: exit 2, never written over, recorded": {
			failed:   operatortest.FailedReport("scc-registration-old", operatortest.Msg503),
			recreate: failure.Permanent(fmt.Errorf("operator: secret cattle-scc-system/scc-registration: %w: waits for its finalizers", operator.ErrSecretTerminating)),
			class:    permanent, recreated: true, checked: true, outcome: operator.Terminating,
			reason: kube.ReasonOperatorFailed, warning: true,
			runFails: true,
			saved:    &operator.Record{Attempts: 1, Cause: "HTTP 503 Service Unavailable", Message: operatortest.Msg503, Outcome: operator.RecordTerminating, Registration: "scc-registration-old", Target: operatortest.Target},
		},
		"the Secret changed since it was read: nothing deleted, the attempt not counted": {
			failed:   operatortest.FailedReport("scc-registration-old", operatortest.Msg503),
			record:   &operator.Record{Attempts: 1, Cause: "HTTP 503 Service Unavailable", Outcome: operator.RecordFailed, Target: operatortest.Target},
			recreate: fmt.Errorf("operator: secret cattle-scc-system/scc-registration: %w: nothing deleted", operator.ErrSecretChanged),
			class:    transient, recreated: true, checked: true, outcome: operator.Incomplete, reason: kube.ReasonOperatorFailed, warning: true,
			saved: &operator.Record{Attempts: 1, Cause: "HTTP 503 Service Unavailable", Outcome: operator.RecordFailed, Target: operatortest.Target},
		},
	}
	// What a failed recovery says: which attempt, the operator's words
	// before and after, the command that clears the record, what was and
	// was not deleted.
	msgs := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := &operatortest.Fake{Reports: tc.next, Kept: tc.record, OperatorErr: tc.operator, RecreateErr: tc.recreate}
			r := recoveryFor(f)
			if tc.noRecover {
				r = nil
			}
			in := failureOf(tc.failed)
			in.Unproven = tc.unproven
			var logs bytes.Buffer
			rr, err := r.Recover(context.Background(), slog.New(slog.NewJSONHandler(&logs, nil)), in)
			assert.Equal(t, tc.class, classOf(err), "%v", err)
			if tc.recreated {
				require.Len(t, f.Recreated, 1, "one recovery, never two in a run")
				c := f.Recreated[0]
				assert.Equal(t, types.UID("uid-1"), c.UID, "the delete's precondition is the Secret the report was read from")
				assert.Equal(t, "41", c.RV)
				assert.Equal(t, written, c.Reg, "written afresh with the values of this run")
			} else {
				assert.Empty(t, f.Recreated, "nothing deleted")
			}
			assert.Equal(t, tc.checked, f.Checked > 0, "the operator's Lease asked")
			assert.Equal(t, tc.outcome, rr.Outcome)
			assert.Equal(t, tc.recreated && tc.recreate == nil, rr.Rewritten, "the Secret was written afresh")
			assert.Equal(t, tc.reason, rr.Event.Reason)
			assert.Equal(t, tc.warning, rr.Event.Warning)
			for _, n := range tc.note {
				assert.Contains(t, rr.Event.Note, n)
			}
			if tc.runFails {
				require.Error(t, err)
				msgs.Add(name, err)
			}
			if err != nil {
				assert.ErrorIs(t, err, operator.ErrOperatorFailed)
			}
			if tc.saved != nil {
				require.NotEmpty(t, f.Saved)
				got := f.Saved[len(f.Saved)-1]
				got.Time = time.Time{}
				want := *tc.saved
				want.Time = time.Time{}
				assert.Equal(t, want, got)
			}
			assert.Contains(t, rr.Attrs(), slog.String("recovery", tc.outcome), "the summary names the recovery")
		})
	}
}

// TestForgetResetsTheRecord: an active Registration ends the recoveries in
// a row, so the next failure starts counting at 1 again.
func TestForgetResetsTheRecord(t *testing.T) {
	f := &operatortest.Fake{Kept: &operator.Record{Attempts: 2, Cause: "HTTP 503 Service Unavailable", Outcome: operator.RecordFailed, Target: operatortest.Target}}
	recoveryFor(f).Forget(context.Background(), slog.New(slog.DiscardHandler), operatortest.ActiveReport("scc-registration-new"))
	require.Len(t, f.Saved, 1)
	got := f.Saved[0]
	got.Time = time.Time{}
	assert.Equal(t, operator.Record{Attempts: 0, Cause: "HTTP 503 Service Unavailable", Outcome: operator.RecordRecovered, Registration: "scc-registration-new", Target: operatortest.Target}, got)

	f = &operatortest.Fake{Kept: &operator.Record{Outcome: operator.RecordRecovered}}
	recoveryFor(f).Forget(context.Background(), slog.New(slog.DiscardHandler), operatortest.ActiveReport("x"))
	assert.Empty(t, f.Saved, "a record already reset is not written again")
}

// TestRecoveryIsRecordedBeforeTheDelete: the attempt is on the Lease before
// the Secret is deleted, so a run killed halfway still counts it.
func TestRecoveryIsRecordedBeforeTheDelete(t *testing.T) {
	f := &operatortest.Fake{RecreateErr: errors.New("killed")}
	_, err := recoveryFor(f).Recover(context.Background(), slog.New(slog.DiscardHandler), failureOf(operatortest.FailedReport("scc-registration-old", operatortest.Msg503)))
	require.Error(t, err)
	require.NotEmpty(t, f.Saved)
	assert.Equal(t, operator.RecordIncomplete, f.Saved[0].Outcome)
	assert.Equal(t, 1, f.Saved[0].Attempts)
	require.Len(t, f.Recreated, 1)
	assert.Equal(t, 1, f.Recreated[0].SavedBefore, "the attempt was on the Lease when the delete ran")
}

// TestRecoveryNotRecordedNothingDeleted: an attempt that cannot be
// recorded is not made: the record is what stops a loop of recoveries.
func TestRecoveryNotRecordedNothingDeleted(t *testing.T) {
	f := &operatortest.Fake{SaveErr: errors.New("leases \"registration-engine\" is forbidden")}
	_, err := recoveryFor(f).Recover(context.Background(), slog.New(slog.DiscardHandler), failureOf(operatortest.FailedReport("scc-registration-old", operatortest.Msg503)))
	require.Error(t, err)
	assert.Empty(t, f.Recreated, "nothing deleted without the record")
	assert.Equal(t, transient, classOf(err), "a retry may record it")
}

// TestRecoveryConfig: OPERATOR_LEASE must name namespace/name; recovery
// off assembles no operator.Recovery, so nothing is deleted.
func TestRecoveryConfig(t *testing.T) {
	msgs := testkit.NewMessages(t)
	for lease, valid := range map[string]bool{"kube-system/scc-controllers": true, "scc-controllers": false, "/x": false, "ns/": false, "a/b/c": false} {
		err := operator.Config{Enabled: true, OperatorLease: lease}.Validate()
		if valid {
			assert.NoError(t, err, lease)
			continue
		}
		require.Error(t, err, lease)
		msgs.Add(fmt.Sprintf("OPERATOR_LEASE=%q", lease), err)
	}
	assert.Nil(t, operator.NewRecovery(operator.Config{OperatorLease: "kube-system/scc-controllers"}, nil, nil, nil, nil, 0, nil), "OPERATOR_RECOVERY=false")
}

// TestRecoveriesStopWhenTheCausesAlternate: an update server whose
// failures alternate (503, 502, 503, …) is recovered MaxRecoveries times in
// a row and then left to a person, run after run: the count is per code and
// URL, not per cause.
func TestRecoveriesStopWhenTheCausesAlternate(t *testing.T) {
	f := &operatortest.Fake{}
	msgs := []string{operatortest.Msg503, operatortest.Msg500}
	deletes := 0
	for run := range 8 {
		f.Reports = []operator.Report{operatortest.FailedReport("scc-registration-new", msgs[(run+1)%2])}
		_, err := recoveryFor(f).Recover(context.Background(), slog.New(slog.DiscardHandler), failureOf(operatortest.FailedReport("scc-registration-old", msgs[run%2])))
		require.Error(t, err)
		deletes = len(f.Recreated)
	}
	assert.Equal(t, operator.MaxRecoveries, deletes, "8 runs, alternating causes: deleted %d times", deletes)
	require.NotNil(t, f.Kept)
	assert.Equal(t, operator.MaxRecoveries, f.Kept.Attempts)
}

// TestRecoveryRecordKeepsNoSecretAndABoundedMessage: the operator's words
// may quote the code; the record on the Lease (which whoever may read
// Leases reads, and status prints) keeps them redacted, and cut so that no
// message can make the annotation too large to write.
func TestRecoveryRecordKeepsNoSecretAndABoundedMessage(t *testing.T) {
	long := operatortest.Msg503 + " for regCode REGCODE-SECRET " + strings.Repeat("é", 4000)
	f := &operatortest.Fake{Reports: []operator.Report{operatortest.FailedReport("scc-registration-new", long)}}
	r := recoveryFor(f)
	r.Redact = func(s string) string { return strings.ReplaceAll(s, "REGCODE-SECRET", "REDACTED") }
	_, err := r.Recover(context.Background(), slog.New(slog.DiscardHandler), failureOf(operatorFailed(long)))
	require.Error(t, err)
	require.NotEmpty(t, f.Saved)
	for _, rec := range f.Saved {
		assert.NotContains(t, rec.Message, "REGCODE-SECRET")
		assert.Contains(t, rec.Message, "REDACTED")
		assert.LessOrEqual(t, len(rec.Message), operator.MaxRecordMessage)
		assert.True(t, utf8.ValidString(rec.Message), "cut on a rune boundary")
	}
}

// TestRecoveryRecordEscapesForeignText: the operator's message is foreign
// text, and the record on the Lease is printed by kubectl -o jsonpath and
// by status; ESC, C1 controls and bidi overrides are kept escaped there
// (escape.Record: redacted, escaped, cut), not raw.
func TestRecoveryRecordEscapesForeignText(t *testing.T) {
	msg := operatortest.Msg503 + " \x1b]52;c;Y3VybA==\a\x1b[2K\u009b1A \u202etxt.exe REGCODE-SECRET"
	f := &operatortest.Fake{Reports: []operator.Report{operatortest.FailedReport("scc-registration-new", msg)}}
	r := recoveryFor(f)
	r.Redact = func(s string) string { return strings.ReplaceAll(s, "REGCODE-SECRET", "REDACTED") }
	_, err := r.Recover(context.Background(), slog.New(slog.DiscardHandler), failureOf(operatorFailed(msg)))
	require.Error(t, err)
	require.NotEmpty(t, f.Saved)
	for _, rec := range f.Saved {
		for _, c := range rec.Message {
			assert.False(t, c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == '\u202e', "control %U in %q", c, rec.Message)
		}
		assert.Contains(t, rec.Message, `\x1b]52;c;Y3VybA==\a\x1b[2K\u009b1A \u202etxt.exe REDACTED`)
	}
}

func operatorFailed(msg string) operator.Report {
	return operatortest.FailedReport("scc-registration-old", msg)
}
