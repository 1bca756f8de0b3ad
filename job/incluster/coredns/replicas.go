package coredns

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rancher/registration-engine/job/kube"
)

// DNSService is the cluster DNS Service in kube-system, as kubeadm, kind,
// AKS and k3s name it: the name pods' /etc/resolv.conf reaches through its
// ClusterIP.
const DNSService = "kube-dns"

// Replicas lists the CoreDNS pods behind the cluster's DNS Service, each
// as the address and port that answers DNS over UDP. The handover asks
// every one of them, since each reloads the changed Corefile on its own
// schedule and the Service sends a query to any of them. Endpoints that
// are not ready (terminating, or not started) are left out: the Service
// sends them nothing. None at all (a cluster whose DNS Service is named
// otherwise) is not an error; the handover then asks the Service alone.
type Replicas struct {
	Slices    kube.EndpointSlicesGetter
	Namespace string // default kube-system
	Service   string // default DNSService
}

// List returns the replicas' DNS addresses, sorted.
func (r Replicas) List(ctx context.Context) ([]netip.AddrPort, error) {
	ns, svc := cmp.Or(r.Namespace, "kube-system"), cmp.Or(r.Service, DNSService)
	list, err := r.Slices.EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return nil, fmt.Errorf("coredns: %s/%s's EndpointSlices: %w", ns, svc,
			kube.APIError(err, kube.Access{Verbs: []string{"list"}, Resource: "endpointslices", Namespace: ns}))
	}
	var out []netip.AddrPort
	for _, s := range list.Items {
		port, ok := udpDNSPort(s.Ports)
		if !ok {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil {
					out = append(out, netip.AddrPortFrom(ip.Unmap(), port))
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return slices.Compact(out), nil
}

// udpDNSPort is the slice's UDP port named "dns" (kubeadm's, kind's, AKS's
// and k3s's name), else its UDP port 53.
func udpDNSPort(ports []discoveryv1.EndpointPort) (uint16, bool) {
	var fallback uint16
	for _, p := range ports {
		if p.Port == nil || (p.Protocol != nil && *p.Protocol != corev1.ProtocolUDP) {
			continue
		}
		if p.Name != nil && *p.Name == "dns" {
			return uint16(*p.Port), true
		}
		if *p.Port == 53 {
			fallback = 53
		}
	}
	return fallback, fallback != 0
}
