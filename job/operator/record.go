package operator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rancher/registration-engine/job/escape"
	"github.com/rancher/registration-engine/job/kube"
)

// The memory of the engine's recoveries of Failed Registrations. It must
// survive the Secret's deletion (a recovery deletes it), so it lives on the
// engine's own Lease, as one annotation that a person can read and clear:
//
//	kubectl -n cattle-scc-system annotate lease registration-engine registration-engine.cattle.io/operator-recovery-
const (
	// AnnotationRecovery on the engine's Lease holds the Record as JSON.
	AnnotationRecovery = "registration-engine.cattle.io/operator-recovery"
	// MaxRecoveries is how many recoveries in a row, for the same code and
	// URL and with no active Registration in between, the engine makes
	// before it stops and leaves the cluster to a person (exit 2), until the
	// code or the URL changes or the record is cleared. The causes need not
	// match: an update server whose failures alternate (503, then 502;
	// refused, then a timeout) would otherwise be deleted and re-registered
	// on every run, for ever.
	MaxRecoveries = 3
	// MaxRecordMessage caps the operator's message the record keeps, in
	// bytes: a message of any size must not make the annotation, and so
	// every later run's record write, fail.
	MaxRecordMessage = 1024
)

// RecoveryLimit words the rule of MaxRecoveries for --help and the docs:
// the recoveries counted are those in a row for one code and URL, whatever
// their causes. TestRecoveryLimitWording holds it, the docs and Decide to
// one another.
var RecoveryLimit = "at most once per run and " + spelled(MaxRecoveries) + " times in a row for the same code and URL, whatever the cause"

// spelled is n as a word, as the docs write small counts.
func spelled(n int) string {
	if words := []string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}; n >= 0 && n < len(words) {
		return words[n]
	}
	return fmt.Sprint(n)
}

// Outcomes a Record keeps.
const (
	// RecordFailed: the new Registration failed again.
	RecordFailed = "failed"
	// RecordPending: the new Registration was neither active nor failed
	// when OPERATOR_WAIT ended.
	RecordPending = "pending"
	// RecordTerminating: the deleted Secret was still held by a finalizer
	// when the wait for it ended.
	RecordTerminating = "terminating"
	// RecordIncomplete: the Secret was deleted but could not be written
	// afresh; the next run writes it.
	RecordIncomplete = "incomplete"
	// RecordRecovered: the new Registration became active; Attempts is 0.
	RecordRecovered = "recovered"
)

// Record is what the engine remembers of its recoveries.
type Record struct {
	// Attempts counts the recoveries in a row for the same Target, whatever
	// their causes, with no active Registration seen in between. At
	// MaxRecoveries the engine stops.
	Attempts int `json:"attempts"`
	// Time is when the last recovery was made (or the record reset).
	Time time.Time `json:"time"`
	// Cause is the cause of the failure the last recovery replaced
	// (Verdict.Cause).
	Cause string `json:"cause"`
	// Message is the operator's last failure message: the one the last
	// recovery ended with, else the one it replaced; redacted by the run's
	// secrets, escaped and cut to MaxRecordMessage bytes (escape.Record).
	Message string `json:"message,omitempty"`
	// Outcome is one of the Record constants.
	Outcome string `json:"outcome"`
	// Registration is the Registration the last recovery led to.
	Registration string `json:"registration,omitempty"`
	// Target is TargetHash of the code and URL the recoveries were for.
	Target string `json:"target"`
}

// Exhausted says whether another recovery for target would be one too
// many.
func (r Record) Exhausted(target string) bool {
	return r.Attempts >= MaxRecoveries && r.Target == target && r.Outcome != RecordRecovered
}

// Next is the attempt number a recovery for target would be.
func (r Record) Next(target string) int {
	if r.Target == target && r.Outcome != RecordRecovered {
		return r.Attempts + 1
	}
	return 1
}

// keepMessage is msg as a record keeps it: redacted by redact (nil: as
// it is), escaped and cut to MaxRecordMessage bytes (escape.Record, as
// every record the engine keeps).
func keepMessage(msg string, redact func(string) string) string {
	return escape.Record(msg, redact, MaxRecordMessage)
}

// TargetHash names a registration code and URL without revealing the code:
// 48 bits of their SHA-256, enough to notice a change and too few to tell
// a code from the many that share them.
func TargetHash(regCode, url string) string {
	sum := sha256.Sum256([]byte(regCode + "\n" + url))
	return hex.EncodeToString(sum[:6])
}

// ParseRecord reads the record from a Lease's annotations; ok is false
// when there is none. A record that does not parse is an error.
func ParseRecord(annotations map[string]string) (rec Record, ok bool, err error) {
	raw, ok := annotations[AnnotationRecovery]
	if !ok || raw == "" {
		return rec, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return rec, false, fmt.Errorf("annotation %s: %w", AnnotationRecovery, err)
	}
	return rec, true, nil
}

// ClearRecordCommand is the kubectl command that clears the recovery
// record on the engine's Lease ns/name, which lets a run that stopped
// recovering try again.
func ClearRecordCommand(ns, name string) string {
	return fmt.Sprintf("kubectl -n %s annotate lease %s %s-", escape.Shell(ns), escape.Shell(name), AnnotationRecovery)
}

// LeaseRecords keeps the record on the engine's own Lease, which this run
// holds and which the Secret's deletion cannot take.
type LeaseRecords struct{ Lease *kube.Lease }

// Load reads the record; ok is false when there is none.
func (s LeaseRecords) Load(ctx context.Context) (Record, bool, error) {
	raw, ok, err := s.Lease.Annotation(ctx, AnnotationRecovery)
	if err != nil || !ok {
		return Record{}, false, err
	}
	rec, ok, err := ParseRecord(map[string]string{AnnotationRecovery: raw})
	if err != nil {
		ns, name := s.ref()
		return Record{}, false, fmt.Errorf("lease %s/%s: %w; clear it with %s", ns, name, err, ClearRecordCommand(ns, name))
	}
	return rec, ok, nil
}

// Save writes rec (nil removes it).
func (s LeaseRecords) Save(ctx context.Context, rec *Record) error {
	if rec == nil {
		return s.Lease.SetAnnotation(ctx, AnnotationRecovery, nil)
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("recovery record: %w", err)
	}
	v := string(raw)
	return s.Lease.SetAnnotation(ctx, AnnotationRecovery, &v)
}

func (s LeaseRecords) ref() (ns, name string) {
	ns, name, _ = strings.Cut(s.Lease.Ref(), "/")
	return ns, name
}
