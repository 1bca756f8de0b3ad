package retry_test

import (
	"cmp"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/job/retry"
)

// attempts plays one cluster through an outage of length d that began
// with a failure at 0: every attempt before d fails, the first at or after
// d succeeds. The retry CronJob looks every tick from an offset; an
// attempt runs at the first look at or after its due time. It returns the
// attempts made and when the cluster was registered.
func attempts(p retry.Policy, d, offset time.Duration, refresh bool, rng *rand.Rand) (n int, registered time.Duration) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tick := cmp.Or(p.Tick, retry.DefaultTick)
	at := time.Duration(0)
	for {
		n++
		if at >= d {
			return n, at
		}
		due := p.Next(t0, t0.Add(at), refresh, func(n time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(n))) }).Sub(t0)
		// The first look of the retry CronJob at or after due.
		next := offset + ((due-offset+tick-1)/tick)*tick
		if next <= at {
			next += tick
		}
		at = next
	}
}

// The promise docs/RELIABILITY.md makes: registered within max(Tick,
// outage/4) after the cause clears, whatever the jitter and the CronJob's
// minute, and the attempts of a long outage thin out.
func TestRegisteredWithinAQuarterOfTheOutage(t *testing.T) {
	p := retry.Policy{}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, d := range []time.Duration{time.Minute, 3 * time.Minute, 30 * time.Minute, time.Hour, 4 * time.Hour, 12 * time.Hour, 24 * time.Hour, 72 * time.Hour} {
		bound := max(retry.DefaultTick, d/4)
		if d/4 > retry.DefaultMaxGap {
			bound = retry.DefaultMaxGap + retry.DefaultTick
		}
		worst := time.Duration(0)
		for i := range 200 {
			offset := time.Duration(i%10) * time.Minute
			_, reg := attempts(p, d, offset, false, rng)
			worst = max(worst, reg-d)
		}
		assert.LessOrEqual(t, worst, bound, "outage %s: registered %s after it cleared", d, worst)
	}
}

func TestAttemptsThinOutAsTheOutageLasts(t *testing.T) {
	p := retry.Policy{}
	rng := rand.New(rand.NewPCG(3, 4))
	// Attempts of a cluster during an outage that never ends, by hour.
	count := func(from, to time.Duration) float64 {
		total := 0
		for range 100 {
			a, _ := attempts(p, to, 0, false, rng)
			b, _ := attempts(p, from, 0, false, rng)
			total += a - b
		}
		return float64(total) / 100
	}
	first := count(0, time.Hour)
	fifth := count(4*time.Hour, 5*time.Hour)
	day := count(0, 24*time.Hour)
	assert.LessOrEqual(t, first, 7.0, "the first hour: every tick for 40 minutes, then fewer")
	assert.LessOrEqual(t, fifth, 1.5, "the fifth hour")
	assert.LessOrEqual(t, day, 28.0, "a whole day")
	t.Logf("attempts of a cluster through an outage: first hour %.1f, fifth hour %.1f, first day %.1f", first, fifth, day)
}

// refreshBound is the promise for a registered cluster's refresh after a
// streak of d: within max(RefreshGap, d×RefreshFactor) after the cause
// clears, at most RefreshMaxGap + Tick.
func refreshBound(d time.Duration) time.Duration {
	return min(max(retry.DefaultRefreshGap, d*retry.DefaultRefreshFactor), retry.DefaultRefreshMaxGap+retry.DefaultTick)
}

// A registered cluster's refresh waits at least RefreshGap, and is still
// refreshed within max(RefreshGap, outage×RefreshFactor) after the cause
// clears, at most RefreshMaxGap + Tick, whatever the jitter and the
// CronJob's minute.
func TestRefreshOfARegisteredCluster(t *testing.T) {
	p := retry.Policy{}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, d := range []time.Duration{time.Minute, 30 * time.Minute, 2 * time.Hour, 8 * time.Hour, 12 * time.Hour, 72 * time.Hour} {
		bound := refreshBound(d)
		worst, most := time.Duration(0), 0
		for i := range 200 {
			n, reg := attempts(p, d, time.Duration(i%10)*time.Minute, true, rng)
			worst, most = max(worst, reg-d), max(most, n)
		}
		assert.LessOrEqual(t, worst, bound, "outage %s", d)
		assert.Equal(t, bound, p.Bound(d, true), "Bound says the same")
		if d <= 2*time.Hour {
			assert.LessOrEqual(t, most, 5, "outage %s: about one attempt an hour, the one that succeeds included", d)
		}
	}
}

// A refresh backs off far harder than a first contact: after its first
// hours, a registered cluster tries about as often as its scheduled runs
// come (two or three a day), where a cluster not yet registered tries
// twice as often (job/retry's package doc; the fleet's figures are fleetsim's).
func TestARefreshBacksOffHarder(t *testing.T) {
	p := retry.Policy{}
	rng := rand.New(rand.NewPCG(7, 8))
	// Attempts of a cluster through an outage that never ends, in [from, to).
	count := func(refresh bool, from, to time.Duration) float64 {
		total := 0
		for i := range 200 {
			off := time.Duration(i%10) * time.Minute
			a, _ := attempts(p, to, off, refresh, rng)
			b, _ := attempts(p, from, off, refresh, rng)
			total += a - b
		}
		return float64(total) / 200
	}
	firstHours := count(true, 0, 6*time.Hour)
	laterDays := count(true, 24*time.Hour, 72*time.Hour) / 2
	firstContact := count(false, 24*time.Hour, 72*time.Hour) / 2
	t.Logf("attempts of a registered cluster's refresh through an outage: %.1f in its first 6 hours, %.1f a day after the first day (a cluster not yet registered: %.1f a day)", firstHours, laterDays, firstContact)
	assert.InDelta(t, 4, firstHours, 0.5, "the first 6 hours: the failing scheduled run and about 3 more")
	assert.InDelta(t, 2.7, laterDays, 0.3, "after the first day: one every 6 to 12 hours")
	assert.Greater(t, firstContact, 1.5*laterDays, "a first contact keeps trying harder")
}

