package coredns

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/kube/kubetest"
)

// pythonBlock is the value SUSE's Python engine writes under
// registration.override in coredns-custom: process_custom_corefile on an
// empty key, i.e. _hosts_block(ip, fqdn) + "\n", with INDENT four spaces
// (SUSE-Enceladus/cloud-registration-engine, src/registration_engine/
// coredns.py at commit 4ee2871ddedbeea6f1a2a636ccffabb1d02672af).
const pythonBlock = "hosts {\n    20.38.0.80 smt-azure.susecloud.net\n    fallthrough\n}\n"

func TestPythonEngineEntries(t *testing.T) {
	tests := map[string]struct {
		value   string
		domains []string
		want    []string // nil: not the Python engine's block
	}{
		"as it writes it": {value: pythonBlock, domains: testDomains, want: []string{"20.38.0.80 smt-azure.susecloud.net"}},
		"after a move (_set_host_record added a line)": {value: "hosts {\n    20.38.0.81 smt-azure-2.susecloud.net\n    20.38.0.80 smt-azure.susecloud.net\n    fallthrough\n}\n", domains: testDomains,
			want: []string{"20.38.0.81 smt-azure-2.susecloud.net", "20.38.0.80 smt-azure.susecloud.net"}},
		"a name outside the domains":   {value: "hosts {\n    10.0.0.5 db.corp.internal\n    fallthrough\n}\n", domains: testDomains},
		"one foreign entry among ours": {value: "hosts {\n    20.38.0.80 smt-azure.susecloud.net\n    10.0.0.5 db.corp.internal\n    fallthrough\n}\n", domains: testDomains},
		"a ttl it never writes":        {value: "hosts {\n    20.38.0.80 smt-azure.susecloud.net\n    ttl 60\n    fallthrough\n}\n", domains: testDomains},
		"another directive beside it":  {value: pythonBlock + "log\n", domains: testDomains},
		"no fallthrough":               {value: "hosts {\n    20.38.0.80 smt-azure.susecloud.net\n}\n", domains: testDomains},
		"IMDS's address":               {value: "hosts {\n    169.254.169.254 smt-azure.susecloud.net\n    fallthrough\n}\n", domains: testDomains},
		"a hosts file":                 {value: "hosts /etc/hosts {\n    20.38.0.80 smt-azure.susecloud.net\n    fallthrough\n}\n", domains: testDomains},
		"no domains configured":        {value: pythonBlock},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := pythonEngineEntries(tc.value, tc.domains)
			assert.Equal(t, tc.want != nil, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

// The Python engine's key is taken over in one patch: ours written, its
// removed. The same block under another key name is somebody else's and
// keeps the refusal.
func TestCoreDNSTakesOverPythonEngineKey(t *testing.T) {
	t.Run("its key", func(t *testing.T) {
		c := fake.NewClientset(
			cm(CustomConfigMap, map[string]string{PythonEngineKey: pythonBlock, "log.override": "log\n"}),
			cm(ConfigMap, map[string]string{CorefileKey: aksCorefile}))
		d := newCoreDNS(c)
		d.Domains = testDomains
		edit, err := d.Ensure(context.Background(), smtName, smtIP)
		require.NoError(t, err)
		assert.True(t, edit.Changed)
		assert.Equal(t, []string{"get", "get", "patch:" + "application/merge-patch+json"}, kubetest.Verbs(c, "configmaps"), "one edit")
		got := getCM(t, c, CustomConfigMap).Data
		assert.NotContains(t, got, PythonEngineKey)
		assert.Equal(t, hostsBlock("", smtName, smtIP)+"\n", got[DefaultHostsKey])
		assert.Equal(t, "log\n", got["log.override"], "other keys stay")

		again, err := d.Ensure(context.Background(), smtName, smtIP)
		require.NoError(t, err)
		assert.False(t, again.Changed, "the next run finds it done")
	})
	t.Run("the same block under another key", func(t *testing.T) {
		c := fake.NewClientset(
			cm(CustomConfigMap, map[string]string{"mine.override": pythonBlock}),
			cm(ConfigMap, map[string]string{CorefileKey: aksCorefile}))
		d := newCoreDNS(c)
		d.Domains = testDomains
		_, err := d.Ensure(context.Background(), smtName, smtIP)
		require.ErrorIs(t, err, ErrCorefile)
		assert.True(t, failure.IsPermanent(err))
	})
	t.Run("its key with a foreign entry", func(t *testing.T) {
		c := fake.NewClientset(
			cm(CustomConfigMap, map[string]string{PythonEngineKey: "hosts {\n    10.0.0.5 db.corp.internal\n    20.38.0.80 smt-azure.susecloud.net\n    fallthrough\n}\n"}),
			cm(ConfigMap, map[string]string{CorefileKey: aksCorefile}))
		d := newCoreDNS(c)
		d.Domains = testDomains
		_, err := d.Ensure(context.Background(), smtName, smtIP)
		require.ErrorIs(t, err, ErrCorefile, "a person added to it: not the Python engine's any more")
	})
}
