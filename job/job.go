package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/pause"
	"github.com/rancher/registration-engine/job/incluster"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/redact"
	"github.com/rancher/registration-engine/job/regionconfig"
	"github.com/rancher/registration-engine/job/remedy"
	"github.com/rancher/registration-engine/job/retry"
	"github.com/rancher/registration-engine/job/smt"
	"github.com/rancher/registration-engine/providers"
)

// The narrow views Run has of its collaborators. New assembles the
// production ones from the subpackages (kube.Lease is both Locker and
// RunRecorder; the Store is operator.SecretStore, or output.go's PrintStore
// and FileStore for a dry run and --output). job_test.go's recorder stands
// in for the phases' collaborators at once and scripts each one's outcome,
// a fake operator for the Events; the subpackages test the real types
// against loopback fakes.
type (
	// Detector finds the cloud (phase 1).
	Detector interface {
		Detect(ctx context.Context) (providers.Detection, error)
	}
	// Finder finds a healthy update server with a validated certificate
	// (phase 4).
	Finder interface {
		Find(ctx context.Context, s regionconfig.Settings, regionHint string) (smt.UpdateServer, error)
	}
	// InCluster makes the update server's name reach the operator inside
	// the cluster (phase 6, before the Secret): maps it in CoreDNS and
	// waits for the handover, as its config says applies, and returns what
	// it did.
	InCluster interface {
		Publish(ctx context.Context, name string, addr netip.Addr, certPEM []byte) (incluster.Result, error)
	}
	// Store writes the registration (phase 6). Check runs first, before
	// CoreDNS is edited, and fails when Write certainly would.
	Store interface {
		Check(ctx context.Context, r operator.Values) error
		Write(ctx context.Context, r operator.Values) (changed bool, err error)
	}
	// EventRecorder records the run's outcome as an Event on its Job.
	EventRecorder interface {
		Record(ctx context.Context, e kube.JobEvent) error
	}
	// RunRecorder keeps the verdict of a run that ended without holding
	// the Lease where it outlives Events (the engine's Lease).
	RunRecorder interface {
		SaveRun(ctx context.Context, follow kube.Follow) error
	}
	// RetrySwitch suspends and resumes the retry CronJob.
	RetrySwitch interface {
		SetSuspended(ctx context.Context, suspend bool) error
	}
	// Locker keeps two runs apart. The release it returns also records
	// the run's verdict, in the same write.
	Locker interface {
		Acquire(ctx context.Context) (release kube.Release, last *kube.Stored, err error)
	}
)

// Job is one run's collaborators and settings, assembled by New (or by a
// test). Zero-valued optional fields are skipped: no Lock means no Lease
// (dry runs, runs outside a cluster), no InCluster means there is no
// cluster to publish the name in (dry runs, --output), no Operator means
// there is no operator to read.
type Job struct {
	Log      *slog.Logger
	Detector Detector
	// Provers proves each cloud's identity (phase 2), by cloud: the one
	// place a cloud is added (provers.go).
	Provers map[providers.Cloud]ProverFactory
	// Settings are the region settings the configuration read and checked at
	// start; phase 3 reports them.
	Settings  regionconfig.Settings
	Finder    Finder
	InCluster InCluster
	Store     Store
	Lock      Locker
	RegCode   Secret
	// Operator is the operator step (job/operator): after the Secret is
	// written, or found current, what rancher/scc-operator made of it, and
	// the recovery of a Registration it failed. Nil: no cluster (dry run,
	// --output).
	Operator *operator.Step
	// Runs, when set, keeps each run's verdict (kube.AnnotationLastRun);
	// nil outside a cluster.
	Runs RunRecorder
	// JobName names the Job that runs this pod, for the run record.
	JobName string
	// Events, when set, gets one Event per run on the Job that runs it;
	// nil when no Job is known (JOB_NAME, JOB_UID unset).
	Events EventRecorder
	// SecretRef is namespace/name of the Secret, for the remedy in the
	// OperatorRegistrationFailed Event.
	SecretRef string
	// CodeRemedy says how to set the registration code, for the Event of
	// a run that waits for one (regCodeRemedy).
	CodeRemedy string
	// Secrets knows every secret value of the run; Run adds the configured
	// code and the attested document (and its signature) as it learns
	// them, the Secret store the code it keeps. Log's handler, the Event
	// recorder and the errors Run returns redact through it. Nil: Run
	// makes one, and wraps Log so that its lines are redacted all the same.
	Secrets *redact.Registry

	// Deadline bounds the run after the startup sleep.
	Deadline time.Duration
	// SleepMax is the upper bound of the startup sleep; it is taken only when
	// Scheduled is true (a run the CronJob started on its schedule).
	SleepMax  time.Duration
	Scheduled bool
	// Retry is when a failed run's next attempt comes (job/retry); its
	// Tick is the retry CronJob's period (RETRY_INTERVAL).
	Retry retry.Policy
	// FirstContact is how long after a never-registered cluster's first
	// failure a settling failure (Azure propagating an identity or role)
	// is retried before it is permanent (PROPAGATION_WINDOW; 0 means
	// retry.DefaultFirstContact).
	FirstContact time.Duration
	// OnlyWhenDue: a run of the retry CronJob (ONLY_WHEN_DUE), which runs
	// only when LastRun says an attempt is due and otherwise exits at once.
	OnlyWhenDue bool
	LastRun     RunReader
	// Retries, when set, is the retry CronJob, which each run suspends when
	// no attempt is scheduled and resumes when one is (switchRetries); nil:
	// none (kustomize's install, a dry run).
	Retries RetrySwitch
	// Now is the clock of the retry decisions; nil means time.Now.
	Now func() time.Time

	// Sleep waits for d or until ctx is done; nil means a real timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// RandDuration returns a uniform duration in [0, n); nil means math/rand/v2.
	RandDuration func(n time.Duration) time.Duration
}

