package sccoperator

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/rancher/registration-engine/e2e/fakecloud"
)

// ClusterDNS stands in for the cluster's DNS in the process tier, for the
// engine and the operator alike: it answers a name from the hosts entries
// in kube-system's CoreDNS ConfigMaps (as CoreDNSRoute reads them), but
// only Delay after it first saw the entry, the way a real CoreDNS serves a
// new entry only after its reload plugin or a restart picked it up (the
// kind tier measures 30-110 s). Before that the name is NXDOMAIN. Serve
// it over DNS with Server (for the engine's HANDOVER_DNS_SERVER) and as a
// proxy route with Route (for the operator's HTTPS_PROXY), so both see the
// same name at the same moment.
type ClusterDNS struct {
	Client kubernetes.Interface
	// Delay is how long a new or changed entry stays unanswered.
	Delay time.Duration

	mu        sync.Mutex
	firstSeen map[string]time.Time // name=addrs → when first read
}

// Lookup answers host as a pod would get it now; no address is NXDOMAIN.
func (d *ClusterDNS) Lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	addrs, err := coreDNSHosts(ctx, d.Client, host)
	if err != nil || len(addrs) == 0 {
		return nil, err
	}
	key := strings.ToLower(strings.TrimSuffix(host, ".")) + "="
	for _, a := range addrs {
		key += a.String() + ","
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.firstSeen == nil {
		d.firstSeen = map[string]time.Time{}
	}
	seen, ok := d.firstSeen[key]
	if !ok {
		seen = time.Now()
		d.firstSeen[key] = seen
	}
	if time.Since(seen) < d.Delay {
		return nil, nil
	}
	return addrs, nil
}

// Server serves Lookup over DNS on UDP loopback until the returned server
// is closed.
func (d *ClusterDNS) Server() (*fakecloud.DNSServer, error) {
	return fakecloud.NewDNSServer(func(ctx context.Context, name string) ([]netip.Addr, bool, error) {
		addrs, err := d.Lookup(ctx, name)
		return addrs, len(addrs) > 0, err
	})
}

// Route is CoreDNSRoute through Lookup: CONNECT <name>:443 goes to the
// name's address on port once Lookup answers it.
func (d *ClusterDNS) Route(port int) Route { return hostsRoute(d.Lookup, port) }

// Forget makes every entry new again, as after CoreDNS lost it: the next
// Lookup of any name starts its Delay afresh.
func (d *ClusterDNS) Forget() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.firstSeen = nil
}
