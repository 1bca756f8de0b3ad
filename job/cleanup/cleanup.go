// Package cleanup is `registration-engine cleanup` end to end, the
// command the chart's post-delete hook runs at helm uninstall: it removes
// what the engine wrote outside its release (the CoreDNS entry, the
// Lease). job hands it the API server's client options, which it builds
// from the engine's variables and version.
package cleanup

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/rancher/registration-engine/internal/pause"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/smt"
)

// Timeout bounds `registration-engine cleanup` as a whole. The
// chart's post-delete hook gives its Job a deadline a little longer
// (activeDeadlineSeconds), so the process, not the deadline, ends the pod.
const Timeout = 45 * time.Second

// leaseWait is how long cleanup waits for a run that holds the Lease
// to finish, so that the run does not write the CoreDNS entry again right
// after cleanup removed it. The hook runs after helm uninstall deleted the
// CronJob and its Jobs, which stops their pods (SIGTERM; a run releases the
// Lease within 5 s), so the wait is short in practice.
const leaseWait = 20 * time.Second

// Report is what `registration-engine cleanup` did.
type Report struct {
	// Removed is the engine's CoreDNS configuration taken out.
	Removed coredns.Removal
	// LeaseDeleted: the engine's Lease was there and is gone.
	LeaseDeleted bool
	// Problems are what cleanup could not do, each with its reason.
	Problems []error
}

// Command is `registration-engine cleanup`. ClientOptions gives the API
// server's client options for the kubeconfig named by --kubeconfig ("":
// in-cluster), from the engine's own variables.
type Command struct {
	ClientOptions func(kubeconfig string) kube.ClientOptions
}