// Outcomes a run reports in its summary line.
const (
	OutcomeRegistered = "registered"
	OutcomeUnchanged  = "unchanged"
	OutcomeSkipped    = "skipped"
	OutcomeFailed     = "failed"
	// OutcomeWaitingForCode: no registration code configured and none in
	// the Secret. The run proved everything else (the cloud, the plan, the
	// update server), changed nothing and exits 0: a cluster installed
	// before its code is known is not a failing Job every run. Its Event
	// (kube.ReasonCodeMissing) and status say how to set the code.
	OutcomeWaitingForCode = retry.OutcomeWaitingForCode
)

// Result is what a run did, for the summary line and for tests.
type Result struct {
	Outcome string
	Cloud   providers.Cloud
	Server  string
	Address netip.Addr
	Changed bool
	Failed  string // the phase that failed, if any
	// Skipped says why a skipped run did nothing (who holds the Lease).
	Skipped string
	// Operator is what the operator step found and did (job/operator).
	Operator operator.Outcome
	// RetryCronJob is what the run did to the retry CronJob: "suspended",
	// "resumed", or "" (nothing: none configured, or the run knows nothing
	// of the runs).
	RetryCronJob string
	// pending: a look (ONLY_WHEN_DUE) found an attempt scheduled, not yet
	// due.
	pending bool
}

// PhaseOperator is the failedPhase of a run whose write succeeded but whose
// Registration the operator marked Failed.
const PhaseOperator = "operator"

// Run executes the run once: startup sleep, Lease, the six phases, release.
// It returns nil when the cluster is registered, already current, or another
// run holds the Lease; otherwise the error of the first phase that failed.
func (j *Job) Run(ctx context.Context) (Result, error) {
	if j.Secrets == nil {
		j.Secrets = redact.New()
	}
	j.Secrets.Add(j.RegCode.Reveal())
	log := j.logger()
	start := time.Now()
	res, release, last, err := j.run(ctx, log)
	outcome := res.Outcome
	if err != nil {
		outcome = OutcomeFailed
	}
	res.Outcome = outcome
	// What comes next, then the Event and the record with the release:
	// the summary stays the run's last log line.
	var plan retry.Plan
	if j.Lock != nil && outcome == OutcomeFailed {
		plan = j.plan(err, last)
		if n := plan.Note(); n != "" {
			log.Warn("the run will be tried again", append([]any{slog.String("next", n)}, plan.Attrs()...)...)
		}
	}
	j.recordEvent(ctx, log, res, err, plan)
	j.recordRun(ctx, log, res, err, release, plan)
	res.RetryCronJob = j.switchRetries(ctx, log, res, plan)
	attrs := []any{
		slog.String("outcome", outcome),
		slog.Int64("durationMs", time.Since(start).Milliseconds()),
		slog.String("cloud", string(res.Cloud)),
		slog.String("server", res.Server),
		slog.Bool("changed", res.Changed),
		slog.Int("exitCode", ExitCode(err)),
	}
	if res.Address.IsValid() {
		attrs = append(attrs, slog.String("address", res.Address.String()))
	}
	attrs = append(attrs, res.Operator.Attrs()...)
	attrs = append(attrs, plan.Attrs()...)
	if res.RetryCronJob != "" {
		attrs = append(attrs, slog.String("retryCronJob", res.RetryCronJob))
	}
	if res.Skipped != "" {
		attrs = append(attrs, slog.String("reason", res.Skipped))
	}
	if err != nil {
		attrs = append(attrs, slog.String("failedPhase", res.Failed), slog.String("error", err.Error()))
		log.Error("run finished", attrs...)
	} else {
		log.Info("run finished", attrs...)
	}
	return res, err
}

