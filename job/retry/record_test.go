package retry_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/job/retry"
)

// TestFollowCarriesTheCountsOver: the record of a run follows the one
// stored before it: failures count up from the first of the streak, a
// success resets them, a run waiting for its code leaves them, and a
// stored record that cannot be read carries over as a failure that began
// at most at the new run's time.
func TestFollowCarriesTheCountsOver(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	failed := retry.Record{Time: t0, Outcome: "failed", ExitCode: 1, Phase: "find-update-server"}

	first, raw, err := retry.Follow("", failed)
	require.NoError(t, err)
	assert.Equal(t, 1, first.ConsecutiveFailures)
	assert.Equal(t, t0, *first.FailingSince)

	second := failed
	second.Time = t0.Add(18 * time.Hour)
	got, raw, err := retry.Follow(raw, second)
	require.NoError(t, err)
	assert.Equal(t, 2, got.ConsecutiveFailures)
	assert.Equal(t, t0, *got.FailingSince, "failing since the first")
	back, ok, err := retry.Parse(raw)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, got.ConsecutiveFailures, back.ConsecutiveFailures, "what is stored is what was returned")

	waiting, raw, err := retry.Follow(raw, retry.Record{Time: t0.Add(19 * time.Hour), Outcome: retry.OutcomeWaitingForCode})
	require.NoError(t, err)
	assert.Equal(t, 2, waiting.ConsecutiveFailures, "waiting for a code is neither a success nor a failure")

	ok2, _, err := retry.Follow(raw, retry.Record{Time: t0.Add(20 * time.Hour), Outcome: "registered"})
	require.NoError(t, err)
	assert.Zero(t, ok2.ConsecutiveFailures, "a success resets the count")
	assert.Nil(t, ok2.FailingSince)
	require.NotNil(t, ok2.LastSuccess)
	assert.Equal(t, t0.Add(20*time.Hour), *ok2.LastSuccess)

	garbage, _, err := retry.Follow("{not json", failed)
	require.NoError(t, err)
	assert.Equal(t, 2, garbage.ConsecutiveFailures, "the garbage counts as a failure, then this one")
	assert.False(t, garbage.FailingSince.After(t0))
}

