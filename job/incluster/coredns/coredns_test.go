package coredns

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
)

const (
	smtName = "smt-azure.susecloud.net"
	// kindCorefile is the Corefile kind and kubeadm ship.
	kindCorefile = fakecloud.KubeadmCorefile
	// aksCorefile is the Corefile of AKS's coredns ConfigMap.
	aksCorefile = fakecloud.AKSCorefile
)

var (
	// testDomains is UPDATE_SERVER_DOMAINS's default.
	testDomains = []string{"susecloud.net"}

	smtIP    = netip.MustParseAddr("20.38.0.87")
	smtIPNew = netip.MustParseAddr("2603:1030:501::dd")
)

// noReloadCorefile is a root server block without the reload plugin.
const noReloadCorefile = "" +
	".:53 {\n" +
	"    errors\n" +
	"    forward . /etc/resolv.conf\n" +
	"}\n"

func cm(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", ResourceVersion: "42"}, Data: data}
}

func newCoreDNS(c *fake.Clientset) *Editor {
	return &Editor{ConfigMaps: kubetest.Typed(c), Namespace: "kube-system"}
}

func getCM(t *testing.T, c *fake.Clientset, name string) *corev1.ConfigMap {
	t.Helper()
	got, err := c.CoreV1().ConfigMaps("kube-system").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return got
}

// On AKS the entry goes under our key in coredns-custom, and only there;
// CoreDNS's reload plugin loads it (TestRealCoreDNS proves it), so a change
// is one ConfigMap patch and nothing else.
func TestCoreDNSCustom(t *testing.T) {
	block := hostsBlock("", smtName, smtIP) + "\n"

	tests := map[string]struct {
		custom    map[string]string
		changed   bool
		cmActions []string
	}{
		"key absent: written": {
			custom:    map[string]string{"other.server": "example.org:53 {\n  forward . 10.0.0.1\n}\n"},
			changed:   true,
			cmActions: []string{"get", "get", "patch:application/merge-patch+json"},
		},
		"key with an older address: rewritten": {
			custom:    map[string]string{DefaultHostsKey: hostsBlock("", smtName, netip.MustParseAddr("20.38.0.1")) + "\n"},
			changed:   true,
			cmActions: []string{"get", "get", "patch:application/merge-patch+json"},
		},
		// An older engine wrote the block without ttl, so CoreDNS answered
		// with the plugin's 3600 s and LocalDNS kept a moved address an hour.
		"key an older engine wrote, without ttl: rewritten": {
			custom:    map[string]string{DefaultHostsKey: "hosts {\n    20.38.0.87 smt-azure.susecloud.net\n    fallthrough\n}\n"},
			changed:   true,
			cmActions: []string{"get", "get", "patch:application/merge-patch+json"},
		},
		// An older engine wrote the block without no_reverse: its entry
		// answered the reverse query for the address too.
		"key an older engine wrote, without no_reverse: rewritten": {
			custom:    map[string]string{DefaultHostsKey: "hosts {\n    20.38.0.87 smt-azure.susecloud.net\n    ttl 15\n    fallthrough\n}\n"},
			changed:   true,
			cmActions: []string{"get", "get", "patch:application/merge-patch+json"},
		},
		"key current: nothing written": {
			custom:    map[string]string{DefaultHostsKey: block},
			changed:   false,
			cmActions: []string{"get", "get"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			core := cm(ConfigMap, map[string]string{CorefileKey: aksCorefile})
			c := fake.NewClientset(cm(CustomConfigMap, tc.custom), core)

			edit, err := newCoreDNS(c).Ensure(context.Background(), smtName, smtIP)
			changed := edit.Changed

			require.NoError(t, err)
			assert.Equal(t, tc.changed, changed)
			assert.Equal(t, "kube-system/"+CustomConfigMap, edit.Object, "the entry's ConfigMap, for the handover's messages")
			assert.Equal(t, tc.cmActions, kubetest.Verbs(c, "configmaps"))
			got := getCM(t, c, CustomConfigMap)
			assert.Equal(t, block, got.Data[DefaultHostsKey])
			assert.Equal(t, "hosts {\n    20.38.0.87 smt-azure.susecloud.net\n    ttl 15\n    no_reverse\n    fallthrough\n}\n", got.Data[DefaultHostsKey],
				"the key as AKS imports it: the entry, answered with a 15 s TTL, no reverse (PTR) answer for its address, then every other name to the next plugin")
			for k, v := range tc.custom {
				if k != DefaultHostsKey {
					assert.Equal(t, v, got.Data[k], "other keys untouched")
				}
			}
			assert.Equal(t, aksCorefile, getCM(t, c, ConfigMap).Data[CorefileKey], "the Corefile is AKS's, never ours")
		})
	}
}

