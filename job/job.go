package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	"github.com/rancher/registration-engine/job/incluster"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/recovery"
	"github.com/rancher/registration-engine/job/redact"
	"github.com/rancher/registration-engine/job/regionconfig"
	"github.com/rancher/registration-engine/job/smt"
	"github.com/rancher/registration-engine/providers"
	"github.com/rancher/registration-engine/providers/failure"
	"github.com/rancher/registration-engine/providers/pause"
)

// The narrow views Run has of its collaborators. Each is satisfied by one
// concrete type of a subpackage, which New assembles; job_test.go substitutes
// a recorder that scripts each phase's outcome, and the subpackages test the
// real types against loopback fakes.
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
		Check(ctx context.Context, r kube.Registration) error
		Write(ctx context.Context, r kube.Registration) (changed bool, err error)
	}
	// OperatorWatcher reads what rancher/scc-operator made of the Secret.
	OperatorWatcher interface {
		Report(ctx context.Context, wait time.Duration) kube.OperatorReport
	}
	// EventRecorder records the run's outcome as an Event on its Job.
	EventRecorder interface {
		Record(ctx context.Context, e kube.JobEvent) error
	}
	// Locker keeps two runs apart.
	Locker interface {
		Acquire(ctx context.Context) (release func(context.Context) error, err error)
	}
)

// Job is one run's collaborators and settings, assembled by New (or by a
// test). Zero-valued optional fields are skipped: no Lock means no Lease
// (dry runs, runs outside a cluster), no InCluster means there is no
// cluster to publish the name in (dry runs, --output). LoadSettings hands phase 3 the region settings; New's
// returns those LoadConfig already read and checked.
type Job struct {
	Log          *slog.Logger
	Detector     Detector
	Prover       func(providers.Cloud) (providers.Prover, error)
	LoadSettings func() (regionconfig.Settings, error)
	Finder       Finder
	InCluster    InCluster
	Store        Store
	Lock         Locker
	RegCode      Secret
	// Operator, when set, is read after the Secret is written (waiting up
	// to OperatorWait for active or failed) and on unchanged runs (one
	// look). Nil: no cluster (dry run, --output).
	Operator     OperatorWatcher
	OperatorWait time.Duration
	// Recovery, when set (OPERATOR_RECOVERY, in a cluster), lets a run
	// recover a Registration the operator failed for a passing cause
	// (job/recovery). Nil: a Failed Registration is only reported, with
	// the remedy.
	Recovery *recovery.Recovery
	// Events, when set, gets one Event per run on the Job that runs it;
	// nil when no Job is known (JOB_NAME, JOB_UID unset).
	Events EventRecorder
	// SecretRef is namespace/name of the Secret, for the remedy in the
	// OperatorRegistrationFailed Event.
	SecretRef string
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
	// Operator is what rancher/scc-operator made of the Secret; State is
	// "" when it was not read. After a recovery it is the new
	// Registration's report.
	Operator kube.OperatorReport
	// Recovery is what the run did about a Failed Registration; nil when
	// it found none.
	Recovery *recovery.Report
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
	res, err := j.run(ctx, log)
	outcome := res.Outcome
	if err != nil {
		outcome = OutcomeFailed
	}
	res.Outcome = outcome
	// The Event first: the summary stays the run's last log line.
	j.recordEvent(ctx, log, res, err)
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
	if res.Operator.State != "" {
		attrs = append(attrs, slog.String("operator", res.Operator.State), slog.String("registration", res.Operator.Registration))
		if res.Operator.Message != "" {
			attrs = append(attrs, slog.String("operatorMessage", res.Operator.Message))
		}
	}
	if res.Recovery != nil {
		attrs = append(attrs, res.Recovery.Attrs()...)
	}
	if err != nil {
		attrs = append(attrs, slog.String("failedPhase", res.Failed), slog.String("error", err.Error()))
		log.Error("run finished", attrs...)
	} else {
		log.Info("run finished", attrs...)
	}
	return res, err
}

