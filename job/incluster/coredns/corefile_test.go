package coredns

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/hostname"
	"github.com/rancher/registration-engine/job/kube/kubetest"
)

func TestSetCorefileHostsEntry(t *testing.T) {
	tests := map[string]struct {
		in      string
		ip      netip.Addr
		want    string
		removed []string // the engine's earlier entries the edit removes
		err     error
	}{
		"root block without hosts: block inserted with the block's indent": {
			in: ".:53 {\n\terrors\n\tforward . /etc/resolv.conf\n\treload\n}\n",
			ip: smtIP,
			want: ".:53 {\n" +
				"\thosts {\n\t    20.38.0.87 smt-azure.susecloud.net\n\t    ttl 15\n\t    no_reverse\n\t    fallthrough\n\t}\n" +
				"\terrors\n\tforward . /etc/resolv.conf\n\treload\n}\n",
		},
		"existing hosts block (k3s): entry added first, its ttl lowered, block kept": {
			in:   ".:53 {\n    errors\n    hosts /etc/coredns/NodeHosts {\n      ttl 60\n      reload 15s\n      fallthrough\n    }\n    reload\n}\n",
			ip:   smtIP,
			want: ".:53 {\n    errors\n    hosts /etc/coredns/NodeHosts {\n      20.38.0.87 smt-azure.susecloud.net\n      ttl 15\n      reload 15s\n      fallthrough\n    }\n    reload\n}\n",
		},
		// An older engine wrote its block without ttl, so CoreDNS answered
		// with 3600 s: the ttl goes in, though the entry is current.
		"block an older engine wrote, without ttl: ttl added after the entry": {
			in:   ".:53 {\n    hosts {\n        20.38.0.87 smt-azure.susecloud.net\n        fallthrough\n    }\n    reload\n}\n",
			ip:   smtIP,
			want: ".:53 {\n    hosts {\n        20.38.0.87 smt-azure.susecloud.net\n        ttl 15\n        fallthrough\n    }\n    reload\n}\n",
		},
		"ttl shorter than the engine's: kept": {
			in:   ".:53 {\n    hosts {\n        fallthrough\n        ttl 5 # mine\n    }\n}\n",
			ip:   smtIP,
			want: ".:53 {\n    hosts {\n        20.38.0.87 smt-azure.susecloud.net\n        fallthrough\n        ttl 5 # mine\n    }\n}\n",
		},
		"ttl of the plugin's default or not a number: replaced": {
			in:   ".:53 {\n    hosts {\n        ttl 3600\n        ttl 0\n        ttl\n        fallthrough\n    }\n}\n",
			ip:   smtIP,
			want: ".:53 {\n    hosts {\n        20.38.0.87 smt-azure.susecloud.net\n        ttl 15\n        ttl 15\n        ttl 15\n        fallthrough\n    }\n}\n",
		},
		"older entry for the name: address replaced in place": {
			in:   ".:53 {\n    hosts {\n        10.0.0.9 other.example.com\n        20.38.0.1 smt-azure.susecloud.net\n        fallthrough\n    }\n}\n",
			ip:   smtIP,
			want: ".:53 {\n    hosts {\n        10.0.0.9 other.example.com\n        20.38.0.87 smt-azure.susecloud.net\n        ttl 15\n        fallthrough\n    }\n}\n",
		},
		"entry already current: unchanged byte for byte": {
			in:   ".:53 {\n    hosts {\n        20.38.0.87\tSMT-Azure.susecloud.net.  # ours\n        ttl 15\n        fallthrough\n    }\n}\n",
			ip:   smtIP,
			want: ".:53 {\n    hosts {\n        20.38.0.87\tSMT-Azure.susecloud.net.  # ours\n        ttl 15\n        fallthrough\n    }\n}\n",
		},
		"duplicates dropped, shared line split": {
			in:   ".:53 {\n    hosts {\n        20.38.0.1 a.example.com smt-azure.susecloud.net\n        20.38.0.2 smt-azure.susecloud.net\n        20.38.0.3 smt-azure.susecloud.net\n        fallthrough\n    }\n}\n",
			ip:   smtIP,
			want: ".:53 {\n    hosts {\n        20.38.0.1 a.example.com\n        20.38.0.87 smt-azure.susecloud.net\n        ttl 15\n        fallthrough\n    }\n}\n",
		},
		"IPv6 address": {
			in:   ".:53 {\n    hosts {\n        fallthrough\n    }\n}\n",
			ip:   smtIPNew,
			want: ".:53 {\n    hosts {\n        2603:1030:501::dd smt-azure.susecloud.net\n        ttl 15\n        fallthrough\n    }\n}\n",
		},
		"IPv4-mapped address written as IPv4": {
			in:   ".:53 {\n    hosts {\n        fallthrough\n    }\n}\n",
			ip:   netip.MustParseAddr("::ffff:20.38.0.87"),
			want: ".:53 {\n    hosts {\n        20.38.0.87 smt-azure.susecloud.net\n        ttl 15\n        fallthrough\n    }\n}\n",
		},
		"only the root block is edited, not a zone block before it": {
			in: "example.org:53 {\n    hosts {\n        10.0.0.1 www.example.org\n    }\n}\n. {\n    forward . 8.8.8.8\n}\n",
			ip: smtIP,
			want: "example.org:53 {\n    hosts {\n        10.0.0.1 www.example.org\n    }\n}\n. {\n" +
				"    hosts {\n        20.38.0.87 smt-azure.susecloud.net\n        ttl 15\n        no_reverse\n        fallthrough\n    }\n" +
				"    forward . 8.8.8.8\n}\n",
		},
		"braces in comments are ignored": {
			in: "# {{ generated }}\n.:53 { # main {\n    errors\n}\n",
			ip: smtIP,
			want: "# {{ generated }}\n.:53 { # main {\n" +
				"    hosts {\n        20.38.0.87 smt-azure.susecloud.net\n        ttl 15\n        no_reverse\n        fallthrough\n    }\n" +
				"    errors\n}\n",
		},
		// A zoned hosts block answers only inside its zones: the name is
		// added to them, so the block answers for it as well.
		"hosts block with zones: the name joins its zones": {
			in:   ".:53 {\n    hosts /etc/hosts corp.internal {\n        10.1.0.5 db.corp.internal\n        fallthrough\n    }\n    reload\n}\n",
			ip:   smtIP,
			want: ".:53 {\n    hosts /etc/hosts corp.internal smt-azure.susecloud.net {\n        20.38.0.87 smt-azure.susecloud.net\n        ttl 15\n        10.1.0.5 db.corp.internal\n        fallthrough\n    }\n    reload\n}\n",
		},
		"hosts block with a zone that covers the name: zones kept": {
			in:   ".:53 {\n    hosts /etc/hosts SUSEcloud.net. {\n        fallthrough\n    }\n}\n",
			ip:   smtIP,
			want: ".:53 {\n    hosts /etc/hosts SUSEcloud.net. {\n        20.38.0.87 smt-azure.susecloud.net\n        ttl 15\n        fallthrough\n    }\n}\n",
		},
		"hosts block with a file and no zones: kept": {
			in:   ".:53 {\n    hosts /etc/hosts {\n        fallthrough\n    }\n}\n",
			ip:   smtIP,
			want: ".:53 {\n    hosts /etc/hosts {\n        20.38.0.87 smt-azure.susecloud.net\n        ttl 15\n        fallthrough\n    }\n}\n",
		},
		"a server block for a zone above the name: refused": {
			in:  "susecloud.net:53 {\n    forward . 10.0.0.53\n}\n.:53 {\n    reload\n}\n",
			ip:  smtIP,
			err: ErrCorefile,
		},
		"a server block for the zone on another port: root block used": {
			in:   "susecloud.net:5353 {\n    forward . 10.0.0.53\n}\n.:53 {\n    reload\n}\n",
			ip:   smtIP,
			want: "susecloud.net:5353 {\n    forward . 10.0.0.53\n}\n.:53 {\n    hosts {\n        20.38.0.87 smt-azure.susecloud.net\n        ttl 15\n        no_reverse\n        fallthrough\n    }\n    reload\n}\n",
		},
		// Phase 4 chose another update server: the entry an earlier run
		// wrote for the one no longer chosen goes, so that name is not
		// pinned to an address Azure may have given to someone else.
		"an earlier update server's entry (the engine's block): replaced by the new one": {
			in:      ".:53 {\n    hosts {\n        20.38.0.1 smt-azure-old.susecloud.net\n        ttl 15\n        fallthrough\n    }\n    reload\n}\n",
			ip:      smtIP,
			want:    ".:53 {\n    hosts {\n        20.38.0.87 smt-azure.susecloud.net\n        ttl 15\n        fallthrough\n    }\n    reload\n}\n",
			removed: []string{"20.38.0.1 smt-azure-old.susecloud.net"},
		},
		"earlier entries among the cluster's own: only the engine's go, the current one readdressed": {
			in: ".:53 {\n    hosts /etc/coredns/NodeHosts {\n" +
				"      10.0.0.9 other.example.com\n" +
				"      20.38.0.1 smt-a.susecloud.net\n" +
				"      10.0.0.10 db.corp.internal\n" +
				"      2603:1030::1 smt-b.susecloud.net\n" +
				"      20.38.0.2 smt-azure.susecloud.net\n" +
				"      ttl 15\n      fallthrough\n    }\n    reload\n}\n",
			ip: smtIP,
			want: ".:53 {\n    hosts /etc/coredns/NodeHosts {\n" +
				"      10.0.0.9 other.example.com\n" +
				"      10.0.0.10 db.corp.internal\n" +
				"      20.38.0.87 smt-azure.susecloud.net\n" +
				"      ttl 15\n      fallthrough\n    }\n    reload\n}\n",
			removed: []string{"20.38.0.1 smt-a.susecloud.net", "2603:1030::1 smt-b.susecloud.net"},
		},
		// The engine writes "<ip> <name>" alone; a line in any other shape
		// is a person's, and so is a name outside UPDATE_SERVER_DOMAINS.
		"entries under the domain in a shape the engine never writes: kept byte for byte": {
			in: ".:53 {\n    hosts {\n" +
				"        20.38.0.1 smt-b.susecloud.net # pinned by hand\n" +
				"        20.38.0.1\tsmt-c.susecloud.net\n" +
				"        20.38.0.1  smt-d.susecloud.net\n" +
				"        20.38.0.1 smt-e.susecloud.net smt-f.susecloud.net\n" +
				"        20.38.0.1 SMT-G.susecloud.net\n" +
				"        20.38.0.1 smt-h.susecloud.net.\n" +
				"        ::ffff:20.38.0.1 smt-i.susecloud.net\n" +
				"        169.254.0.5 smt-j.susecloud.net\n" +
				"        20.38.0.1 smt.notsusecloud.net\n" +
				"        20.38.0.1 smt.example.com\n" +
				"        ttl 15\n        fallthrough\n    }\n}\n",
			ip: smtIP,
			want: ".:53 {\n    hosts {\n" +
				"        20.38.0.87 smt-azure.susecloud.net\n" +
				"        20.38.0.1 smt-b.susecloud.net # pinned by hand\n" +
				"        20.38.0.1\tsmt-c.susecloud.net\n" +
				"        20.38.0.1  smt-d.susecloud.net\n" +
				"        20.38.0.1 smt-e.susecloud.net smt-f.susecloud.net\n" +
				"        20.38.0.1 SMT-G.susecloud.net\n" +
				"        20.38.0.1 smt-h.susecloud.net.\n" +
				"        ::ffff:20.38.0.1 smt-i.susecloud.net\n" +
				"        169.254.0.5 smt-j.susecloud.net\n" +
				"        20.38.0.1 smt.notsusecloud.net\n" +
				"        20.38.0.1 smt.example.com\n" +
				"        ttl 15\n        fallthrough\n    }\n}\n",
		},
		"an earlier entry in another server block: kept": {
			in: "example.org:53 {\n    hosts {\n        20.38.0.1 smt-old.susecloud.net\n    }\n}\n.:53 {\n    hosts {\n        20.38.0.1 smt-old.susecloud.net\n        fallthrough\n    }\n}\n",
			ip: smtIP,
			want: "example.org:53 {\n    hosts {\n        20.38.0.1 smt-old.susecloud.net\n    }\n}\n.:53 {\n" +
				"    hosts {\n        20.38.0.87 smt-azure.susecloud.net\n        ttl 15\n        fallthrough\n    }\n}\n",
			removed: []string{"20.38.0.1 smt-old.susecloud.net"},
		},
		// An earlier run added its name to a zoned block's zones: the name
		// leaves them with its entry, the new name joins them.
		"hosts block with zones: the earlier name leaves them, the new one joins": {
			in:      ".:53 {\n    hosts /etc/hosts corp.internal smt-old.susecloud.net {\n        20.38.0.1 smt-old.susecloud.net\n        ttl 15\n        10.1.0.5 db.corp.internal\n        fallthrough\n    }\n    reload\n}\n",
			ip:      smtIP,
			want:    ".:53 {\n    hosts /etc/hosts corp.internal smt-azure.susecloud.net {\n        20.38.0.87 smt-azure.susecloud.net\n        ttl 15\n        10.1.0.5 db.corp.internal\n        fallthrough\n    }\n    reload\n}\n",
			removed: []string{"20.38.0.1 smt-old.susecloud.net"},
		},
		"hosts block with the cluster's zone above the names: the entry goes, the zone stays": {
			in:      ".:53 {\n    hosts /etc/hosts susecloud.net {\n        20.38.0.1 smt-old.susecloud.net\n        fallthrough\n    }\n}\n",
			ip:      smtIP,
			want:    ".:53 {\n    hosts /etc/hosts susecloud.net {\n        20.38.0.87 smt-azure.susecloud.net\n        ttl 15\n        fallthrough\n    }\n}\n",
			removed: []string{"20.38.0.1 smt-old.susecloud.net"},
		},
		// The admission policy counts entries as the engine's only in a
		// block opened by a bare "hosts … {": removing one elsewhere would
		// be refused there (HTTP 422), failing every run.
		"an earlier entry in a hosts block whose opening line has a comment: kept": {
			in:   ".:53 {\n    hosts { # the cluster's\n        20.38.0.1 smt-old.susecloud.net\n        fallthrough\n    }\n}\n",
			ip:   smtIP,
			want: ".:53 {\n    hosts { # the cluster's\n        20.38.0.87 smt-azure.susecloud.net\n        ttl 15\n        20.38.0.1 smt-old.susecloud.net\n        fallthrough\n    }\n}\n",
		},
		// The hosts plugin answers the reverse (PTR) query for each entry's
		// address ahead of the kubernetes plugin: in a block without
		// no_reverse an entry for a cluster address would rename it.
		"a private address into a hosts block that answers reverse queries: refused": {
			in:  ".:53 {\n    hosts /etc/coredns/NodeHosts {\n      fallthrough\n    }\n    reload\n}\n",
			ip:  netip.MustParseAddr("10.96.0.1"),
			err: ErrCorefile,
		},
		"a shared-range address into a hosts block that answers reverse queries: refused": {
			in:  ".:53 {\n    hosts {\n      fallthrough\n    }\n}\n",
			ip:  netip.MustParseAddr("100.64.0.10"),
			err: ErrCorefile,
		},
		"a unique local address into a hosts block that answers reverse queries: refused": {
			in:  ".:53 {\n    hosts {\n      fallthrough\n    }\n}\n",
			ip:  netip.MustParseAddr("fd00::1"),
			err: ErrCorefile,
		},
		"a private address into a hosts block with no_reverse: placed": {
			in:   ".:53 {\n    hosts {\n        no_reverse\n        fallthrough\n    }\n}\n",
			ip:   netip.MustParseAddr("10.96.0.1"),
			want: ".:53 {\n    hosts {\n        10.96.0.1 smt-azure.susecloud.net\n        ttl 15\n        no_reverse\n        fallthrough\n    }\n}\n",
		},
		"a private address into a Corefile without hosts: the engine's block, with no_reverse": {
			in:   ".:53 {\n    reload\n}\n",
			ip:   netip.MustParseAddr("10.96.0.1"),
			want: ".:53 {\n    hosts {\n        10.96.0.1 smt-azure.susecloud.net\n        ttl 15\n        no_reverse\n        fallthrough\n    }\n    reload\n}\n",
		},
		// The policy counts such a line as the cluster's: removing it would
		// be refused.
		"an earlier entry at a private address in a block that answers reverse queries: kept": {
			in:   ".:53 {\n    hosts {\n        10.0.0.1 smt-old.susecloud.net\n        fallthrough\n    }\n}\n",
			ip:   smtIP,
			want: ".:53 {\n    hosts {\n        20.38.0.87 smt-azure.susecloud.net\n        ttl 15\n        10.0.0.1 smt-old.susecloud.net\n        fallthrough\n    }\n}\n",
		},
		"empty Corefile":            {in: "  \n", ip: smtIP, err: ErrCorefile},
		"no root server block":      {in: "example.org {\n    whoami\n}\n", ip: smtIP, err: ErrCorefile},
		"root block never closed":   {in: ".:53 {\n    errors\n", ip: smtIP, err: ErrCorefile},
		"hosts without a block":     {in: ".:53 {\n    hosts /etc/hosts\n}\n", ip: smtIP, err: ErrCorefile},
		"hosts block on one line":   {in: ".:53 {\n    hosts { 10.0.0.1 a.example.com }\n}\n", ip: smtIP, err: ErrCorefile},
		"hosts block never closed":  {in: ".:53 {\n    hosts {\n        fallthrough\n", ip: smtIP, err: ErrCorefile},
		"unspecified address":       {in: kindCorefile, ip: netip.IPv4Unspecified(), err: ErrInvalidHostsEntry},
		"address with a zone":       {in: kindCorefile, ip: netip.MustParseAddr("fe80::1%eth0"), err: ErrInvalidHostsEntry},
		"zero address (none found)": {in: kindCorefile, err: ErrInvalidHostsEntry},
	}
	// What each refusal says, the entry a person places by hand and the
	// setting that leaves the Corefile alone among them: the golden file.
	msgs := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, removed, err := SetCorefileHostsEntry(tc.in, smtName, tc.ip, testDomains, nil)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				// A person must place the entry when the Corefile is
				// refused: the error says which.
				msgs.Add(name, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)

			assert.Equal(t, tc.removed, removed, "the engine's earlier entries it removed")

			again, removedAgain, err := SetCorefileHostsEntry(got, smtName, tc.ip, testDomains, nil)
			require.NoError(t, err)
			assert.Equal(t, got, again, "idempotent")
			assert.Empty(t, removedAgain)
		})
	}
}