// A coredns-custom the Corefile does not import is one CoreDNS never reads:
// the entry goes where this CoreDNS looks. AKS's Corefile imports
// custom/*.override, k3s's /etc/coredns/custom/*.override; a kubeadm
// Corefile beside a coredns-custom made for something else imports nothing,
// and an entry there would never be served (the handover would wait out
// HANDOVER_TIMEOUT for it).
func TestCoreDNSCustomOnlyWhereTheCorefileImportsIt(t *testing.T) {
	k3s := strings.Replace(kindCorefile, "    reload\n", "    reload\n    import /etc/coredns/custom/*.override\n", 1)
	tests := map[string]struct {
		corefile string
		want     string // the ConfigMap that gets the entry
	}{
		"AKS: the custom directory's *.override":          {corefile: aksCorefile, want: CustomConfigMap},
		"k3s: the absolute custom directory's *.override": {corefile: k3s, want: CustomConfigMap},
		"a glob naming our key":                           {corefile: strings.Replace(kindCorefile, "    reload\n", "    reload\n    import custom/registration-engine.*\n", 1), want: CustomConfigMap},
		"kubeadm: no import":                              {corefile: kindCorefile, want: ConfigMap},
		"only .server keys imported, at the top":          {corefile: kindCorefile + "import custom/*.server\n", want: ConfigMap},
		"an import in another server block, not the root": {corefile: kindCorefile + "example.org {\n    import custom/*.override\n}\n", want: ConfigMap},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var logs strings.Builder
			c := fake.NewClientset(cm(CustomConfigMap, map[string]string{"log.override": "log\n"}), cm(ConfigMap, map[string]string{CorefileKey: tc.corefile}))
			dns := newCoreDNS(c)
			dns.Log = slog.New(slog.NewJSONHandler(&logs, nil))
			edit, err := dns.Ensure(context.Background(), smtName, smtIP)
			require.NoError(t, err)
			assert.True(t, edit.Changed)
			assert.Equal(t, "kube-system/"+tc.want, edit.Object)
			custom := getCM(t, c, CustomConfigMap).Data
			corefile := getCM(t, c, ConfigMap).Data[CorefileKey]
			if tc.want == CustomConfigMap {
				assert.Contains(t, custom, DefaultHostsKey)
				assert.Equal(t, tc.corefile, corefile, "the Corefile untouched")
				return
			}
			assert.Equal(t, map[string]string{"log.override": "log\n"}, custom, "coredns-custom untouched: CoreDNS does not read it")
			assert.Contains(t, corefile, smtIP.String()+" "+smtName, "the entry is in the Corefile CoreDNS serves")
			assert.Contains(t, logs.String(), "imports none of its .override keys", "the run says why it did not use coredns-custom")
		})
	}
}

// The merge patch of coredns-custom carries the resourceVersion it read, so a
// concurrent edit conflicts instead of being lost.
func TestCoreDNSPatchCarriesResourceVersion(t *testing.T) {
	c := fake.NewClientset(cm(CustomConfigMap, nil), cm(ConfigMap, map[string]string{CorefileKey: aksCorefile}))
	var patch map[string]any
	c.PrependReactor("patch", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		require.NoError(t, json.Unmarshal(a.(k8stesting.PatchAction).GetPatch(), &patch))
		return false, nil, nil
	})

	_, err := newCoreDNS(c).Ensure(context.Background(), smtName, smtIP)

	require.NoError(t, err)
	assert.Equal(t, map[string]any{"resourceVersion": "42"}, patch["metadata"])
	assert.Equal(t, map[string]any{DefaultHostsKey: hostsBlock("", smtName, smtIP) + "\n"}, patch["data"])
}