// A scheduled run defers to the attempt a registered cluster's refresh has
// pending, and only then.
func TestDefers(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		refresh bool
		next    time.Time
		want    bool
	}{
		"a refresh, its attempt due later: a look":            {refresh: true, next: now.Add(time.Minute), want: true},
		"a refresh, its attempt due now: the run attempts":    {refresh: true, next: now},
		"a refresh, its attempt overdue: the run attempts":    {refresh: true, next: now.Add(-time.Hour)},
		"nothing pending: the run attempts":                   {refresh: true},
		"a first contact, its attempt due later: it attempts": {next: now.Add(time.Hour)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, retry.Defers(tc.refresh, tc.next, now))
		})
	}
}

// No attempt the rule plans is further after its failure than LongestGap,
// which a reader of a recorded next attempt may believe.
func TestLongestGap(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	p := retry.Policy{}
	for _, refresh := range []bool{false, true} {
		longest := time.Duration(0)
		for e := time.Duration(0); e <= 7*24*time.Hour; e += 7 * time.Minute {
			longest = max(longest, p.Next(t0, t0.Add(e), refresh, nil).Sub(t0.Add(e)))
		}
		assert.Equal(t, p.LongestGap(refresh), longest, "refresh %v", refresh)
	}
	assert.Equal(t, retry.DefaultMaxGap, p.LongestGap(false))
	assert.Equal(t, retry.DefaultRefreshMaxGap, p.LongestGap(true))
}

func TestNext(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	p := retry.Policy{}
	tests := map[string]struct {
		elapsed time.Duration
		refresh bool
		rnd     func(time.Duration) time.Duration
		want    time.Duration
	}{
		"first failure: due at once (the next look)": {elapsed: 0, want: 0},
		"39 minutes in: still every look":            {elapsed: 39 * time.Minute, want: 0},
		"4 hours in, no jitter: 50 minutes":          {elapsed: 4 * time.Hour, want: 50 * time.Minute},
		"4 hours in, the most jitter: 25 minutes":    {elapsed: 4 * time.Hour, rnd: func(time.Duration) time.Duration { return 0 }, want: 25 * time.Minute},
		"3 days in: capped at 6 hours":               {elapsed: 72 * time.Hour, want: 6 * time.Hour},
		"a refresh's first failure: 50 minutes":      {elapsed: 0, refresh: true, want: 50 * time.Minute},
		"a refresh 2 hours in: 3 h 50 min":           {elapsed: 2 * time.Hour, refresh: true, want: 3*time.Hour + 50*time.Minute},
		"a refresh 2 hours in, the most jitter":      {elapsed: 2 * time.Hour, refresh: true, rnd: func(time.Duration) time.Duration { return 0 }, want: time.Hour + 55*time.Minute},
		"a refresh 8 hours in: capped at 12 hours":   {elapsed: 8 * time.Hour, refresh: true, want: 12 * time.Hour},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rnd := tc.rnd
			if rnd == nil {
				rnd = func(n time.Duration) time.Duration { return n - 1 }
			}
			failed := t0.Add(tc.elapsed)
			got := p.Next(t0, failed, tc.refresh, rnd).Sub(failed)
			assert.InDelta(t, tc.want, got, float64(time.Nanosecond))
		})
	}
	assert.Equal(t, 2*time.Minute, retry.Policy{Tick: time.Minute}.Gap(12*time.Minute, false), "scaled settings scale the rule")
}

func TestDue(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	assert.True(t, retry.Due(now, now))
	assert.True(t, retry.Due(now.Add(-time.Second), now))
	assert.False(t, retry.Due(now.Add(time.Second), now))
	assert.False(t, retry.Due(time.Time{}, now), "nothing scheduled is never due")
}

// docs/install.md says the rule for a registered cluster's refresh with
// the defaults' numbers.
func TestInstallDocSaysTheRefreshRule(t *testing.T) {
	b, err := os.ReadFile("../../docs/install.md")
	require.NoError(t, err)
	doc := string(b)
	p := retry.Policy{}
	assert.Equal(t, time.Hour, retry.DefaultRefreshGap)
	assert.Equal(t, 2, retry.DefaultRefreshFactor)
	assert.Equal(t, 12*time.Hour+10*time.Minute, p.Bound(72*time.Hour, true))
	for _, words := range []string{
		"its next attempt is due after twice the\ntime it has been failing (at least an hour), less the interval, at most 12 hours",
		"| registered, and its scheduled refresh failed | max(1 h, twice the outage), at most 12 h 10 min;",
		"then one every 6 to 12 hours |",
	} {
		assert.Contains(t, doc, words)
	}
}