// run is the retry CronJob's check, the startup sleep, the Lease and the
// six phases. The Lease, when taken, is the caller's to release (with the
// run's record); last is the record the Lease held when it was taken.
func (j *Job) run(ctx context.Context, log *slog.Logger) (res Result, release kube.Release, last *retry.Record, err error) {
	if j.OnlyWhenDue {
		due, pending, why, err := j.due(ctx, log)
		if errors.Is(err, errRecordUnread) {
			// The record was not read: nothing is known of the runs, so
			// nothing is recorded or planned; the next look reads again.
			log.Warn("could not read the run record; nothing done, the next look reads it again", slog.String("error", err.Error()))
			res.Outcome, res.Skipped = OutcomeUnread, err.Error()
			return res, nil, nil, nil
		}
		if err != nil {
			res.Failed = "retry-check"
			return res, nil, nil, err
		}
		if !due {
			log.Info("no retry due; nothing to do", slog.String("reason", why))
			res.Outcome, res.Skipped, res.pending = OutcomeNotDue, why, pending
			return res, nil, nil, nil
		}
		log.Info("a retry is due", slog.String("reason", why))
	}
	if err := j.startupSleep(ctx, log); err != nil {
		res.Failed = "startup-sleep"
		return res, nil, nil, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, j.deadline(), ErrDeadline)
	defer cancel()

	if j.Lock != nil {
		var stored *kube.Stored
		release, stored, err = j.Lock.Acquire(ctx)
		if errors.Is(err, kube.ErrLeaseHeld) {
			log.Info("another run holds the lease; skipping this run", slog.String("reason", err.Error()))
			res.Outcome, res.Skipped = OutcomeSkipped, err.Error()
			return res, nil, nil, nil
		}
		if err != nil {
			res.Failed = "lease"
			return res, nil, nil, withCause(ctx, fmt.Errorf("lease: %w", err))
		}
		last = j.lastRecord(log, stored)
	}
	if why, ok := retry.Defer(last, j.Scheduled, j.now()); ok {
		// A registered cluster's refresh is failing and its next attempt
		// is pending: this scheduled run is a look that found nothing due.
		// It releases the Lease and records nothing.
		log.Info("no attempt due; nothing to do", slog.String("reason", why))
		res.Outcome, res.Skipped, res.pending = OutcomeNotDue, why, true
		return res, release, last, nil
	}
	res, err = j.runPhases(ctx, log, last)
	return res, release, last, err
}