func TestCoreDNSRefusesSecondHostsBlock(t *testing.T) {
	c := fake.NewClientset(
		cm(CustomConfigMap, map[string]string{"mine.override": "hosts {\n  10.1.1.1 db.internal\n  fallthrough\n}\n"}),
		cm(ConfigMap, map[string]string{CorefileKey: aksCorefile}))

	_, err := newCoreDNS(c).Ensure(context.Background(), smtName, smtIP)

	require.ErrorIs(t, err, ErrCorefile)
	assert.True(t, failure.IsPermanent(err))
	assert.Equal(t, []string{"get", "get"}, kubetest.Verbs(c, "configmaps"), "nothing written")
}

func TestCoreDNSCorefile(t *testing.T) {
	tests := map[string]struct {
		corefile string
		ip       netip.Addr
		changed  bool
	}{
		"kind Corefile: hosts block added, reload picks it up": {
			corefile: kindCorefile, ip: smtIP, changed: true,
		},
		"entry already in place: nothing written": {
			corefile: mustSet(t, kindCorefile, smtIP), ip: smtIP, changed: false,
		},
		"entry with an older address: replaced": {
			corefile: mustSet(t, kindCorefile, smtIP), ip: smtIPNew, changed: true,
		},
		"entry an older engine wrote, without ttl: ttl added": {
			corefile: strings.Replace(mustSet(t, kindCorefile, smtIP), "        ttl 15\n", "", 1), ip: smtIP, changed: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientset(cm(ConfigMap, map[string]string{CorefileKey: tc.corefile, "NodeHosts": "172.18.0.2 kind-control-plane"}))

			edit, err := newCoreDNS(c).Ensure(context.Background(), smtName, tc.ip)
			changed := edit.Changed

			require.NoError(t, err)
			assert.Equal(t, tc.changed, changed)
			assert.Equal(t, "kube-system/"+ConfigMap, edit.Object, "the entry's ConfigMap, for the handover's messages")
			if !tc.changed {
				assert.Equal(t, []string{"get", "get"}, kubetest.Verbs(c, "configmaps"), "coredns-custom, then coredns; no write")
			}
			got := getCM(t, c, ConfigMap)
			assert.Equal(t, mustSet(t, tc.corefile, tc.ip), got.Data[CorefileKey])
			assert.Contains(t, got.Data[CorefileKey], "        "+tc.ip.String()+" "+smtName+"\n        ttl 15\n", "answered with a 15 s TTL, not the hosts plugin's 3600 s")
			assert.Equal(t, "172.18.0.2 kind-control-plane", got.Data["NodeHosts"])
		})
	}
}

