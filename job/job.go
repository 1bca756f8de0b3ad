package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/regionconfig"
	"github.com/rancher/registration-engine/job/smt"
	"github.com/rancher/registration-engine/providers"
	"github.com/rancher/registration-engine/providers/failure"
)

// The narrow views Run has of its collaborators. Each is satisfied by one
// concrete type of a subpackage; tests substitute real ones pointed at
// loopback fakes.
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
	// Racer picks the address to reach the update server by (phase 5).
	Racer interface {
		Race(ctx context.Context, v6, v4 netip.Addr) (netip.Addr, error)
	}
	// InClusterDNS makes the update server's name resolve in the cluster.
	InClusterDNS interface {
		Ensure(ctx context.Context, fqdn string, ip netip.Addr) (changed bool, err error)
	}
	// Store writes the registration (phase 6).
	Store interface {
		Write(ctx context.Context, r kube.Registration) (changed bool, err error)
	}
	// Handover waits, before the Secret is written, until the update server
	// is reachable the way the operator will reach it: its name resolving
	// through the cluster's DNS to the mapped address, TLS answering there
	// with the pinned certificate. object names the CoreDNS ConfigMap
	// holding the entry, for its messages.
	Handover interface {
		Until(ctx context.Context, name string, addr netip.Addr, certPEM []byte, object string) (waited time.Duration, err error)
	}
	// Locker keeps two runs apart.
	Locker interface {
		Acquire(ctx context.Context) (release func(context.Context) error, err error)
	}
)

// Job is one run's collaborators and settings, assembled by New (or by a
// test). Zero-valued optional fields are skipped: no Lock means no Lease
// (dry runs, runs outside a cluster), no InClusterDNS means the cluster's DNS is left alone.
type Job struct {
	Log          *slog.Logger
	Detector     Detector
	Prover       func(providers.Cloud) (providers.Prover, error)
	LoadSettings func() (regionconfig.Settings, error)
	Finder       Finder
	Racer        Racer
	InClusterDNS InClusterDNS
	Handover     Handover
	Store        Store
	Lock         Locker
	RegCode      Secret

	// HandoverSkip says why Handover is nil: it is logged where the wait
	// would have been. HandoverDisabled makes that a warning (the wait was
	// turned off, not inapplicable).
	HandoverSkip     string
	HandoverDisabled bool

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
}

// Run executes the run once: startup sleep, Lease, the six phases, release.
// It returns nil when the cluster is registered, already current, or another
// run holds the Lease; otherwise the error of the first phase that failed.
func (j *Job) Run(ctx context.Context) (Result, error) {
	log := j.logger()
	start := time.Now()
	res, err := j.run(ctx, log)
	outcome := res.Outcome
	if err != nil {
		outcome = OutcomeFailed
	}
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
	if err != nil {
		attrs = append(attrs, slog.String("failedPhase", res.Failed), slog.String("error", err.Error()))
		log.Error("run finished", attrs...)
	} else {
		log.Info("run finished", attrs...)
	}
	res.Outcome = outcome
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
			res.Outcome = OutcomeSkipped
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
			var err error
			addr, err = j.Racer.Race(ctx, server.IPv6, server.IPv4)
			res.Address = addr
			return []any{slog.String("address", addrString(addr))}, err
		}},
		{"write-secret", func(ctx context.Context) ([]any, error) {
			var attrs []any
			if j.InClusterDNS == nil {
				log.Info("in-cluster DNS left alone: no cluster, or IN_CLUSTER_DNS=false", slog.String("server", server.Name), slog.String("address", addrString(addr)))
			} else {
				changed, err := j.InClusterDNS.Ensure(ctx, server.Name, addr)
				if err != nil {
					return nil, fmt.Errorf("in-cluster DNS: %w", err)
				}
				attrs = append(attrs, slog.Bool("dnsChanged", changed))
			}
			switch {
			case j.Handover != nil:
				var object string
				if o, ok := j.InClusterDNS.(interface{ Object() string }); ok {
					object = o.Object()
				}
				waited, err := j.Handover.Until(ctx, server.Name, addr, server.CertPEM, object)
				if err != nil {
					return nil, fmt.Errorf("handover: %w", err)
				}
				attrs = append(attrs, slog.Int64("handoverMs", waited.Milliseconds()))
			case j.HandoverDisabled:
				log.Warn("handover wait disabled (HANDOVER_TIMEOUT=0, for tests only): the operator may get the Secret before it can reach the update server, and a failed registration stays failed", slog.String("server", server.Name))
			default:
				log.Info("handover wait skipped", slog.String("reason", j.HandoverSkip), slog.String("server", server.Name))
			}
			if j.RegCode == "" {
				log.Warn("no registration code set (REGISTRATION_CODE, REG_CODE or REGCODE); rancher/scc-operator refuses online registration without one")
			}
			changed, err := j.Store.Write(ctx, kube.Registration{
				URL:          "https://" + server.Name,
				RegCode:      j.RegCode.Reveal(),
				InstanceData: ev.InstanceData,
				CertPEM:      server.CertPEM,
			})
			res.Changed = changed
			return append(attrs, slog.Bool("changed", changed)), err
		}},
	}
	for i, p := range phases {
		t := time.Now()
		attrs, err := p.do(ctx)
		attrs = append([]any{slog.String("phase", p.name), slog.Int("step", i+1), slog.Int64("durationMs", time.Since(t).Milliseconds())}, attrs...)
		if err != nil {
			err = withCause(ctx, fmt.Errorf("phase %d %s: %w", i+1, p.name, err))
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
	return res, nil
}

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
		sleep = sleepCtx
	}
	if err := sleep(ctx, d); err != nil {
		return withCause(ctx, fmt.Errorf("startup sleep: %w", err))
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (j *Job) deadline() time.Duration {
	if j.Deadline <= 0 {
		return 10 * time.Minute
	}
	return j.Deadline
}

func (j *Job) logger() *slog.Logger {
	if j.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return j.Log
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