// TestReadDoesNotTrustTime: anything that may write the Lease may
// write the record; a record that does not parse or lies about time counts
// as a failure, since its time (or now), due now: never as "no run".
func TestReadDoesNotTrustTime(t *testing.T) {
	now := time.Date(2026, 12, 4, 14, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	// failed is a failed run's record as stored; since "" leaves
	// failingSince out.
	failed := func(time string, failures int, since, cause, next string) string {
		if since != "" {
			since = `,"failingSince":"` + since + `"`
		}
		return fmt.Sprintf(`{"time":%q,"outcome":"failed","consecutiveFailures":%d%s,"cause":%q,"nextAttempt":%q}`, time, failures, since, cause, next)
	}
	tests := map[string]struct {
		raw         string
		wantSince   time.Time
		wantFailing bool
		wantDue     bool // the next attempt is due now
		wantNoNext  bool // no attempt: failed for good
		wantDoubt   string
	}{
		"a true failure, its attempt in 20 minutes": {
			raw:         failed(at(-time.Hour), 3, at(-2*time.Hour), "transient", at(20*time.Minute)),
			wantSince:   now.Add(-2 * time.Hour),
			wantFailing: true,
		},
		"a time a minute ahead: another node's clock": {
			raw:         failed(at(time.Minute), 1, at(time.Minute), "transient", at(time.Minute)),
			wantSince:   now.Add(time.Minute),
			wantFailing: true,
		},
		"a true success": {raw: `{"time":"` + at(-time.Hour) + `","outcome":"registered","consecutiveFailures":0}`},
		"failingSince a year ahead": {
			raw:         failed(at(-time.Hour), 3, at(365*24*time.Hour), "settling", at(-time.Hour)),
			wantSince:   now.Add(-time.Hour),
			wantFailing: true, wantDue: true,
			wantDoubt: "failingSince 2027-12-04T14:00:00Z is not before its time: counted as a failure since 2026-12-04T13:00:00Z, due now",
		},
		"the record's time ahead too": {
			raw:         failed(at(48*time.Hour), 1, at(48*time.Hour), "transient", at(49*time.Hour)),
			wantSince:   now,
			wantFailing: true, wantDue: true,
			wantDoubt: "its time 2026-12-06T14:00:00Z is after now",
		},
		"nextAttempt past the longest gap": {
			raw:         failed(at(-time.Hour), 1, at(-time.Hour), "transient", at(6*time.Hour)),
			wantSince:   now.Add(-time.Hour),
			wantFailing: true, wantDue: true,
			wantDoubt: "nextAttempt 2026-12-04T20:00:00Z is more than the longest gap (6h0m0s) after it",
		},
		"a refresh's nextAttempt 10 h ahead: the refresh's longest gap is longer": {
			raw:         `{"time":"` + at(-time.Hour) + `","outcome":"failed","consecutiveFailures":3,"failingSince":"` + at(-5*time.Hour) + `","cause":"transient","refresh":true,"nextAttempt":"` + at(9*time.Hour) + `"}`,
			wantSince:   now.Add(-5 * time.Hour),
			wantFailing: true,
		},
		"a refresh's nextAttempt past its longest gap": {
			raw:         `{"time":"` + at(-time.Hour) + `","outcome":"failed","consecutiveFailures":3,"failingSince":"` + at(-5*time.Hour) + `","cause":"transient","refresh":true,"nextAttempt":"` + at(12*time.Hour) + `"}`,
			wantSince:   now.Add(-5 * time.Hour),
			wantFailing: true, wantDue: true,
			wantDoubt: "is more than the longest gap (12h0m0s) after it",
		},
		"a permanent failure whose nextAttempt is past the longest gap": {
			raw:         failed(at(-time.Hour), 1, at(-time.Hour), "permanent", at(24*time.Hour)),
			wantSince:   now.Add(-time.Hour),
			wantFailing: true, wantNoNext: true,
			wantDoubt: "nextAttempt 2026-12-05T14:00:00Z is more than the longest gap",
		},
		"a failure without failingSince": {
			raw:         failed(at(-time.Hour), 1, "", "transient", at(time.Hour)),
			wantSince:   now.Add(-time.Hour),
			wantFailing: true, wantDue: true,
			wantDoubt: "failingSince (none) is not before its time",
		},
		"garbage": {
			raw:         `{not json`,
			wantSince:   now,
			wantFailing: true, wantDue: true,
			wantDoubt: "the record does not parse",
		},
		"an outcome the engine never writes": {
			raw:         `{"time":"` + at(-time.Hour) + `","outcome":"fine"}`,
			wantSince:   now,
			wantFailing: true, wantDue: true,
			wantDoubt: `the record's outcome "fine" is none the engine writes`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rec, ok := retry.Read(tc.raw, now)
			require.True(t, ok, "a record is there: never read as no run")
			assert.Equal(t, tc.wantFailing, rec.Failing())
			if tc.wantDoubt == "" {
				assert.Empty(t, rec.Doubt)
			} else {
				assert.Contains(t, rec.Doubt, tc.wantDoubt)
			}
			if !tc.wantFailing {
				return
			}
			require.NotNil(t, rec.FailingSince)
			assert.Equal(t, tc.wantSince, rec.FailingSince.UTC())
			assert.False(t, rec.FailingSince.After(now.Add(retry.RecordSkew)), "a streak never begins after now")
			assert.GreaterOrEqual(t, rec.ConsecutiveFailures, 1)
			if tc.wantNoNext {
				assert.Nil(t, rec.NextAttempt, "failed for good: nothing scheduled")
				return
			}
			require.NotNil(t, rec.NextAttempt)
			if tc.wantDue {
				assert.Equal(t, now, rec.NextAttempt.UTC(), "due at the next look")
			}
		})
	}
	_, ok := retry.Read("", now)
	assert.False(t, ok, "no record: no run yet")
}
