package retry

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/rancher/registration-engine/internal/failure"
)

// The decisions of the rule, for the job to act on: whether a look of the
// retry CronJob finds an attempt due (Look), whether a failure of Azure's
// identity is still Azure propagating it (Settle), and what a failed run
// plans next (Policy.Plan).
//
// Right after an install, Azure may still be propagating the extension's
// identity or a role assignment (failure.Settling): until the cluster's
// first success, and for the first-contact window after its first run (the
// creation of its Lease, which the API server stamps and no writer of the
// Lease can move), such a failure is retried like a transient one; after
// that it needs a person and is permanent, with the same message.

// DefaultFirstContact is PROPAGATION_WINDOW's default: Azure documents up
// to 30 minutes for a role assignment to take effect; twice that covers a
// slow tenant without letting a real misconfiguration retry for long.
const DefaultFirstContact = time.Hour

// MaxFirstContact caps PROPAGATION_WINDOW: twelve times the 30 minutes
// Azure documents, and as long as the schedule's shorter gap (6 h), after
// which the scheduled runs would have retried anyway. A longer window
// would only keep a real misconfiguration (a role never assigned) reading
// as "waiting for Azure".
const MaxFirstContact = 6 * time.Hour

// Look decides a look of the retry CronJob from the record it read (ok:
// there is one): whether an attempt is due now, whether one is scheduled
// (pending), and why or why not, in words for the log.
func Look(rec Record, ok bool, now time.Time) (due, pending bool, why string) {
	switch {
	case !ok:
		return false, false, "no run recorded yet: the release's own run and the schedule start the first"
	case !rec.Failing():
		return false, false, fmt.Sprintf("the last run (%s) succeeded at %s: the schedule runs the next", rec.Outcome, utc(rec.Time))
	case rec.NextAttempt == nil:
		return false, false, fmt.Sprintf("the last run failed at %s and another attempt cannot succeed (cause %s): it needs a person, and the schedule runs the next", utc(rec.Time), rec.Cause)
	case !Due(*rec.NextAttempt, now):
		return false, true, fmt.Sprintf("attempt %d is due at %s", rec.ConsecutiveFailures+1, utc(*rec.NextAttempt))
	case rec.Doubt != "":
		return true, true, fmt.Sprintf("the run record cannot be true: %s", rec.Doubt)
	}
	return true, true, fmt.Sprintf("attempt %d was due at %s (cause %s)", rec.ConsecutiveFailures+1, utc(*rec.NextAttempt), rec.Cause)
}

// Defer decides whether a run the schedule started defers to the attempt
// its cluster's failing refresh has pending (Defers), from the record its
// Lease held (nil: none), and says why in words for the log: such a run is
// a look that found nothing due.
func Defer(last *Record, scheduled bool, now time.Time) (why string, ok bool) {
	if !scheduled || last == nil || !last.Failing() || last.NextAttempt == nil || last.FailingSince == nil ||
		!Defers(last.Refresh, *last.NextAttempt, now) {
		return "", false
	}
	return fmt.Sprintf("the refresh has failed since %s and attempt %d is due at %s: the retry CronJob runs it, so this scheduled run defers to it",
		utc(*last.FailingSince), last.ConsecutiveFailures+1, utc(*last.NextAttempt)), true
}

// Settle decides a settling failure (failure.Settling) of a run at now that
// followed last (the record its Lease held; nil: none): retried like a
// transient one while the cluster is in its first contact (window long
// after its first run), permanent after, and permanent once the cluster
// has registered (no new identity is propagating). Any other error is
// returned as it is.
func Settle(err error, last *Record, now time.Time, window time.Duration) error {
	if !failure.IsSettling(err) || failure.IsPermanent(err) {
		return err
	}
	if last != nil && last.LastSuccess != nil {
		return failure.Permanent(fmt.Errorf("%w (this cluster registered at %s: no new identity is propagating, it needs a person)", err, utc(*last.LastSuccess)))
	}
	if start, what := firstContactStart(last); !start.IsZero() && now.Sub(start) >= window {
		return failure.Permanent(fmt.Errorf("%w (Azure has had %s since %s at %s to propagate it, more than PROPAGATION_WINDOW %s: it needs a person)",
			err, now.Sub(start).Round(time.Minute), what, utc(start), window))
	}
	return err
}