// A public range in CLUSTER_ADDRESS_RANGES (the chart's
// clusterAddressRanges, which the admission policy reads too) is the
// cluster's own, like the private ones: in a hosts block that answers
// reverse queries (k3s's NodeHosts), an entry for an address in it is
// refused with a message naming that range and the setting, so the user
// learns it from the engine, not from an HTTP 422 at admission; with
// no_reverse it is placed. The engine's default (nil) knows no public range.
func TestSetCorefileHostsEntryClusterAddressRanges(t *testing.T) {
	public := netip.MustParseAddr("203.0.113.7")
	ranges := append(slices.Clone(DefaultClusterRanges), netip.MustParsePrefix("203.0.113.0/24"))
	nodeHosts := ".:53 {\n    hosts /etc/coredns/NodeHosts {\n        ttl 60\n        fallthrough\n    }\n    reload\n}\n"
	tests := map[string]struct {
		in     string
		ip     netip.Addr
		ranges []netip.Prefix
		want   string // "" with refused
	}{
		"a public range configured: refused in a block that answers reverse queries, naming the range": {
			in: nodeHosts, ip: public, ranges: ranges,
		},
		"a public range configured: placed in a block with no_reverse": {
			in:     ".:53 {\n    hosts {\n        no_reverse\n        fallthrough\n    }\n}\n",
			ip:     public,
			ranges: ranges,
			want:   ".:53 {\n    hosts {\n        203.0.113.7 smt-azure.susecloud.net\n        ttl 15\n        no_reverse\n        fallthrough\n    }\n}\n",
		},
		"a public range configured: placed in the engine's own block, with no_reverse": {
			in:     ".:53 {\n    reload\n}\n",
			ip:     public,
			ranges: ranges,
			want:   ".:53 {\n    hosts {\n        203.0.113.7 smt-azure.susecloud.net\n        ttl 15\n        no_reverse\n        fallthrough\n    }\n    reload\n}\n",
		},
		"a public range configured: a private address still refused as one": {
			in: nodeHosts, ip: netip.MustParseAddr("10.96.0.1"), ranges: ranges,
		},
		"a range the engine does not know by default: placed": {
			in:   nodeHosts,
			ip:   public,
			want: ".:53 {\n    hosts /etc/coredns/NodeHosts {\n        203.0.113.7 smt-azure.susecloud.net\n        ttl 15\n        fallthrough\n    }\n    reload\n}\n",
		},
		"the private ranges left out: a private address placed": {
			in:     nodeHosts,
			ip:     netip.MustParseAddr("10.96.0.1"),
			ranges: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")},
			want:   ".:53 {\n    hosts /etc/coredns/NodeHosts {\n        10.96.0.1 smt-azure.susecloud.net\n        ttl 15\n        fallthrough\n    }\n    reload\n}\n",
		},
	}
	msgs := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, _, err := SetCorefileHostsEntry(tc.in, smtName, tc.ip, testDomains, tc.ranges)
			if tc.want == "" {
				require.ErrorIs(t, err, ErrCorefile)
				assert.True(t, failure.IsPermanent(err), "the next run would be refused the same")
				msgs.Add(name, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// The Editor checks the ranges it is given (CLUSTER_ADDRESS_RANGES), not
// only its defaults: refused before anything is written.
func TestEditorClusterAddressRanges(t *testing.T) {
	corefile := ".:53 {\n    hosts /etc/coredns/NodeHosts {\n        fallthrough\n    }\n    reload\n}\n"
	c := fake.NewClientset(cm(ConfigMap, map[string]string{CorefileKey: corefile}))
	e := newCoreDNS(c)
	e.ClusterRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}

	_, err := e.Ensure(context.Background(), smtName, netip.MustParseAddr("203.0.113.7"))

	require.ErrorIs(t, err, ErrCorefile)
	assert.True(t, failure.IsPermanent(err))
	assert.Equal(t, []string{"get", "get"}, kubetest.Verbs(c, "configmaps"), "nothing written")
	assert.Equal(t, corefile, getCM(t, c, ConfigMap).Data[CorefileKey])
}

// An entry of the engine's shape at an address in a configured public
// range, in a block that answers reverse queries, is not the engine's: the
// admission policy, reading the same ranges, would refuse its removal.
func TestRemoveCorefileHostsEntriesClusterAddressRanges(t *testing.T) {
	corefile := ".:53 {\n    hosts /etc/coredns/NodeHosts {\n        203.0.113.7 smt-old.susecloud.net\n        fallthrough\n    }\n    reload\n}\n"
	ranges := append(slices.Clone(DefaultClusterRanges), netip.MustParsePrefix("203.0.113.0/24"))

	kept, none := RemoveCorefileHostsEntries(corefile, testDomains, ranges)
	assert.Equal(t, corefile, kept)
	assert.Empty(t, none)

	_, removed := RemoveCorefileHostsEntries(corefile, testDomains, nil)
	assert.Equal(t, []string{"203.0.113.7 smt-old.susecloud.net"}, removed, "outside the default ranges, it is the engine's")
}

func TestValidHostsEntryNames(t *testing.T) {
	tests := map[string]struct {
		name string
		ok   bool
	}{
		"update server":     {name: "smt-azure.susecloud.net", ok: true},
		"upper case, dot":   {name: "SMT-EC2.SUSECLOUD.NET.", ok: true},
		"digits":            {name: "rmt-1.westeurope.example.com", ok: true},
		"single label":      {name: "localhost"},
		"empty":             {name: ""},
		"space":             {name: "smt azure.susecloud.net"},
		"brace":             {name: "smt{.susecloud.net"},
		"hash":              {name: "smt#.susecloud.net"},
		"leading hyphen":    {name: "-smt.susecloud.net"},
		"empty label":       {name: "smt..susecloud.net"},
		"underscore":        {name: "smt_azure.susecloud.net"},
		"label too long":    {name: strings.Repeat("a", 64) + ".example.com"},
		"name too long":     {name: strings.Repeat("a.", 127) + "com"},
		"IP literal":        {name: "20.38.0.87", ok: true}, // digits-only labels are legal host names
		"newline injection": {name: "smt.example.com\n}\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, _, err := validHostsEntry(tc.name, smtIP)
			_, phase4 := hostname.Normalize(tc.name)
			if tc.ok {
				assert.NoError(t, err)
				assert.NoError(t, phase4, "phase 4 accepts what phase 6 writes")
				return
			}
			assert.ErrorIs(t, err, ErrInvalidHostsEntry)
			// One rule for both phases: the refusal is phase 4's (with the
			// rule the name broke), so phase 4 refused the name already.
			assert.ErrorIs(t, err, hostname.ErrInvalid)
			assert.ErrorIs(t, phase4, hostname.ErrInvalid)
		})
	}
}

// Whatever Corefile a cluster has, the edit never panics, and a successful
// edit is a fixed point: the next run changes nothing.
func FuzzSetCorefileHostsEntry(f *testing.F) {
	f.Add(kindCorefile)
	f.Add(".:53 {\n    hosts /etc/coredns/NodeHosts {\n      ttl 60\n      fallthrough\n    }\n}\n")
	f.Add(".:53 {\n    hosts {\n        20.38.0.1 a.example.com smt-azure.susecloud.net\n    }\n}\n")
	f.Add("}}}{{{ .:53 {")
	f.Add(".:53 {\n    hosts {\n        ttl 3600\n        ttl {\n        }\n        ttl 9\n    }\n}\n")
	f.Add(".:53 {\n    hosts /etc/hosts corp.internal smt-old.susecloud.net {\n        20.38.0.1 smt-old.susecloud.net\n        fallthrough\n    }\n}\n")
	f.Fuzz(func(t *testing.T, corefile string) {
		out, _, err := SetCorefileHostsEntry(corefile, smtName, smtIP, testDomains, nil)
		if err != nil {
			return
		}
		again, _, err := SetCorefileHostsEntry(out, smtName, smtIP, testDomains, nil)
		if err != nil {
			t.Fatalf("edited Corefile no longer accepted: %v\n%s", err, out)
		}
		if again != out {
			t.Fatalf("not idempotent:\n%s\n---\n%s", out, again)
		}
	})
}