func TestCoreDNSFailures(t *testing.T) {
	tests := map[string]struct {
		objects []runtime.Object
		fqdn    string
		ip      netip.Addr
		want    error
	}{
		"no CoreDNS at all":     {fqdn: smtName, ip: smtIP, want: ErrNoCoreDNS},
		"name with a brace":     {objects: []runtime.Object{cm(ConfigMap, map[string]string{CorefileKey: kindCorefile})}, fqdn: "smt}.example.com", ip: smtIP, want: ErrInvalidHostsEntry},
		"name with a newline":   {objects: []runtime.Object{cm(ConfigMap, map[string]string{CorefileKey: kindCorefile})}, fqdn: "smt.example.com\nerrors", ip: smtIP, want: ErrInvalidHostsEntry},
		"no address":            {objects: []runtime.Object{cm(ConfigMap, map[string]string{CorefileKey: kindCorefile})}, fqdn: smtName, want: ErrInvalidHostsEntry},
		"Corefile without root": {objects: []runtime.Object{cm(ConfigMap, map[string]string{CorefileKey: "example.org {\n  whoami\n  reload\n}\n"})}, fqdn: smtName, ip: smtIP, want: ErrCorefile},
		// CoreDNS would not load the entry, and the engine does not restart
		// it: refused before anything is written.
		"Corefile without reload": {objects: []runtime.Object{cm(ConfigMap, map[string]string{CorefileKey: noReloadCorefile})}, fqdn: smtName, ip: smtIP, want: ErrNoReload},
		"AKS Corefile without reload": {
			objects: []runtime.Object{cm(CustomConfigMap, nil), cm(ConfigMap, map[string]string{CorefileKey: noReloadCorefile})},
			fqdn:    smtName, ip: smtIP, want: ErrNoReload,
		},
		"forbidden by the Role": {
			objects: []runtime.Object{cm(ConfigMap, map[string]string{CorefileKey: kindCorefile})},
			fqdn:    smtName, ip: smtIP, want: kube.ErrForbidden,
		},
	}
	// What each says, the Role's missing grant and the chart value that
	// gives it among them: the golden file.
	msgs := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientset(tc.objects...)
			if tc.want == kube.ErrForbidden {
				c.PrependReactor("patch", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, forbiddenErr("configmaps")
				})
			}

			edit, err := newCoreDNS(c).Ensure(context.Background(), tc.fqdn, tc.ip)
			changed := edit.Changed

			require.ErrorIs(t, err, tc.want)
			assert.True(t, failure.IsPermanent(err))
			// Forbidden: the chart's default is AKS's layout, so on a cluster
			// without coredns-custom the message names the Corefile's patch.
			msgs.Add(name, err)
			assert.False(t, changed)
			if tc.want != kube.ErrForbidden {
				assert.NotContains(t, kubetest.Verbs(c, "configmaps"), "patch:application/merge-patch+json", "nothing written")
			}
		})
	}
}

// The manifests' admission policy refuses an edit it does not count as the
// engine's with 422; the run says what refused it and what a person does,
// in both layouts, instead of the API server's words alone.
func TestCoreDNSPolicyRefusal(t *testing.T) {
	denied := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "coredns", nil)
	denied.ErrStatus.Message = "configmaps \"coredns\" is forbidden: ValidatingAdmissionPolicy '" + PolicyName + "' with binding '" + PolicyName + "' denied request: only the engine's own hosts entries may change"
	// The API server's words stay, followed by what a person does: the
	// entry by hand with IN_CLUSTER_DNS=false, or the policy's manifest.
	msgs := testkit.NewMessages(t)
	for name, objects := range map[string][]runtime.Object{
		"Corefile":       {cm(ConfigMap, map[string]string{CorefileKey: kindCorefile})},
		"coredns-custom": {cm(CustomConfigMap, map[string]string{}), cm(ConfigMap, map[string]string{CorefileKey: aksCorefile})},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientset(objects...)
			c.PrependReactor("patch", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, denied })
			_, err := newCoreDNS(c).Ensure(context.Background(), smtName, smtIP)
			require.ErrorIs(t, err, ErrPolicyRefused)
			assert.True(t, failure.IsPermanent(err))
			msgs.Add(name, err)
		})
	}
}

// A Corefile longer than the policy can check within the API server's CEL
// cost limit gets every engine edit refused, whatever the edit: the run
// says it is the Corefile's length (and the supported size), not that the
// edit is not the engine's own. The refusal as kube-apiserver builds it:
// 422 Invalid, the message in the status and its cause.
func TestCoreDNSPolicyCostLimit(t *testing.T) {
	// The message names the supported size and this Corefile's.
	msgs := testkit.NewMessages(t)
	for name, detail := range map[string]string{
		"one expression's limit": "expression 'object.metadata.name != 'coredns' || …' resulted in error: composited variable \"kinds\" fails to evaluate: operation cancelled: actual cost limit exceeded",
		"the policy's budget":    "validation failed due to running out of cost budget, no further validation rules will be run",
	} {
		t.Run(name, func(t *testing.T) {
			msg := "ValidatingAdmissionPolicy '" + PolicyName + "' with binding '" + PolicyName + "' denied request: " + detail
			denied := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "coredns", nil)
			denied.ErrStatus.Message = "configmaps \"coredns\" is forbidden: " + msg
			denied.ErrStatus.Details.Causes = []metav1.StatusCause{{Message: msg}}
			c := fake.NewClientset(cm(ConfigMap, map[string]string{CorefileKey: kindCorefile}))
			c.PrependReactor("patch", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, denied })
			_, err := newCoreDNS(c).Ensure(context.Background(), smtName, smtIP)
			require.ErrorIs(t, err, ErrPolicyCostLimit)
			assert.NotErrorIs(t, err, ErrPolicyRefused, "not a refusal of the edit")
			assert.True(t, failure.IsPermanent(err))
			msgs.Add(name, err)
		})
	}
}

