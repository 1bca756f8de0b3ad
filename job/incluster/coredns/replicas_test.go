package coredns

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
)

// slice is an EndpointSlice of service in kube-system, as the
// EndpointSlice controller writes it.
func slice(name, service string, family discoveryv1.AddressType, ports []discoveryv1.EndpointPort, endpoints ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: family,
		Ports:       ports,
		Endpoints:   endpoints,
	}
}

func port(name string, proto corev1.Protocol, n int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr.To(name), Protocol: ptr.To(proto), Port: ptr.To(n)}
}

func endpoint(ready *bool, addrs ...string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
}

// kubeadm's, kind's and AKS's kube-dns ports.
var kubeDNSPorts = []discoveryv1.EndpointPort{port("dns-tcp", corev1.ProtocolTCP, 53), port("metrics", corev1.ProtocolTCP, 9153), port("dns", corev1.ProtocolUDP, 53)}

func TestReplicas(t *testing.T) {
	tests := map[string]struct {
		objects []runtime.Object
		want    []string
	}{
		"kind: two ready CoreDNS pods; a terminating one is left out": {
			objects: []runtime.Object{slice("kube-dns-abcde", DNSService, discoveryv1.AddressTypeIPv4, kubeDNSPorts,
				endpoint(ptr.To(true), "10.244.0.3"), endpoint(nil, "10.244.0.2"), endpoint(ptr.To(false), "10.244.0.9"))},
			want: []string{"10.244.0.2:53", "10.244.0.3:53"},
		},
		"dual stack: both families' slices, same pods": {
			objects: []runtime.Object{
				slice("kube-dns-v4", DNSService, discoveryv1.AddressTypeIPv4, kubeDNSPorts, endpoint(ptr.To(true), "10.244.0.3")),
				slice("kube-dns-v6", DNSService, discoveryv1.AddressTypeIPv6, kubeDNSPorts, endpoint(ptr.To(true), "fd00:10:244::3")),
			},
			want: []string{"10.244.0.3:53", "[fd00:10:244::3]:53"},
		},
		"another Service's slices in kube-system are not CoreDNS": {
			objects: []runtime.Object{
				slice("kube-dns-abcde", DNSService, discoveryv1.AddressTypeIPv4, kubeDNSPorts, endpoint(ptr.To(true), "10.244.0.3")),
				slice("metrics-server-xyz", "metrics-server", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{port("https", corev1.ProtocolTCP, 443)}, endpoint(ptr.To(true), "10.244.0.7")),
			},
			want: []string{"10.244.0.3:53"},
		},
		"an unnamed UDP port 53 counts; a TCP-only slice gives nothing": {
			objects: []runtime.Object{
				slice("kube-dns-a", DNSService, discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(int32(53))}}, endpoint(ptr.To(true), "10.244.0.3")),
				slice("kube-dns-b", DNSService, discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{port("dns-tcp", corev1.ProtocolTCP, 53)}, endpoint(ptr.To(true), "10.244.0.4")),
			},
			want: []string{"10.244.0.3:53"},
		},
		"a DNS Service named otherwise: none, not an error": {
			objects: []runtime.Object{slice("rke2-coredns-x", "rke2-coredns-rke2-coredns", discoveryv1.AddressTypeIPv4, kubeDNSPorts, endpoint(ptr.To(true), "10.42.0.5"))},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientset(tc.objects...)
			got, err := Replicas{Slices: kubetest.Typed(c)}.List(context.Background())
			require.NoError(t, err)
			var s []string
			for _, a := range got {
				s = append(s, a.String())
			}
			assert.Equal(t, tc.want, s)
		})
	}
}

// TestReplicasForbidden: a Role without the list names what is missing.
func TestReplicasForbidden(t *testing.T) {
	c := fake.NewClientset()
	c.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", errors.New("RBAC: access denied"))
	})
	_, err := Replicas{Slices: kubetest.Typed(c)}.List(context.Background())
	var forbidden *kube.ForbiddenError
	require.ErrorAs(t, err, &forbidden)
	assert.True(t, failure.IsPermanent(err))
	assert.Equal(t, []string{"list"}, forbidden.Verbs)
	assert.Equal(t, "endpointslices", forbidden.Resource)
	assert.Equal(t, "kube-system", forbidden.Namespace)
	t.Log(err)
}