// runPhases runs the design card's six phases and the operator step.
func (j *Job) runPhases(ctx context.Context, log *slog.Logger, last *retry.Record) (res Result, err error) {
	// The design card's six phases, each handing its value on to the next.
	ph := &phases{log: log, secrets: j.Secrets}
	det, err := runPhase(ctx, ph, "detect", j.detect)
	res.Cloud = det.Cloud
	if err != nil {
		return ph.failed(res), err
	}
	ev, err := runPhase(ctx, ph, "prove", func(ctx context.Context) (*providers.Evidence, []any, error) {
		ev, attrs, err := j.prove(ctx, det.Cloud)
		return ev, attrs, j.settle(err, last)
	})
	if err != nil {
		return ph.failed(res), err
	}
	ph.doneBefore("load-config", "read and checked at start, with the other settings", slog.Int("regionServers", len(j.Settings.RegionServers)), slog.Bool("metadataServer", j.Settings.MetadataServer != ""))
	server, err := runPhase(ctx, ph, "find-update-server", func(ctx context.Context) (smt.UpdateServer, []any, error) { return j.find(ctx, ev.RegionHint) })
	res.Server = server.Name
	if err != nil {
		return ph.failed(res), err
	}
	// Phase 4's health check raced the two families (IPv6 first, IPv4
	// after the head start) and reports the address that answered; racing
	// them again here would only pay IPv6's head start twice when IPv6 is
	// a black hole.
	res.Address = server.Reached
	ph.doneBefore("race-addresses", "find-update-server raced them", slog.String("address", addrString(server.Reached)), slog.String("racedIn", "find-update-server"))
	w, err := runPhase(ctx, ph, "write-secret", func(ctx context.Context) (written, []any, error) { return j.write(ctx, log, server, ev, last) })
	res.Changed = w.changed
	if err != nil {
		return ph.failed(res), err
	}
	if w.noCode {
		res.Outcome = OutcomeWaitingForCode
		return res, nil
	}
	res.Outcome = OutcomeUnchanged
	if res.Changed {
		res.Outcome = OutcomeRegistered
	}

	// The operator step: what rancher/scc-operator made of the Secret.
	op, err := j.Operator.Run(ctx, log, operator.Input{Changed: w.changed, Server: server.Name, Written: w.reg, Unproven: w.unproven})
	res.Operator = op
	if op.Rewritten {
		res.Changed, res.Outcome = true, OutcomeRegistered
	}
	if err != nil {
		res.Failed = PhaseOperator
		return res, j.Secrets.Error(withCause(ctx, err))
	}
	return res, nil
}

// prover is the prover of cloud c; a cloud with none registered is a
// permanent failure that says which clouds can prove themselves.
func (j *Job) prover(c providers.Cloud) (providers.Prover, error) {
	if f, ok := j.Provers[c]; ok {
		return f()
	}
	var known []string
	for k := range j.Provers {
		known = append(known, string(k))
	}
	slices.Sort(known)
	return nil, failure.Permanent(fmt.Errorf("this is %s, but only Marketplace deployments on %s can prove their identity so far", c, strings.Join(known, ", ")))
}

// detect is phase 1: which cloud this is.
func (j *Job) detect(ctx context.Context) (providers.Detection, []any, error) {
	det, err := j.Detector.Detect(ctx)
	return det, []any{slog.String("cloud", string(det.Cloud)), slog.String("source", det.Source), slog.String("endpoint", det.Endpoint)}, err
}

// prove is phase 2: the cloud's prover proves where the run is, and the
// run learns which of its evidence is secret.
func (j *Job) prove(ctx context.Context, cloud providers.Cloud) (*providers.Evidence, []any, error) {
	p, err := j.prover(cloud)
	if err != nil {
		return nil, nil, err
	}
	ev, err := p.Prove(ctx)
	if err != nil {
		return nil, nil, err
	}
	j.Secrets.Add(ev.InstanceData)
	j.Secrets.Add(ev.Secrets...)
	return ev, []any{slog.String("cloud", string(ev.Cloud)), slog.String("regionHint", ev.RegionHint), slog.Int("instanceDataBytes", len(ev.InstanceData))}, nil
}

// find is phase 4 (and, in its health check, phase 5): a healthy update
// server and the address of it that answered first.
func (j *Job) find(ctx context.Context, regionHint string) (smt.UpdateServer, []any, error) {
	server, err := j.Finder.Find(ctx, j.Settings, regionHint)
	attrs := []any{slog.String("server", server.Name), slog.String("region", server.Region), slog.String("ipv4", addrString(server.IPv4)), slog.String("ipv6", addrString(server.IPv6))}
	if err == nil && !server.Reached.IsValid() {
		err = fmt.Errorf("no address of %s answered its health check", server.Name)
	}
	return server, attrs, err
}

// written is what phase 6 wrote, for the operator step: the values,
// whether the Secret changed, and, when the handover check did not run,
// why ("" when it passed).
type written struct {
	reg      operator.Values
	changed  bool
	unproven string
	// noCode: no code configured and none in the Secret; nothing was
	// changed and the run waits for one (OutcomeWaitingForCode).
	noCode bool
}