// Run is `registration-engine cleanup`, what the chart's post-delete
// hook runs at helm uninstall, under the hook's own ServiceAccount: it removes what the engine wrote outside
// its own release and that would otherwise keep acting after it, the
// update server's hosts entry in CoreDNS (the engine's coredns-custom key,
// or its entries in the Corefile) and the engine's Lease. The Secret
// scc-registration stays: it is rancher/scc-operator's, which keeps it
// behind its finalizer.
//
// It always returns nil and logs what it could not do, with the reason: a
// failed hook makes helm uninstall exit 1 although the release is gone,
// which tells the user nothing a log line does not. Only a flag it does not
// know is an error. A refusal (403) is retried until the timeout: the
// hook's Roles are created just before its Job, and an API server's
// authorizer may take a moment to see them. It reads the engine's own variables
// (the pod template is the CronJob's), nothing else: a configuration that
// would stop a run (a placeholder, a missing region-server file) does not
// stop the cleanup.
func (c Command) Run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("registration-engine cleanup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: registration-engine cleanup [flags]

Removes what the engine wrote outside its release: its CoreDNS entry for the
update server (its coredns-custom key, or its entries in the Corefile) and
its Lease. The Secret scc-registration stays (rancher/scc-operator's). The
chart's post-delete hook runs it at helm uninstall; run it by hand after an
uninstall whose hook could not run (docs/uninstall.md). Always exits 0 and
logs what it could not remove, but for a flag it does not know.

Flags:
`)
		fs.PrintDefaults()
	}
	kubeconfig := fs.String("kubeconfig", getenv("KUBECONFIG"), "kubeconfig, for a cleanup from a workstation (default: in-cluster)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("cleanup: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With(slog.String("phase", "cleanup"))
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	start := time.Now()

	rep := c.clean(ctx, log, *kubeconfig, getenv)
	for refused(rep.Problems) {
		log.Info("cleanup: refused; retrying while the hook's Roles propagate", slog.String("error", errors.Join(rep.Problems...).Error()))
		if pause.For(ctx, 2*time.Second) != nil {
			break
		}
		rep = rep.then(c.clean(ctx, log, *kubeconfig, getenv))
	}
	attrs := []any{
		slog.String("removedKey", rep.Removed.CustomKey),
		slog.Any("removedEntries", rep.Removed.Corefile),
		slog.Bool("leaseDeleted", rep.LeaseDeleted),
		slog.Int64("durationMs", time.Since(start).Milliseconds()),
	}
	if len(rep.Problems) > 0 {
		attrs = append(attrs, slog.String("error", errors.Join(rep.Problems...).Error()))
		log.Warn("cleanup finished with problems: remove what remains by hand (docs/uninstall.md)", attrs...)
		return nil
	}
	log.Info("cleanup finished", attrs...)
	return nil
}

// then is what two attempts did together: what either removed, and the
// later one's problems.
func (r Report) then(next Report) Report {
	next.Removed.CustomKey = cmp.Or(next.Removed.CustomKey, r.Removed.CustomKey)
	next.Removed.Corefile = append(r.Removed.Corefile, next.Removed.Corefile...)
	next.LeaseDeleted = next.LeaseDeleted || r.LeaseDeleted
	return next
}

// refused is whether the API server refused one of problems (403).
func refused(problems []error) bool {
	for _, p := range problems {
		if apierrors.IsForbidden(p) {
			return true
		}
	}
	return false
}

// clean is one attempt: the Lease waited for, the CoreDNS entry removed,
// the Lease deleted.
func (c Command) clean(ctx context.Context, log *slog.Logger, kubeconfig string, getenv func(string) string) Report {
	var rep Report
	rc, err := kube.RESTConfig(c.ClientOptions(kubeconfig), log)
	if err != nil {
		rep.Problems = append(rep.Problems, err)
		return rep
	}
	clients, err := kube.NewClients(rc)
	if err != nil {
		rep.Problems = append(rep.Problems, err)
		return rep
	}
	ns := cmp.Or(getenv("REGISTRATION_SECRET_NAMESPACE"), getenv("POD_NAMESPACE"), operator.Namespace)
	leaseName := cmp.Or(getenv("LEASE_NAME"), kube.LeaseName)
	holder := cmp.Or(getenv("POD_NAME"), "registration-engine-cleanup")

	// Wait, briefly, for a run that holds the Lease: it could write the
	// entry again after it is removed.
	lease := &kube.Lease{Leases: clients.Leases, Namespace: ns, Name: leaseName, Holder: holder,
		Duration: time.Minute, Clock: clock.RealClock{}, Log: log}
	waitCtx, waitCancel := context.WithTimeout(ctx, leaseWait)
	for {
		_, _, err := lease.Acquire(waitCtx)
		if err == nil {
			break
		}
		if !errors.Is(err, kube.ErrLeaseHeld) {
			log.Warn("cleanup: cannot take the Lease; removing the entry anyway", slog.String("error", err.Error()))
			break
		}
		if pause.For(waitCtx, 2*time.Second) != nil {
			log.Warn("cleanup: a run still holds the Lease; removing the entry anyway (helm uninstall stops that run next)", slog.String("error", err.Error()))
			break
		}
	}
	waitCancel()

	if dnsOn, err := strconv.ParseBool(cmp.Or(getenv("IN_CLUSTER_DNS"), "true")); err != nil || dnsOn {
		domains := smt.DefaultDomains
		if getenv("UPDATE_SERVER_DOMAINS") != "" {
			domains = nil
		}
		for _, d := range strings.Split(getenv("UPDATE_SERVER_DOMAINS"), ",") {
			if d = strings.TrimSpace(d); d != "" {
				domains = append(domains, d)
			}
		}
		dns := &coredns.Editor{ConfigMaps: clients.ConfigMaps, Domains: domains, ClusterRanges: clusterRanges(getenv("CLUSTER_ADDRESS_RANGES"), log), Log: log}
		rep.Removed, err = dns.Remove(ctx)
		if err != nil {
			rep.Problems = append(rep.Problems, err)
		}
	}

	err = clients.Leases.Leases(ns).Delete(ctx, leaseName, metav1.DeleteOptions{})
	switch {
	case err == nil:
		rep.LeaseDeleted = true
	case apierrors.IsNotFound(err):
	default:
		rep.Problems = append(rep.Problems, fmt.Errorf("lease %s/%s: %w", ns, leaseName,
			kube.APIError(err, kube.Access{Verbs: []string{"delete"}, Resource: "leases/" + leaseName, Namespace: ns})))
	}
	return rep
}

// clusterRanges reads CLUSTER_ADDRESS_RANGES as the run does (comma-separated
// CIDRs), so that the cleanup counts as the engine's the entries the
// admission policy lets it remove; unset or unreadable, nil
// (coredns.DefaultClusterRanges), logged: a value that would stop a run
// does not stop the cleanup.
func clusterRanges(v string, log *slog.Logger) []netip.Prefix {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	out, err := coredns.ParseClusterRanges(v)
	if err != nil {
		log.Warn("cleanup: CLUSTER_ADDRESS_RANGES is unreadable; using the defaults", slog.String("error", err.Error()))
		return nil
	}
	return out
}
