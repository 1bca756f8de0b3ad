package coredns

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// What Ensure wrote, Remove takes out, and nothing else: the customer's
// keys, lines and the rest of the Corefile stay byte for byte.
func TestCoreDNSRemoveUndoesEnsure(t *testing.T) {
	ctx := context.Background()
	tests := map[string]struct {
		custom   map[string]string // nil: no coredns-custom (the corefile layout)
		corefile string
	}{
		"aks: the engine's key in coredns-custom": {
			custom:   map[string]string{"log.override": "log\n", "corp.server": "corp.internal:53 {\n    forward . 10.0.0.10\n}\n"},
			corefile: aksCorefile,
		},
		"corefile layout: a hosts block the engine added": {corefile: kindCorefile},
		"corefile layout: the cluster's own hosts block keeps its entry": {
			corefile: ".:53 {\n    errors\n    hosts {\n        10.1.2.3 db.corp.internal\n        fallthrough\n    }\n    reload\n    forward . /etc/resolv.conf\n}\n",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs := []runtime.Object{cm(ConfigMap, map[string]string{CorefileKey: tc.corefile, "NodeHosts": "172.18.0.2 node"})}
			if tc.custom != nil {
				custom := map[string]string{}
				for k, v := range tc.custom {
					custom[k] = v
				}
				objs = append(objs, cm(CustomConfigMap, custom))
			}
			c := fake.NewClientset(objs...)
			d := newCoreDNS(c)
			d.Domains = testDomains
			_, err := d.Ensure(ctx, smtName, smtIP)
			require.NoError(t, err)
			written := getCM(t, c, ConfigMap).Data[CorefileKey]
			if tc.custom != nil {
				require.Contains(t, getCM(t, c, CustomConfigMap).Data, DefaultHostsKey, "precondition: Ensure wrote the key")
			} else {
				require.NotEqual(t, tc.corefile, written, "precondition: Ensure wrote the Corefile")
			}

			rem, err := d.Remove(ctx)
			require.NoError(t, err)
			if tc.custom != nil {
				assert.Equal(t, DefaultHostsKey, rem.CustomKey)
				assert.Equal(t, tc.custom, getCM(t, c, CustomConfigMap).Data, "only the engine's key went")
				assert.Equal(t, tc.corefile, getCM(t, c, ConfigMap).Data[CorefileKey], "the Corefile untouched")
				return
			}
			assert.Equal(t, []string{smtIP.String() + " " + smtName}, rem.Corefile)
			after := getCM(t, c, ConfigMap).Data
			assert.NotContains(t, after[CorefileKey], smtName, "no line names the update server")
			assert.Equal(t, "172.18.0.2 node", after["NodeHosts"])
			assert.Empty(t, HostsAddresses(after[CorefileKey], smtName), "CoreDNS no longer answers the name from the Corefile")

			again, err := d.Remove(ctx)
			require.NoError(t, err)
			assert.Zero(t, again, "a second cleanup finds nothing")
		})
	}
}

// Lines a person wrote stay, even for a name under the update-server
// domains: only the engine's exact shape goes.
func TestRemoveCorefileHostsEntriesKeepsOthers(t *testing.T) {
	corefile := ".:53 {\n    hosts {\n        20.38.0.87 smt-azure.susecloud.net\n        20.38.0.88 other.susecloud.net # pinned by hand\n        10.1.2.3 db.corp.internal\n        ttl 15\n        fallthrough\n    }\n    reload\n}\n"
	next, removed := RemoveCorefileHostsEntries(corefile, testDomains, nil)
	assert.Equal(t, []string{"20.38.0.87 smt-azure.susecloud.net"}, removed)
	assert.Equal(t, ".:53 {\n    hosts {\n        20.38.0.88 other.susecloud.net # pinned by hand\n        10.1.2.3 db.corp.internal\n        ttl 15\n        fallthrough\n    }\n    reload\n}\n", next)

	same, none := RemoveCorefileHostsEntries(corefile, nil, nil)
	assert.Equal(t, corefile, same, "no domains: nothing is the engine's")
	assert.Empty(t, none)
}