// firstContactStart is when the cluster's first-contact window opened, and
// what happened then, in words: the first failure of the streak or, when
// earlier, the engine's first run (its Lease's creation, which nothing that
// writes the Lease can move, so that a rewritten record cannot reopen the
// window). Zero: no run before this one.
func firstContactStart(last *Record) (time.Time, string) {
	if last == nil {
		return time.Time{}, ""
	}
	var start time.Time
	what := ""
	if last.Failing() && last.FailingSince != nil {
		start, what = *last.FailingSince, "the first failure"
	}
	if c := last.LeaseCreated; !c.IsZero() && (start.IsZero() || c.Before(start)) {
		start, what = c, "the engine's first run (its Lease's creation)"
	}
	return start, what
}

// Plan is what a failed run says of the next attempt: its cause class, its
// number and when it is due (zero when none is: the run succeeded, or
// failed for good).
type Plan struct {
	Cause   string
	Attempt int
	Next    time.Time
	// Closes is when a settling failure's first-contact window closes.
	Closes time.Time
	// Refresh: the streak is a registered cluster's scheduled refresh,
	// whose attempts are spaced wider (Policy).
	Refresh bool
}

// Plan is the retry plan of a run that ended at now with err, following
// last (the record its Lease held; nil: none); scheduled: the run is one
// of the schedule's; window: the first-contact window (PROPAGATION_WINDOW);
// rnd as for Next.
func (p Policy) Plan(err error, last *Record, now time.Time, scheduled bool, window time.Duration, rnd func(time.Duration) time.Duration) Plan {
	if err == nil {
		return Plan{}
	}
	pl := Plan{Cause: CauseTransient, Attempt: 1}
	since := now
	// A streak that a scheduled run of a registered cluster began is a
	// refresh; a first contact, an upgrade's run or a manual one is not.
	pl.Refresh = scheduled && last != nil && last.LastSuccess != nil
	if last != nil && last.Failing() && last.FailingSince != nil {
		since, pl.Attempt, pl.Refresh = *last.FailingSince, last.ConsecutiveFailures+1, last.Refresh
	}
	switch {
	case failure.IsPermanent(err):
		pl.Cause = CausePermanent
		return pl
	case failure.IsSettling(err):
		pl.Cause, pl.Closes = CauseSettling, since.Add(window)
		if start, _ := firstContactStart(last); !start.IsZero() && start.Before(since) {
			pl.Closes = start.Add(window)
		}
	}
	pl.Next = p.Next(since, now, pl.Refresh, rnd)
	return pl
}

// Note is the plan in words, for the Event and the log: "" when nothing
// is scheduled. The words are the record's (Record.Retrying), which status
// shows too, so the Event, the log and status say the same.
func (pl Plan) Note() string {
	if pl.Next.IsZero() {
		return ""
	}
	return pl.Apply(Record{Outcome: "failed", ConsecutiveFailures: pl.Attempt}).Retrying()
}

// Apply is rec with the plan's fields: its cause (and Permanent, which
// says the same) and, when one is scheduled, the next attempt, the
// first-contact window's end and whether the streak is a refresh.
func (pl Plan) Apply(rec Record) Record {
	if pl.Cause != "" {
		rec.Cause, rec.Permanent = pl.Cause, pl.Cause == CausePermanent
	}
	if !pl.Next.IsZero() {
		next := pl.Next
		rec.NextAttempt, rec.Refresh = &next, pl.Refresh
	}
	if !pl.Closes.IsZero() {
		closes := pl.Closes
		rec.SettlesBy = &closes
	}
	return rec
}

// Attrs are the plan's log attributes.
func (pl Plan) Attrs() []any {
	if pl.Cause == "" {
		return nil
	}
	attrs := []any{slog.String("failureClass", pl.Cause), slog.Int("attempt", pl.Attempt)}
	if !pl.Next.IsZero() {
		attrs = append(attrs, slog.Time("nextAttempt", pl.Next))
	}
	return attrs
}

// utc formats t for people: the minute, in UTC.
func utc(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }
