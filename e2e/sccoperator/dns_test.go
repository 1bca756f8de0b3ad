package sccoperator

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/job/incluster/coredns"
)

// engineBlock is a hosts block as the engine writes it.
func engineBlock(ip, host string) string {
	return "hosts {\n    " + ip + " " + host + "\n    ttl 15\n    no_reverse\n    fallthrough\n}\n"
}

// withEntry is the kubeadm Corefile with the engine's block in its root
// block.
func withEntry(ip string) string {
	root := ".:53 {\n"
	return root + "    " + strings.ReplaceAll(strings.TrimSuffix(engineBlock(ip, name), "\n"), "\n", "\n    ") + "\n" + fakecloud.KubeadmCorefile[len(root):]
}

func configMaps(corefile string, custom map[string]string) *fake.Clientset {
	objs := []corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Name: coredns.ConfigMap, Namespace: "kube-system"}, Data: map[string]string{coredns.CorefileKey: corefile}}}
	if custom != nil {
		objs = append(objs, corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: coredns.CustomConfigMap, Namespace: "kube-system"}, Data: custom})
	}
	cs := fake.NewClientset()
	for i := range objs {
		_, err := cs.CoreV1().ConfigMaps("kube-system").Create(context.Background(), &objs[i], metav1.CreateOptions{})
		if err != nil {
			panic(err)
		}
	}
	return cs
}

// TestClusterDNSServesWhatCoreDNSReads: the process tier's cluster DNS is a
// real CoreDNS, so a name resolves only where CoreDNS itself reads the
// entry: in the Corefile's root block, or in a coredns-custom key that the
// Corefile imports (AKS's), never in a key nothing imports.
func TestClusterDNSServesWhatCoreDNSReads(t *testing.T) {
	tests := map[string]struct {
		corefile string
		custom   map[string]string
		want     string // "" when CoreDNS does not answer
	}{
		"kubeadm Corefile with the engine's entry": {corefile: withEntry("127.0.0.7"), want: "127.0.0.7"},
		"kubeadm Corefile without an entry":        {corefile: fakecloud.KubeadmCorefile},
		"AKS: the entry in an imported .override key": {
			corefile: fakecloud.AKSCorefile,
			custom:   map[string]string{coredns.DefaultHostsKey: engineBlock("::1", name), "log.override": "log\n"},
			want:     "::1",
		},
		"a coredns-custom key the Corefile does not import": {
			corefile: fakecloud.KubeadmCorefile,
			custom:   map[string]string{coredns.DefaultHostsKey: engineBlock("127.0.0.7", name)},
		},
		"AKS: a .server key for the name's zone answers beside the root block": {
			corefile: fakecloud.AKSCorefile,
			custom:   map[string]string{"corp.server": "example.test:53 {\n    hosts {\n        127.0.0.9 " + name + "\n    }\n}\n"},
			want:     "127.0.0.9",
		},
	}
	for n, tc := range tests {
		t.Run(n, func(t *testing.T) {
			d := StartClusterDNS(t, configMaps(tc.corefile, tc.custom), 0)
			got := d.Lookup(context.Background(), name)
			route, routeErr := d.Route(8446)(context.Background(), name+":443")
			if tc.want == "" {
				assert.Empty(t, got, "CoreDNS must not answer %s", name)
				assert.ErrorIs(t, routeErr, ErrNoRoute)
				return
			}
			want := netip.MustParseAddr(tc.want)
			assert.Equal(t, []netip.Addr{want}, got)
			require.NoError(t, routeErr)
			assert.Equal(t, netip.AddrPortFrom(want, 8446).String(), route)
			assert.NoError(t, d.Err())
		})
	}
}

// TestClusterDNSDelaysAChange: an edit reaches CoreDNS only Delay after the
// sync first saw it, as a kubelet sync and reload do in a pod; Forget
// serves the ConfigMaps at once.
func TestClusterDNSDelaysAChange(t *testing.T) {
	ctx := context.Background()
	cs := configMaps(fakecloud.KubeadmCorefile, nil)
	const delay = 1500 * time.Millisecond
	d := StartClusterDNS(t, cs, delay)
	got := d.Lookup(ctx, name)
	require.Empty(t, got)

	cms := cs.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data[coredns.CorefileKey] = withEntry("127.0.0.8")
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	edited := time.Now()
	var served time.Duration
	for time.Since(edited) < 10*time.Second {
		if got := d.Lookup(ctx, name); len(got) > 0 {
			served = time.Since(edited)
			assert.Equal(t, netip.MustParseAddr("127.0.0.8"), got[0])
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.NotZero(t, served, "CoreDNS never served the edit")
	assert.GreaterOrEqual(t, served, delay, "served before the sync's delay")
	t.Logf("served %s after the edit (delay %s)", served.Round(10*time.Millisecond), delay)

	// Reset, as a case does before it starts: served at once.
	cm.Data[coredns.CorefileKey] = fakecloud.KubeadmCorefile
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	d.Forget()
	got = d.Lookup(ctx, name)
	assert.Empty(t, got, "Forget serves the reset ConfigMaps at once")
	assert.NoError(t, d.Err())
}

// TestClusterDNSReportsACorefileCoreDNSRefuses: CoreDNS keeps serving the
// last configuration it loaded, and Err says why it refused the new one.
func TestClusterDNSReportsACorefileCoreDNSRefuses(t *testing.T) {
	ctx := context.Background()
	cs := configMaps(withEntry("127.0.0.7"), nil)
	d := StartClusterDNS(t, cs, 0)
	cms := cs.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data[coredns.CorefileKey] = ".:53 {\n    nosuchplugin\n}\n"
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return d.Err() != nil }, 10*time.Second, 50*time.Millisecond)
	assert.ErrorContains(t, d.Err(), "nosuchplugin")
	got := d.Lookup(ctx, name)
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("127.0.0.7")}, got, "the last configuration CoreDNS loaded still serves")
}

func TestLoopbackCorefile(t *testing.T) {
	got := loopbackCorefile(fakecloud.AKSCorefile, 5353)
	want := `.:5353 {
    bind 127.0.0.1
    errors
    cache 30
    loadbalance
    import custom/*.override
}
import custom/*.server
`
	assert.Equal(t, want, got)
	assert.Equal(t, "a.example:5353 dns://b.example:5353 {\n    bind 127.0.0.1\n    hosts {\n        10.0.0.1 x.a.example\n    }\n}\n",
		loopbackCorefile("a.example:53 dns://b.example {\n    bind 10.0.0.10\n    hosts {\n        10.0.0.1 x.a.example\n    }\n}\n", 5353))
}