// write is phase 6: the name mapped in the cluster and handed over, then
// the Secret written.
//
// last is the record of the run before: one that ended with the Secret in
// place makes a Secret absent now someone's deletion, which this run does
// not undo (operator.ErrSecretDeleted).
func (j *Job) write(ctx context.Context, log *slog.Logger, server smt.UpdateServer, ev *providers.Evidence, last *retry.Record) (written, []any, error) {
	w := written{
		reg: operator.Values{
			// The name as it is, not absolute ("name."): the trailing dot
			// would reach the update server's Host header, and changing
			// the URL makes the operator re-register every existing
			// cluster. The handover's absolute lookup guards against a
			// search-domain name shadowing it (handover.ErrShadowed).
			URL:          "https://" + server.Name,
			RegCode:      j.RegCode.Reveal(),
			InstanceData: ev.InstanceData,
			CertPEM:      server.CertPEM,
			Left:         j.secretLeft(last),
		},
		unproven: "no cluster (dry run or --output)",
	}
	// The operator's own way to the update server first: through a proxy,
	// the Secret would be bound to fail, so nothing is edited or written.
	if err := j.Operator.CheckProxy(ctx, log, w.reg.URL); err != nil {
		return w, nil, err
	}
	if err := j.Store.Check(ctx, w.reg); errors.Is(err, operator.ErrNoRegCode) {
		log.Warn("no registration code yet: nothing written, the run waits for one", slog.String("set", j.codeRemedy()))
		w.noCode = true
		return w, []any{slog.Bool("waitingForCode", true)}, nil
	} else if err != nil {
		return w, nil, withRegCodeSources(err)
	}
	var attrs []any
	if j.InCluster == nil {
		log.Info("no cluster (dry run or --output): the name is neither mapped nor handed over", slog.String("server", server.Name), slog.String("address", addrString(server.Reached)))
	} else {
		pub, err := j.InCluster.Publish(ctx, server.Name, server.Reached, server.CertPEM)
		if err != nil {
			return w, nil, err
		}
		w.unproven = pub.Skipped
		attrs = append(attrs, pub.Attrs()...)
	}
	if j.RegCode == "" {
		log.Info("no registration code configured in " + regCodeVarsText + ": the one in the Secret is kept")
	}
	changed, err := j.Store.Write(ctx, w.reg)
	w.changed = changed
	return w, append(attrs, slog.Bool("changed", changed)), j.Operator.Explain(ctx, withRegCodeSources(err))
}

// secretLeft is when the run of record last ended with the Secret in place
// (registered or unchanged), nil otherwise.
//
// Only a run on a timer holds back (the schedule's, or a look of the retry
// CronJob): one of them may land between the delete and the create of
// Rancher's registration page. A Job a person started (after deleting the
// Secret, as the remedies and docs/install.md say) or the run of an install
// or upgrade is someone asking for the write now, and writes.
func (j *Job) secretLeft(last *retry.Record) *time.Time {
	if !j.Scheduled && !j.OnlyWhenDue {
		return nil
	}
	if last == nil || (last.Outcome != OutcomeRegistered && last.Outcome != OutcomeUnchanged) {
		return nil
	}
	t := last.Time
	return &t
}

// phases logs the design card's six phases, numbered in the order the run
// meets them, and remembers the one that failed.
type phases struct {
	log     *slog.Logger
	secrets *redact.Registry
	step    int
	failure string
}

// runPhase runs the next phase, logs its line and hands its value on. Its
// error carries the phase, the run's end (signal or deadline) and no
// secret.
func runPhase[T any](ctx context.Context, p *phases, name string, do func(context.Context) (T, []any, error)) (T, error) {
	p.step++
	t := time.Now()
	v, attrs, err := do(ctx)
	attrs = append([]any{slog.String("phase", name), slog.Int("step", p.step), slog.Int64("durationMs", time.Since(t).Milliseconds())}, attrs...)
	if err != nil {
		err = withCause(ctx, fmt.Errorf("phase %d %s: %w", p.step, name, err))
		err = p.secrets.Error(err)
		p.log.Error("phase failed", append(attrs, slog.String("outcome", "failed"), slog.Bool("permanent", failure.IsPermanent(err)), slog.String("error", err.Error()))...)
		p.failure = name
		return v, err
	}
	p.log.Info("phase done", append(attrs, slog.String("outcome", "ok"))...)
	return v, nil
}