func mustSet(t *testing.T, corefile string, ip netip.Addr) string {
	t.Helper()
	out, _, err := SetCorefileHostsEntry(corefile, smtName, ip, testDomains, nil)
	require.NoError(t, err)
	return out
}

func forbiddenErr(resource string) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "coredns", errors.New("denied"))
}

// AKS imports each coredns-custom .server key as a server block of its own,
// and the engine's .override key into the root block. A .server zone that
// covers the update server's name answers for it, so the engine's entry is
// never served: refused at once, naming the key, the zone and the fix,
// instead of writing it and waiting out HANDOVER_TIMEOUT for an answer that
// cannot come. A zone that does not cover the name is the cluster's
// business.
func TestCoreDNSCustomServerZones(t *testing.T) {
	tests := map[string]struct {
		server string // the value of the key "corp.server"
		zone   string // the zone the refusal names; "": written
	}{
		"the update servers' domain on port 53": {server: "susecloud.net:53 {\n    forward . 10.0.0.53\n}\n", zone: "susecloud.net:53"},
		"the domain without a port":             {server: "susecloud.net {\n    forward . 10.0.0.53\n}\n", zone: "susecloud.net"},
		"the update server's own name":          {server: "smt-azure.susecloud.net:53 {\n    forward . 10.0.0.53\n}\n", zone: "smt-azure.susecloud.net:53"},
		"in another case, with a trailing dot":  {server: "SUSEcloud.NET.:53 {\n    forward . 10.0.0.53\n}\n", zone: "SUSEcloud.NET.:53"},
		"with a dns:// scheme":                  {server: "dns://susecloud.net {\n    forward . 10.0.0.53\n}\n", zone: "dns://susecloud.net"},
		"one of a block's zones":                {server: "example.com susecloud.net:53 {\n    forward . 10.0.0.53\n}\n", zone: "susecloud.net:53"},
		"the second of two server blocks": {
			server: "example.com:53 {\n    forward . 10.0.0.53\n}\n# ours\nnet:53 {\n    forward . 10.0.0.54\n}\n",
			zone:   "net:53",
		},
		"another domain":                         {server: "example.com:53 {\n    forward . 10.0.0.53\n}\n"},
		"a domain that only ends like it":        {server: "notsusecloud.net:53 {\n    forward . 10.0.0.53\n}\n"},
		"a name under the update server's":       {server: "x.smt-azure.susecloud.net:53 {\n    forward . 10.0.0.53\n}\n"},
		"the domain on another port":             {server: "susecloud.net:5353 {\n    forward . 10.0.0.53\n}\n"},
		"the domain only in a nested line":       {server: "example.com {\n    rewrite name exact a.susecloud.net b.example.com\n}\n"},
		"the domain as a .override (root block)": {server: ""},
	}
	// Each refusal names the key, the zone that answers instead of the root
	// block, and the two ways out.
	msgs := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			custom := map[string]string{"log.override": "log\n"}
			if tc.server != "" {
				custom["corp.server"] = tc.server
			}
			c := fake.NewClientset(cm(CustomConfigMap, custom), cm(ConfigMap, map[string]string{CorefileKey: aksCorefile}))

			edit, err := newCoreDNS(c).Ensure(context.Background(), smtName, smtIP)

			if tc.zone == "" {
				require.NoError(t, err)
				assert.True(t, edit.Changed)
				assert.Equal(t, hostsBlock("", smtName, smtIP)+"\n", getCM(t, c, CustomConfigMap).Data[DefaultHostsKey])
				return
			}
			require.ErrorIs(t, err, ErrCorefile)
			assert.True(t, failure.IsPermanent(err), "no retry fixes it")
			msgs.Add(name, err)
			assert.Equal(t, []string{"get", "get"}, kubetest.Verbs(c, "configmaps"), "nothing written")
		})
	}
}

