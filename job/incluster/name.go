// Package incluster is the first half of phase 6: the update server's name
// inside the cluster. Public DNS does not resolve the update servers'
// names, yet rancher/scc-operator must connect to https://<name> for the
// certificate to match; so the engine maps the name in CoreDNS (its
// subpackage coredns) and waits until the cluster's DNS serves it and the
// server answers TLS there with the pinned certificate (its subpackage
// handover). Only then may the Secret be written: the operator registers
// once, and a failed attempt stays failed.
//
// Name.Publish is the one call phase 6 makes. It decides from its Config
// what applies (IN_CLUSTER_DNS, whether the run is in a pod, the wait's
// bounds) and returns what it did, so the caller holds no state of it.
package incluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/incluster/handover"
	"github.com/rancher/registration-engine/job/kube"
)

// Config is what decides phase 6's in-cluster half. Its own settings are
// IN_CLUSTER_DNS, CLUSTER_ADDRESS_RANGES, HANDOVER_TIMEOUT, HANDOVER_SETTLE
// and HANDOVER_DNS_SERVER
// (the settings table in job owns their names and help; Validate owns the
// rule that binds them); Port and Domains are smt's settings
// UPDATE_SERVER_HTTPS_PORT and UPDATE_SERVER_DOMAINS, and OutsidePod is
// --kubeconfig given, which New copies in.
type Config struct {
	// Map is IN_CLUSTER_DNS: map the name in CoreDNS (default true).
	Map bool
	// OutsidePod says the run is not in a pod (--kubeconfig): this
	// machine's resolver is not the cluster's DNS, so there is nothing to
	// wait on unless DNSServer names it.
	OutsidePod bool
	// DNSServer (ip:port) is where the wait asks instead of the pod's own
	// resolver; for a process that stands in for a pod.
	DNSServer string
	// Timeout bounds the wait; 0 turns it off (tests only).
	Timeout time.Duration
	// Settle is how long every check must keep passing (handover.Wait).
	Settle time.Duration
	// Port is the update server's TLS port.
	Port int
	// Domains is UPDATE_SERVER_DOMAINS: the engine's entries for other
	// names under them are its earlier runs', for update servers no longer
	// chosen, and go when the new one is written (coredns.Editor).
	Domains []string
	// ClusterRanges is CLUSTER_ADDRESS_RANGES, the chart's
	// clusterAddressRanges: the engine writes no entry for an address in
	// them into a CoreDNS hosts block that answers reverse queries, as the
	// admission policy, which reads the same value, refuses it there
	// (coredns.Editor).
	ClusterRanges []netip.Prefix
}

// Validate is the one place the wait's bounds are checked against each
// other: a settle as long as the timeout fails every run after CoreDNS was
// edited.
func (c Config) Validate() error {
	if c.Map && c.Timeout > 0 && c.Settle >= c.Timeout {
		return fmt.Errorf("HANDOVER_SETTLE=%s is not shorter than HANDOVER_TIMEOUT=%s: the handover wait would always time out; raise HANDOVER_TIMEOUT or lower HANDOVER_SETTLE",
			c.Settle, c.Timeout)
	}
	return nil
}

// Mapper maps a name to an address in the cluster's DNS
// (*coredns.Editor).
type Mapper interface {
	Ensure(ctx context.Context, fqdn string, ip netip.Addr) (coredns.Edit, error)
}

// Waiter waits until the name is served and answers (*handover.Wait).
type Waiter interface {
	Until(ctx context.Context, name string, addr netip.Addr, certPEM []byte, object string) (time.Duration, error)
}

// Name publishes the update server's name in the cluster. New assembles it
// from a Config and the cluster's clients; tests set CoreDNS and Wait.
type Name struct {
	Config  Config
	CoreDNS Mapper
	Wait    Waiter
	Log     *slog.Logger
}