func (j *Job) run(ctx context.Context, log *slog.Logger) (res Result, err error) {
	if err := j.startupSleep(ctx, log); err != nil {
		res.Failed = "startup-sleep"
		return res, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, j.deadline(), ErrDeadline)
	defer cancel()

	if j.Lock != nil {
		release, err := j.Lock.Acquire(ctx)
		if errors.Is(err, kube.ErrLeaseHeld) {
			log.Info("another run holds the lease; skipping this run", slog.String("reason", err.Error()))
			res.Outcome, res.Skipped = OutcomeSkipped, err.Error()
			return res, nil
		}
		if err != nil {
			res.Failed = "lease"
			return res, withCause(ctx, fmt.Errorf("lease: %w", err))
		}
		defer func() {
			// The run's context may be cancelled already; release with one of
			// its own so the next run need not wait for the Lease to expire.
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer rcancel()
			if rerr := release(rctx); rerr != nil {
				log.Warn("could not release the lease; the next run waits for it to expire", slog.String("error", rerr.Error()))
			}
		}()
	}

	var (
		det      providers.Detection
		ev       *providers.Evidence
		settings regionconfig.Settings
		server   smt.UpdateServer
		addr     netip.Addr
		written  writeFacts
	)
	phases := []struct {
		name string
		do   func(ctx context.Context) (attrs []any, err error)
	}{
		{"detect", func(ctx context.Context) ([]any, error) {
			var err error
			det, err = j.Detector.Detect(ctx)
			res.Cloud = det.Cloud
			return []any{slog.String("cloud", string(det.Cloud)), slog.String("source", det.Source), slog.String("endpoint", det.Endpoint)}, err
		}},
		{"prove", func(ctx context.Context) ([]any, error) {
			p, err := j.Prover(det.Cloud)
			if err != nil {
				return nil, err
			}
			ev, err = p.Prove(ctx)
			if err != nil {
				return nil, err
			}
			j.Secrets.Add(documentSecrets(ev.InstanceData)...)
			return []any{slog.String("cloud", string(ev.Cloud)), slog.String("regionHint", ev.RegionHint), slog.Int("instanceDataBytes", len(ev.InstanceData))}, nil
		}},
		{"load-config", func(context.Context) ([]any, error) {
			var err error
			settings, err = j.LoadSettings()
			return []any{slog.Int("regionServers", len(settings.RegionServers)), slog.Bool("metadataServer", settings.MetadataServer != "")}, err
		}},
		{"find-update-server", func(ctx context.Context) ([]any, error) {
			var err error
			server, err = j.Finder.Find(ctx, settings, ev.RegionHint)
			res.Server = server.Name
			return []any{slog.String("server", server.Name), slog.String("region", server.Region), slog.String("ipv4", addrString(server.IPv4)), slog.String("ipv6", addrString(server.IPv6))}, err
		}},
		{"race-addresses", func(ctx context.Context) ([]any, error) {
			// Phase 4's health check raced the two families (IPv6 first,
			// IPv4 after the head start) and reports the address that
			// answered; racing them again here would only pay IPv6's head
			// start twice when IPv6 is a black hole.
			if !server.Reached.IsValid() {
				return nil, fmt.Errorf("phase 4 reported no address of %s that answered its health check", server.Name)
			}
			addr = server.Reached
			res.Address = addr
			return []any{slog.String("address", addrString(addr)), slog.String("racedIn", "find-update-server")}, nil
		}},
		{"write-secret", func(ctx context.Context) ([]any, error) {
			reg := kube.Registration{
				// The name as it is, not absolute ("name."): the trailing dot
				// would reach the update server's Host header, and changing
				// the URL makes the operator re-register every existing
				// cluster. The handover's absolute lookup guards against a
				// search-domain name shadowing it (handover.ErrShadowed).
				URL:          "https://" + server.Name,
				RegCode:      j.RegCode.Reveal(),
				InstanceData: ev.InstanceData,
				CertPEM:      server.CertPEM,
			}
			if err := j.Store.Check(ctx, reg); err != nil {
				return nil, withRegCodeSources(err)
			}
			var attrs []any
			written.reg, written.noHandover = reg, "no cluster (dry run or --output)"
			if j.InCluster == nil {
				log.Info("no cluster (dry run or --output): the name is neither mapped nor handed over", slog.String("server", server.Name), slog.String("address", addrString(addr)))
			} else {
				pub, err := j.InCluster.Publish(ctx, server.Name, addr, server.CertPEM)
				if err != nil {
					return nil, err
				}
				written.noHandover = pub.Skipped
				attrs = append(attrs, pub.Attrs()...)
			}
			if j.RegCode == "" {
				log.Info("no registration code configured (REGISTRATION_CODE, REG_CODE or REGCODE): the one in the Secret is kept")
			}
			changed, err := j.Store.Write(ctx, reg)
			res.Changed = changed
			return append(attrs, slog.Bool("changed", changed)), j.Recovery.WithOperatorState(ctx, withRegCodeSources(err))
		}},
	}
	for i, p := range phases {
		t := time.Now()
		attrs, err := p.do(ctx)
		attrs = append([]any{slog.String("phase", p.name), slog.Int("step", i+1), slog.Int64("durationMs", time.Since(t).Milliseconds())}, attrs...)
		if err != nil {
			err = withCause(ctx, fmt.Errorf("phase %d %s: %w", i+1, p.name, err))
			err = j.Secrets.Error(err)
			log.Error("phase failed", append(attrs, slog.String("outcome", "failed"), slog.Bool("permanent", failure.IsPermanent(err)), slog.String("error", err.Error()))...)
			res.Failed = p.name
			return res, err
		}
		log.Info("phase done", append(attrs, slog.String("outcome", "ok"))...)
	}
	res.Outcome = OutcomeUnchanged
	if res.Changed {
		res.Outcome = OutcomeRegistered
	}
	return res, j.Secrets.Error(j.reportOperator(ctx, log, &res, server.Name, written))
}