// Phase 4 chose another update server than an earlier run did: in the
// Corefile layout the earlier entry is removed from the engine's hosts
// block (in coredns-custom the key is replaced whole), so the name no
// longer chosen is not pinned to an address Azure may have given to
// someone else, and the run's log and Edit say what went. The cluster's
// own entries and keys stay byte for byte.
func TestCoreDNSRemovesEarlierEntries(t *testing.T) {
	old := "smt-azure-old.susecloud.net"
	oldIP := netip.MustParseAddr("20.38.0.1")
	earlier, _, err := SetCorefileHostsEntry(kindCorefile, old, oldIP, testDomains, nil)
	require.NoError(t, err)
	withOwn := strings.Replace(earlier, "        ttl 15\n", "        ttl 15\n        10.0.0.9 db.corp.internal\n", 1)

	tests := map[string]struct {
		custom   map[string]string // coredns-custom; nil: the Corefile layout
		corefile string
		domains  []string
		want     string // the Corefile or our key afterwards
		removed  []string
		log      string // the update line
	}{
		"Corefile: the earlier update server's entry goes, the cluster's stays": {
			corefile: withOwn,
			domains:  testDomains,
			want:     strings.Replace(withOwn, "20.38.0.1 "+old, "20.38.0.87 "+smtName, 1),
			removed:  []string{"20.38.0.1 " + old},
			log:      "coredns corefile updated",
		},
		"Corefile, no UPDATE_SERVER_DOMAINS given: nothing removed": {
			corefile: withOwn,
			want:     strings.Replace(withOwn, "        20.38.0.1 "+old+"\n", "        20.38.0.87 "+smtName+"\n        20.38.0.1 "+old+"\n", 1),
			log:      "coredns corefile updated",
		},
		"coredns-custom: the key replaced whole, the earlier entry reported": {
			custom:   map[string]string{DefaultHostsKey: hostsBlock("", old, oldIP) + "\n", "log.override": "log\n"},
			corefile: aksCorefile,
			domains:  testDomains,
			want:     hostsBlock("", smtName, smtIP) + "\n",
			removed:  []string{"20.38.0.1 " + old},
			log:      "coredns-custom updated",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objects := []runtime.Object{cm(ConfigMap, map[string]string{CorefileKey: tc.corefile, "NodeHosts": "172.18.0.2 kind-control-plane"})}
			if tc.custom != nil {
				objects = append(objects, cm(CustomConfigMap, tc.custom))
			}
			c := fake.NewClientset(objects...)
			var logs strings.Builder
			engine := &Editor{ConfigMaps: kubetest.Typed(c), Domains: tc.domains, Log: slog.New(slog.NewJSONHandler(&logs, nil))}

			edit, err := engine.Ensure(context.Background(), smtName, smtIP)

			require.NoError(t, err)
			assert.True(t, edit.Changed)
			assert.Equal(t, tc.removed, edit.Removed, "what the run removed")
			var line map[string]any
			require.NoError(t, json.Unmarshal([]byte(logs.String()), &line), logs.String())
			assert.Equal(t, tc.log, line["msg"])
			if tc.removed == nil {
				assert.NotContains(t, line, "removed")
			} else {
				assert.Equal(t, []any{tc.removed[0]}, line["removed"], "the log names what went")
			}
			if tc.custom == nil {
				got := getCM(t, c, ConfigMap)
				assert.Equal(t, tc.want, got.Data[CorefileKey])
				assert.Equal(t, "172.18.0.2 kind-control-plane", got.Data["NodeHosts"])
				return
			}
			got := getCM(t, c, CustomConfigMap)
			assert.Equal(t, tc.want, got.Data[DefaultHostsKey])
			assert.Equal(t, "log\n", got.Data["log.override"])
			assert.Equal(t, tc.corefile, getCM(t, c, ConfigMap).Data[CorefileKey])
		})
	}
}