// New assembles the production Name: CoreDNS through clients, a wait that
// asks the cluster's DNS and every CoreDNS replica behind it.
func New(cfg Config, clients *kube.Clients, log *slog.Logger) *Name {
	n := &Name{Config: cfg, Log: log}
	if cfg.Map {
		n.CoreDNS = &coredns.Editor{ConfigMaps: clients.ConfigMaps, Domains: cfg.Domains, ClusterRanges: cfg.ClusterRanges, Log: log}
	}
	w := &handover.Wait{
		Port:     cfg.Port,
		Timeout:  cfg.Timeout,
		Settle:   cfg.Settle,
		Replicas: coredns.Replicas{Slices: clients.EndpointSlices}.List,
		Log:      log,
	}
	if cfg.DNSServer != "" {
		w.Resolve = handover.ServerResolver(cfg.DNSServer)
	}
	n.Wait = w
	return n
}

// Result is what Publish did, for phase 6's log line and the run summary.
type Result struct {
	// Object is the ConfigMap (namespace/name) that holds the entry; ""
	// when the cluster's DNS was left alone.
	Object string
	// Changed says this call wrote the entry.
	Changed bool
	// Removed are the engine's earlier entries ("<ip> <name>") this call
	// removed, for update servers no longer chosen.
	Removed []string
	// Waited is how long the handover wait took; 0 when there was none.
	Waited time.Duration
	// Skipped says why the name was not mapped or not waited for; "" when
	// both happened.
	Skipped string
}

// Attrs are the result as log attributes.
func (r Result) Attrs() []any {
	var a []any
	if r.Object != "" {
		a = append(a, slog.String("coredns", r.Object), slog.Bool("dnsChanged", r.Changed))
	}
	if len(r.Removed) > 0 {
		a = append(a, slog.Any("dnsRemoved", r.Removed))
	}
	if r.Skipped == "" {
		a = append(a, slog.Int64("handoverMs", r.Waited.Milliseconds()))
	}
	return a
}

// Why Publish did less than map and wait; the strings are its log's
// reasons and Result.Skipped.
const (
	skipNoMap      = "IN_CLUSTER_DNS=false: the cluster's DNS is left alone and there is no mapping to wait for"
	skipOutsidePod = "not in a pod (--kubeconfig): this machine's resolver is not the cluster's DNS"
	skipNoWait     = "HANDOVER_TIMEOUT=0 (tests only): the operator may get the Secret before it can reach the update server, and a failed registration stays failed"
)

// ErrNoWaiter is Publish's error when a wait applies but none was set: a
// wiring mistake, never a cluster's state.
var ErrNoWaiter = errors.New("incluster: a handover wait applies but none is set")

// Publish maps name to addr in CoreDNS and waits until the cluster serves
// it and the server answers TLS there with certPEM's certificate, doing
// only what Config says applies. An error means the Secret must not be
// written: the operator would be handed a name it cannot reach.
func (n *Name) Publish(ctx context.Context, name string, addr netip.Addr, certPEM []byte) (Result, error) {
	log := n.logger()
	var res Result
	if !n.Config.Map {
		res.Skipped = skipNoMap
		log.Info("in-cluster DNS left alone", slog.String("reason", res.Skipped), slog.String("server", name), slog.String("address", addr.String()))
		return res, nil
	}
	edit, err := n.CoreDNS.Ensure(ctx, name, addr)
	if err != nil {
		return res, fmt.Errorf("in-cluster DNS: %w", err)
	}
	res.Object, res.Changed, res.Removed = edit.Object, edit.Changed, edit.Removed
	switch {
	case n.Config.OutsidePod && n.Config.DNSServer == "":
		res.Skipped = skipOutsidePod
		log.Info("handover wait skipped", slog.String("reason", res.Skipped), slog.String("server", name))
		return res, nil
	case n.Config.Timeout <= 0:
		res.Skipped = skipNoWait
		log.Warn("handover wait disabled", slog.String("reason", res.Skipped), slog.String("server", name))
		return res, nil
	case n.Wait == nil:
		return res, ErrNoWaiter
	}
	res.Waited, err = n.Wait.Until(ctx, name, addr, certPEM, res.Object)
	if err != nil {
		return res, fmt.Errorf("handover: %w", err)
	}
	return res, nil
}

func (n *Name) logger() *slog.Logger {
	if n.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return n.Log
}