// writeFacts is what the write-secret phase leaves for the operator
// report: the values written and, when the handover check did not run,
// why ("" when it passed).
type writeFacts struct {
	reg        kube.Registration
	noHandover string
}

// reportOperator reads what the operator made of the Secret: after a write
// it waits up to OperatorWait for active or failed, on an unchanged run it
// looks once. A Failed Registration is job/recovery's: it recovers one a
// retry can fix, and otherwise fails the run (failedPhase operator) with
// the remedy, since the operator ignores the Secret until a person deletes
// it and the Job must show it. Pending and absent leave the run
// successful, pending with a warning.
func (j *Job) reportOperator(ctx context.Context, log *slog.Logger, res *Result, server string, written writeFacts) error {
	if j.Operator == nil {
		return nil
	}
	var wait time.Duration
	if res.Changed {
		wait = j.OperatorWait
	}
	t := time.Now()
	rep := j.Operator.Report(ctx, wait)
	res.Operator = rep
	attrs := []any{slog.String("operator", rep.State), slog.String("registration", rep.Registration), slog.String("operatorMessage", rep.Message), slog.Int64("durationMs", time.Since(t).Milliseconds())}
	switch rep.State {
	case kube.OperatorFailed:
		verdict := kube.ClassifyOperatorFailure(rep.Message)
		attrs = append(attrs, slog.Bool("recoverable", verdict.Recoverable), slog.String("cause", verdict.Cause))
		log.Error("rancher/scc-operator failed the registration", attrs...)
		rr, err := j.Recovery.Recover(ctx, log, recovery.Failure{
			Report: rep, Verdict: verdict, Server: server, Written: written.reg, Unproven: written.noHandover, SecretRef: j.secretRef(),
		})
		res.Recovery = &rr
		if rr.Rewritten {
			res.Changed, res.Outcome, res.Operator = true, OutcomeRegistered, rr.Operator
		}
		if err != nil {
			res.Failed = PhaseOperator
		}
		return err
	case kube.OperatorPending:
		log.Warn("rancher/scc-operator has not finished the registration", append(attrs, slog.String("operatorWait", wait.String()))...)
	case kube.OperatorActive:
		log.Info("rancher/scc-operator's registration", attrs...)
		j.Recovery.Forget(ctx, log, rep)
	default:
		log.Info("rancher/scc-operator's registration", attrs...)
	}
	return nil
}