// doneBefore logs a phase whose work an earlier step did: the seed's six
// phases stay named in the log, and the line says which step did it.
func (p *phases) doneBefore(name, by string, attrs ...any) {
	p.step++
	attrs = append([]any{slog.String("phase", name), slog.Int("step", p.step), slog.Int64("durationMs", 0), slog.String("doneBy", by)}, attrs...)
	p.log.Info("phase done", append(attrs, slog.String("outcome", "ok"))...)
}

// failed is res with the phase that failed.
func (p *phases) failed(res Result) Result {
	res.Failed = p.failure
	return res
}

// codeRemedy is CodeRemedy, or the remedy for an unknown extension.
func (j *Job) codeRemedy() string {
	if j.CodeRemedy != "" {
		return j.CodeRemedy
	}
	return regCodeRemedy(remedy.Remedies{Namespace: operator.Namespace})
}

// regCodeRemedy is the command that sets the registration code on the
// release r (remedy.Remedies.SetCode), a run of the engine after the
// Secret of a kustomize install.
func regCodeRemedy(r remedy.Remedies) string {
	if r.Namespace == "" {
		r.Namespace = operator.Namespace
	}
	return r.SetCode(" and a run of the engine")
}

// withRegCodeSources adds to a missing-code error where the code must come
// from: kube knows the Secret, not the settings and manifests.
func withRegCodeSources(err error) error {
	if errors.Is(err, operator.ErrNoRegCode) {
		return fmt.Errorf("%w; %s", err, regCodeSources)
	}
	return err
}

// regCodeSources says where a registration code must come from, for the
// error of a first install without one.
var regCodeSources = "set " + regCodeVarsText + "; the Helm chart and manifests/overlays/azure " +
	"read it from the Secret registration-code, key regCode, in the engine's namespace " +
	"(chart value registrationCode, or kubectl create secret generic registration-code --from-literal=regCode=...)"

// withCause adds why the context ended (signal or deadline) to err, so that
// ExitCode can tell a SIGTERM from a deadline from a plain failure.
func withCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		if errors.Is(cause, ErrTerminated) || errors.Is(cause, ErrDeadline) {
			return fmt.Errorf("%w (%w)", err, cause)
		}
	}
	return err
}

func (j *Job) startupSleep(ctx context.Context, log *slog.Logger) error {
	if !j.Scheduled || j.SleepMax <= 0 {
		log.Info("starting without a startup sleep", slog.Bool("scheduled", j.Scheduled), slog.String("sleepMax", j.SleepMax.String()))
		return nil
	}
	d := j.randDuration()(j.SleepMax)
	log.Info("scheduled run: sleeping before the first request so that clusters spread their load", slog.String("sleep", d.String()), slog.String("sleepMax", j.SleepMax.String()))
	sleep := j.Sleep
	if sleep == nil {
		sleep = pause.For
	}
	if err := sleep(ctx, d); err != nil {
		return withCause(ctx, fmt.Errorf("startup sleep: %w", err))
	}
	return nil
}

// Defaults of the run's own bounds, for the settings that name them.
const (
	// DefaultRunDeadline bounds a run after the startup sleep
	// (RUN_DEADLINE's default, and Deadline's when it is zero).
	DefaultRunDeadline = 10 * time.Minute
	// DefaultStartupSleepMax bounds the random sleep of a scheduled run
	// (STARTUP_SLEEP_MAX's default): an hour spreads the clusters that
	// share the CronJob's schedule over the region servers.
	DefaultStartupSleepMax = time.Hour
	// DefaultOperatorWait bounds how long a run that wrote the Secret
	// waits for rancher/scc-operator's answer (OPERATOR_WAIT's default).
	DefaultOperatorWait = 2 * time.Minute
)

// randDuration is RandDuration, or math/rand/v2's.
func (j *Job) randDuration() func(n time.Duration) time.Duration {
	if j.RandDuration != nil {
		return j.RandDuration
	}
	return func(n time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(n))) }
}

func (j *Job) deadline() time.Duration {
	if j.Deadline <= 0 {
		return DefaultRunDeadline
	}
	return j.Deadline
}

// logger is Log, redacting through Secrets unless its handler already
// does (New's does).
func (j *Job) logger() *slog.Logger {
	if j.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	if h, ok := j.Log.Handler().(*redact.Handler); ok && h.Redacts(j.Secrets) {
		return j.Log
	}
	return slog.New(redact.NewHandler(j.Log.Handler(), j.Secrets))
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
