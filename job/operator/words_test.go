package operator

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecoveryLimitWording: what --help and the docs say of the recovery
// limit (RecoveryLimit: MaxRecoveries times in a row for the same code and
// URL, whatever the cause) is what Decide does, and every doc that states
// the limit states it so. A change of MaxRecoveries, of what Decide counts
// or of the words fails here until the other two follow.
func TestRecoveryLimitWording(t *testing.T) {
	const target, other = "0123456789ab", "ba9876543210"
	// Failures whose causes alternate: the count goes on regardless.
	causes := []Verdict{
		Classify("Cannot register system to SCC: Error: Registration server returned 'Service Unavailable' (503)"),
		Classify("Cannot register system to SCC: Error: Registration server returned 'Bad Gateway' (502)"),
		Classify(`Post "https://smt-azure.example/connect/subscriptions/systems": dial tcp 10.0.0.4:443: i/o timeout`),
	}
	var rec *Record
	for i := range MaxRecoveries {
		v := causes[i%len(causes)]
		require.True(t, v.Recoverable, v.Cause)
		d := Decide(v, rec, target, true)
		require.Empty(t, d.Outcome, "recovery %d of %d for %s is made", i+1, MaxRecoveries, v.Cause)
		require.Equal(t, i+1, d.Attempt)
		rec = &Record{Attempts: d.Attempt, Time: time.Now(), Cause: v.Cause, Outcome: RecordFailed, Target: target}
	}
	v := causes[MaxRecoveries%len(causes)]
	assert.Equal(t, Stopped, Decide(v, rec, target, true).Outcome, "after %d in a row, whatever the cause, the engine stops", MaxRecoveries)
	assert.Equal(t, Decision{Attempt: 1}, Decide(v, rec, other, true), "another code or URL starts afresh")

	rule := spelled(MaxRecoveries) + " times in a row for the same code and URL, whatever the cause"
	assert.Contains(t, RecoveryLimit, rule)
	docs := map[string]string{
		"docs/troubleshoot.md": rule,
		"docs/configure.md":    RecoveryLimit,
		"docs/RELIABILITY.md":  rule,
	}
	for path, want := range docs {
		b, err := os.ReadFile("../../" + path)
		require.NoError(t, err)
		doc := strings.Join(strings.Fields(string(b)), " ")
		assert.True(t, strings.Contains(doc, want), "%s does not state the recovery limit as the code counts it: %q", path, want)
		for _, stale := range []string{"per cause", "same cause"} {
			assert.False(t, strings.Contains(doc, stale), "%s says %q: the limit counts whatever the cause", path, stale)
		}
	}
}

// TestRecoverableCausesWording: each cause --help and docs/configure.md
// name as one a retry can fix (RecoverableCauses) is one Classify calls
// recoverable, and configure.md names them and the operator Lease's
// liveness rule (LivenessRule) as the help does.
func TestRecoverableCausesWording(t *testing.T) {
	named := map[string]string{
		"network":               `dial tcp 10.0.0.4:443: connect: network is unreachable`,
		"DNS":                   `dial tcp: lookup smt-azure.example on 10.0.0.10:53: no such host`,
		"TLS handshake timeout": `net/http: TLS handshake timeout`,
		"HTTP 5xx":              `Error: Registration server returned 'Service Unavailable' (503)`,
		"429":                   `API error: Too Many Requests (code: 429)`,
	}
	for name, msg := range named {
		assert.Contains(t, RecoverableCauses, name)
		assert.True(t, Classify(msg).Recoverable, "%s (%q) is recoverable", name, msg)
	}
	b, err := os.ReadFile("../../docs/configure.md")
	require.NoError(t, err)
	doc := strings.Join(strings.Fields(string(b)), " ")
	for _, want := range []string{RecoverableCauses, LivenessRule} {
		assert.True(t, strings.Contains(doc, want), "docs/configure.md does not say %q", want)
	}
	assert.Equal(t, "held, renewed within the last 30 s and seen renewed again within 10 s", LivenessRule, "RenewWindow and ObserveWindow, as the docs read")
}