// recordEvent records the run's outcome on its Job. An Event that cannot
// be created is a warning, never a failed run.
func (j *Job) recordEvent(ctx context.Context, log *slog.Logger, res Result, runErr error) {
	if j.Events == nil {
		log.Debug("no Event recorded: no Job known (JOB_NAME or JOB_UID unset)")
		return
	}
	e := kube.JobEvent{Action: "Register", Server: res.Server, Address: addrString(res.Address)}
	switch {
	case res.Outcome == OutcomeSkipped:
		// A Job that completes having done nothing must say so where
		// `kubectl describe job` looks.
		e.Reason, e.Note = kube.ReasonSkipped, "skipped, nothing done: "+res.Skipped
	case res.Recovery != nil && res.Recovery.Event.Reason != "":
		e.Warning, e.Reason, e.Action, e.Note = res.Recovery.Event.Warning, res.Recovery.Event.Reason, res.Recovery.Event.Action, res.Recovery.Event.Note
	case runErr != nil:
		e.Warning, e.Reason = true, kube.ReasonFailed
		e.Note = fmt.Sprintf("phase %s failed (exit code %d): %v", res.Failed, ExitCode(runErr), runErr)
	default:
		e.Reason, e.Note = kube.ReasonUnchanged, j.secretRef()+" already current for"
		if res.Changed {
			e.Reason, e.Note = kube.ReasonRegistered, "wrote "+j.secretRef()+" for"
		}
		e.Warning = res.Operator.State == kube.OperatorPending
		e.Note += fmt.Sprintf(" https://%s (address %s)%s", res.Server, addrString(res.Address), operatorNote(res.Operator))
	}
	// The note quotes peers (an error, the operator's message), which may
	// quote a secret; the recorder redacts too, whoever calls it.
	e.Note = j.Secrets.String(e.Note)
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := j.Events.Record(ectx, e); err != nil {
		log.Warn("could not record the run's Event on its Job", slog.String("reason", e.Reason), slog.String("error", err.Error()))
		return
	}
	log.Debug("event recorded", slog.String("reason", e.Reason))
}

// operatorNote is the operator's answer as the Event of a successful run
// quotes it; "" when it was not read.
func operatorNote(rep kube.OperatorReport) string {
	if rep.State == "" {
		return ""
	}
	note := "; operator=" + rep.State
	if rep.Registration != "" {
		note += " registration " + rep.Registration
	}
	if rep.Message != "" {
		note += ": " + rep.Message
	}
	return note
}

// secretRef is namespace/name of the Secret the run writes.
func (j *Job) secretRef() string {
	if j.SecretRef == "" {
		return kube.Namespace + "/" + kube.SecretName
	}
	return j.SecretRef
}

// withRegCodeSources adds to a missing-code error where the code must come
// from: kube knows the Secret, not the settings and manifests.
func withRegCodeSources(err error) error {
	if errors.Is(err, kube.ErrNoRegCode) {
		return fmt.Errorf("%w; %s", err, regCodeSources)
	}
	return err
}

// regCodeSources says where a registration code must come from, for the
// error of a first install without one.
const regCodeSources = "set REGISTRATION_CODE (or REG_CODE or REGCODE); the Helm chart and manifests/overlays/azure " +
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
	randDur := j.RandDuration
	if randDur == nil {
		randDur = func(n time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(n))) }
	}
	d := randDur(j.SleepMax)
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

// documentSecrets is what of the attested document phase 2 produced is
// secret: the document itself, and its PKCS#7 signature alone, which a peer
// that re-serializes the document still quotes verbatim.
func documentSecrets(doc string) []string {
	body := strings.TrimSuffix(strings.TrimPrefix(doc, "<document>"), "</document>")
	var d struct {
		Signature    string `json:"signature"`
		AttestedData struct {
			Signature string `json:"signature"`
		} `json:"attestedData"`
	}
	_ = json.Unmarshal([]byte(body), &d)
	return []string{doc, d.Signature, d.AttestedData.Signature}
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
