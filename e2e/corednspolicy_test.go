package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
)

// corednsPolicy is the ValidatingAdmissionPolicy of manifests/base.
const corednsPolicy = "registration-engine-coredns"

// mergeData is a merge patch of one ConfigMap data key.
func mergeData(key, value string) string {
	b, _ := json.Marshal(map[string]any{"data": map[string]string{key: value}})
	return string(b)
}

// TestCoreDNSAdmissionPolicy proves on the real API server, as the engine's
// ServiceAccount (a TokenRequest token) with manifests/overlays/e2e applied
// (both CoreDNS layouts granted, the ValidatingAdmissionPolicy of
// manifests/base in force), that the policy admits the engine's own edits,
// made by job/incluster/coredns itself: the first write, a new address and a
// no-op, in the Corefile layout and in AKS's coredns-custom, the hosts
// block's ttl line included, and a new update server's entry replacing the
// earlier one's; and that the same token's other writes, which
// RBAC alone lets through, are refused: a `forward .` rewrite of the
// Corefile, a foreign coredns-custom key, a `rewrite` override, an entry
// for a name outside UPDATE_SERVER_DOMAINS, an IMDS address, a hosts block
// without fallthrough, a label.
func TestCoreDNSAdmissionPolicy(t *testing.T) {
	e := setupCluster(t)
	ctx := harness.Context(t)
	e.ResetCoreDNS(ctx, t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		e.ResetCoreDNS(ctx, t)
	})
	cms := e.Admin.CoreV1().ConfigMaps("kube-system")

	// The admission plugin is on (the API server's default since 1.30; the
	// plane sets no --enable-admission-plugins): the API serves the
	// resource. The refusals below prove it enforces the policy.
	resources, err := e.Admin.Discovery().ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	require.NoError(t, err)
	served := false
	for _, r := range resources.APIResources {
		served = served || r.Name == "validatingadmissionpolicies"
	}
	require.True(t, served, "the API server serves admissionregistration.k8s.io/v1 validatingadmissionpolicies")

	as := e.Plane.ClientAs(t, e.Token(t))
	clients, err := kube.NewClients(as)
	require.NoError(t, err)
	engine := &coredns.Editor{ConfigMaps: clients.ConfigMaps}
	cmPath := func(name string) string { return configMapPath("kube-system", name) }
	patch := func(t *testing.T, name, body string, dryRun bool) (int, string) {
		path := cmPath(name)
		if dryRun {
			path += "?dryRun=All"
		}
		return request(t, as, http.MethodPatch, path, mergeType, body)
	}
	// A policy is enforced once the API server's informer has it: until a
	// dry run of a hostile write is refused.
	forward := mergeData(coredns.CorefileKey, strings.Replace(e.Corefile, "forward . /etc/resolv.conf", "forward . 203.0.113.53", 1))
	var code int
	var body string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, body = patch(t, coredns.ConfigMap, forward, true)
		return code == http.StatusUnprocessableEntity, nil
	})
	require.NoError(t, err, "the API server still admits the engine's token rewriting `forward .` (dry run): HTTP %d %s", code, body)

	var admitted []string
	own := func(t *testing.T, what string, wantChanged bool, ip string) {
		t.Helper()
		edit, err := engine.Ensure(ctx, harness.UpdateServer, netip.MustParseAddr(ip))
		require.NoError(t, err, "%s: job/incluster/coredns as the engine", what)
		assert.Equal(t, wantChanged, edit.Changed, what)
		admitted = append(admitted, what)
	}
	ownRaw := func(t *testing.T, what, name, body string) {
		t.Helper()
		code, resp := patch(t, name, body, false)
		require.Equal(t, http.StatusOK, code, "%s: %s", what, resp)
		admitted = append(admitted, what)
	}
	type hostile struct{ what, name, body string }
	refusals := map[string]string{}
	refuse := func(t *testing.T, cases []hostile) {
		t.Helper()
		for _, h := range cases {
			before, err := cms.Get(ctx, h.name, metav1.GetOptions{})
			require.NoError(t, err)
			code, resp := patch(t, h.name, h.body, false)
			if !assert.Equal(t, http.StatusUnprocessableEntity, code, "%s must be refused: %s", h.what, resp) {
				continue
			}
			var status metav1.Status
			require.NoError(t, json.Unmarshal([]byte(resp), &status), resp)
			assert.Equal(t, metav1.StatusReasonInvalid, status.Reason, h.what)
			assert.Contains(t, status.Message, fmt.Sprintf("ValidatingAdmissionPolicy '%s'", corednsPolicy), h.what)
			refusals[h.what] = status.Message
			after, err := cms.Get(ctx, h.name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "%s: nothing written", h.what)
		}
	}

	// The Corefile layout (kubeadm's, no coredns-custom).
	own(t, "Corefile: first write", true, "127.0.0.11")
	own(t, "Corefile: a new address", true, "2001:db8::53")
	own(t, "Corefile: no-op", false, "2001:db8::53")
	// Phase 4 chose another update server: the engine's entry for the one
	// no longer chosen goes as the new one is written (and back again, so
	// the Corefile below is as before).
	moving := &coredns.Editor{ConfigMaps: clients.ConfigMaps, Domains: []string{"susecloud.net"}}
	for _, step := range []struct{ from, to string }{{harness.UpdateServer, "smt-azure-2.susecloud.net"}, {"smt-azure-2.susecloud.net", harness.UpdateServer}} {
		what := "Corefile: a new update server, the earlier one's entry removed (" + step.to + ")"
		edit, err := moving.Ensure(ctx, step.to, netip.MustParseAddr("2001:db8::53"))
		require.NoError(t, err, "%s: job/incluster/coredns as the engine", what)
		assert.Equal(t, []string{"2001:db8::53 " + step.from}, edit.Removed, what)
		admitted = append(admitted, what)
	}
	cm, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	corefile := cm.Data[coredns.CorefileKey]
	entry := "        2001:db8::53 " + harness.UpdateServer + "\n"
	require.Contains(t, corefile, "    hosts {\n"+entry+"        ttl 15\n        no_reverse\n        fallthrough\n    }\n", "job/incluster/coredns wrote its block, its ttl and no_reverse lines included")
	ownRaw(t, "Corefile: the same text again", coredns.ConfigMap, mergeData(coredns.CorefileKey, corefile))
	withTTL := strings.Replace(corefile, entry+"        ttl 15\n", entry+"        ttl 30\n", 1)
	ownRaw(t, "Corefile: the hosts block's ttl changed", coredns.ConfigMap, mergeData(coredns.CorefileKey, withTTL))
	// The first write of a block that has the ttl line, into a Corefile
	// without one.
	e.ResetCoreDNS(ctx, t)
	ownRaw(t, "Corefile: first write with a ttl line", coredns.ConfigMap, mergeData(coredns.CorefileKey,
		strings.Replace(e.Corefile, ".:53 {\n", ".:53 {\n    hosts {\n        127.0.0.11 "+harness.UpdateServer+"\n        ttl 15\n        no_reverse\n        fallthrough\n    }\n", 1)))
	cm, err = cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	corefile = cm.Data[coredns.CorefileKey]
	entry = "        127.0.0.11 " + harness.UpdateServer + "\n"
	require.Contains(t, corefile, entry)
	corefileWith := func(old, new string) string {
		require.Contains(t, corefile, old)
		return mergeData(coredns.CorefileKey, strings.Replace(corefile, old, new, 1))
	}
	refuse(t, []hostile{
		{"Corefile: forward . to an outside resolver", coredns.ConfigMap, corefileWith("forward . /etc/resolv.conf", "forward . 203.0.113.53")},
		{"Corefile: an entry for a name outside UPDATE_SERVER_DOMAINS", coredns.ConfigMap,
			corefileWith(entry, entry+"        10.0.0.66 kubernetes.default.svc.cluster.local\n")},
		{"Corefile: the update server's name at the IMDS address", coredns.ConfigMap,
			corefileWith(entry, "        169.254.169.254 "+harness.UpdateServer+"\n")},
		{"Corefile: no_reverse taken out of the engine's block", coredns.ConfigMap,
			corefileWith("        no_reverse\n", "")},
		{"Corefile: the hosts block without fallthrough", coredns.ConfigMap,
			corefileWith("        fallthrough\n    }\n", "    }\n")},
		{"Corefile: a rewrite ahead of the kubernetes plugin", coredns.ConfigMap,
			corefileWith("    ready\n", "    ready\n    rewrite name exact kubernetes.default.svc.cluster.local evil.example.com\n")},
		{"Corefile: an entry outside the hosts block", coredns.ConfigMap,
			corefileWith("       pods insecure\n", "       pods insecure\n       127.0.0.11 "+harness.UpdateServer+"\n")},
		{"coredns: a label", coredns.ConfigMap, `{"metadata":{"labels":{"owned":"yes"}}}`},
		{"coredns: another data key", coredns.ConfigMap, mergeData("extra.server", "example.com:53 {\n    forward . 203.0.113.53\n}\n")},
	})

	// A hosts block of the cluster's own, limited to a zone: the engine adds
	// its entry and the update server's name to the zones.
	zoned := strings.Replace(e.Corefile, ".:53 {\n", ".:53 {\n    hosts /etc/hosts corp.internal {\n        10.1.2.3 db.corp.internal\n        fallthrough\n    }\n", 1)
	cm, err = cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data[coredns.CorefileKey] = zoned
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	own(t, "Corefile: into a hosts block limited to a zone", true, "127.0.0.11")
	cm, err = cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	corefile = cm.Data[coredns.CorefileKey]
	require.Contains(t, corefile, "    hosts /etc/hosts corp.internal "+harness.UpdateServer+" {\n        127.0.0.11 "+harness.UpdateServer+"\n        ttl 15\n        10.1.2.3 db.corp.internal\n")
	refuse(t, []hostile{
		{"Corefile: a cluster zone added to a hosts block", coredns.ConfigMap,
			corefileWith("hosts /etc/hosts corp.internal ", "hosts /etc/hosts corp.internal cluster.local ")},
		{"Corefile: the cluster's own entry removed", coredns.ConfigMap, corefileWith("        10.1.2.3 db.corp.internal\n", "")},
		{"Corefile: a cluster address in the cluster's hosts block, which answers PTR queries", coredns.ConfigMap,
			corefileWith("        10.1.2.3 db.corp.internal\n", "        10.0.0.1 kubernetes.susecloud.net\n        10.1.2.3 db.corp.internal\n")},
		{"Corefile: a shared-range address in the cluster's hosts block", coredns.ConfigMap,
			corefileWith("        10.1.2.3 db.corp.internal\n", "        100.64.0.10 kubernetes.susecloud.net\n        10.1.2.3 db.corp.internal\n")},
		{"Corefile: no_reverse added to the cluster's hosts block", coredns.ConfigMap,
			corefileWith("        10.1.2.3 db.corp.internal\n", "        10.1.2.3 db.corp.internal\n        no_reverse\n")},
		{"Corefile: the cluster's own entry readdressed", coredns.ConfigMap,
			corefileWith("        10.1.2.3 db.corp.internal\n", "        203.0.113.9 db.corp.internal\n")},
	})
	// k3s's NodeHosts: a hosts block of the cluster's own that reads a file
	// and answers every name (no zones), without no_reverse, so every entry
	// in it answers the PTR query of its address too. The engine writes its
	// entry (a public address: a private one it refuses there) and lowers
	// the ttl; it never adds a zone, which would narrow the block to that
	// zone (issue 45, S5-01), and it keeps one entry there, its update
	// server's, so that the token can rename at most one public address in
	// reverse lookups (S5-05).
	nodeHosts := strings.Replace(e.Corefile, ".:53 {\n", ".:53 {\n    hosts /etc/coredns/NodeHosts {\n        ttl 60\n        reload 15s\n        fallthrough\n    }\n", 1)
	savedCorefile := corefile
	cm, err = cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data[coredns.CorefileKey] = nodeHosts
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	own(t, "Corefile: into k3s's NodeHosts block, which answers PTR queries (a public address)", true, "20.38.0.87")
	own(t, "Corefile: k3s's NodeHosts block, the entry readdressed", true, "20.38.0.88")
	cm, err = cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	corefile = cm.Data[coredns.CorefileKey]
	shared := "        20.38.0.88 " + harness.UpdateServer + "\n"
	require.Contains(t, corefile, "    hosts /etc/coredns/NodeHosts {\n"+shared+"        ttl 15\n        reload 15s\n        fallthrough\n    }\n")
	refuse(t, []hostile{
		{"Corefile: an update-server zone added to k3s's NodeHosts block, narrowing it", coredns.ConfigMap,
			corefileWith("hosts /etc/coredns/NodeHosts {", "hosts /etc/coredns/NodeHosts susecloud.net {")},
		{"Corefile: an update-server zone added to k3s's NodeHosts block after two spaces", coredns.ConfigMap,
			corefileWith("hosts /etc/coredns/NodeHosts {", "hosts /etc/coredns/NodeHosts  "+harness.UpdateServer+" {")},
		{"Corefile: a second public address renamed in reverse lookups by a block without no_reverse", coredns.ConfigMap,
			corefileWith(shared, shared+"        49.12.0.7 node.susecloud.net\n")},
		{"Corefile: a public address renamed in reverse lookups in place of the engine's entry and beside it", coredns.ConfigMap,
			corefileWith(shared, "        49.12.0.7 node.susecloud.net\n        49.12.0.8 node2.susecloud.net\n")},
	})
	cm, err = cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data[coredns.CorefileKey] = savedCorefile
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	corefile = savedCorefile

	// At uninstall (registration-engine cleanup) the engine takes its own
	// entry and zone out again; the block's frame and the cluster's lines
	// stay.
	cleaned, removed := coredns.RemoveCorefileHostsEntries(corefile, []string{"susecloud.net"}, nil)
	require.Len(t, removed, 1)
	ownRaw(t, "Corefile: the engine's entry and zone removed (cleanup at uninstall)", coredns.ConfigMap, mergeData(coredns.CorefileKey, cleaned))
	e.UseAKSLayout(ctx, t)
	corefileBefore, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	own(t, "coredns-custom: first write", true, "127.0.0.11")
	own(t, "coredns-custom: a new address", true, "127.0.0.12")
	own(t, "coredns-custom: no-op", false, "127.0.0.12")
	custom, err := cms.Get(ctx, coredns.CustomConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	block := custom.Data[coredns.DefaultHostsKey]
	require.Equal(t, "hosts {\n    127.0.0.12 "+harness.UpdateServer+"\n    ttl 15\n    no_reverse\n    fallthrough\n}\n", block)
	assert.Equal(t, "log\n", custom.Data["log.override"])
	ownRaw(t, "coredns-custom: the same block again", coredns.CustomConfigMap, mergeData(coredns.DefaultHostsKey, block))
	ownRaw(t, "coredns-custom: the block with another ttl", coredns.CustomConfigMap, mergeData(coredns.DefaultHostsKey,
		"hosts {\n    127.0.0.12 "+harness.UpdateServer+"\n    ttl 30\n    no_reverse\n    fallthrough\n}\n"))
	// An address of the cluster's own in the engine's block is harmless
	// there: no_reverse, so no PTR answer renames it (job/incluster/coredns
	// TestRealCoreDNSNoReverse).
	ownRaw(t, "coredns-custom: a cluster address, with no_reverse", coredns.CustomConfigMap, mergeData(coredns.DefaultHostsKey,
		"hosts {\n    10.0.0.1 kubernetes.susecloud.net\n    ttl 15\n    no_reverse\n    fallthrough\n}\n"))
	refuse(t, []hostile{
		{"coredns-custom: a foreign key", coredns.CustomConfigMap, mergeData("evil.server", "susecloud.net:53 {\n    forward . 203.0.113.53\n}\n")},
		{"coredns-custom: a rewrite override", coredns.CustomConfigMap, mergeData(coredns.DefaultHostsKey,
			"rewrite name exact kubernetes.default.svc.cluster.local evil.example.com\nhosts {\n    127.0.0.12 "+harness.UpdateServer+"\n    fallthrough\n}\n")},
		{"coredns-custom: another key rewritten", coredns.CustomConfigMap, mergeData("log.override", "rewrite name regex (.*)\\.svc\\.cluster\\.local evil.example.com\n")},
		{"coredns-custom: an entry for a name outside UPDATE_SERVER_DOMAINS", coredns.CustomConfigMap, mergeData(coredns.DefaultHostsKey,
			"hosts {\n    10.0.0.66 kubernetes.default.svc.cluster.local\n    fallthrough\n}\n")},
		{"coredns-custom: the block without fallthrough", coredns.CustomConfigMap, mergeData(coredns.DefaultHostsKey,
			"hosts {\n    127.0.0.12 "+harness.UpdateServer+"\n}\n")},
		{"coredns-custom: the engine's block without no_reverse (a PTR renaming of 10.0.0.1)", coredns.CustomConfigMap, mergeData(coredns.DefaultHostsKey,
			"hosts {\n    10.0.0.1 kubernetes.susecloud.net\n    ttl 15\n    fallthrough\n}\n")},
		{"coredns-custom: a ttl out of range", coredns.CustomConfigMap, mergeData(coredns.DefaultHostsKey,
			"hosts {\n    127.0.0.12 "+harness.UpdateServer+"\n    ttl 86400\n    fallthrough\n}\n")},
		{"coredns-custom: a forward after the block", coredns.CustomConfigMap, mergeData(coredns.DefaultHostsKey,
			"hosts {\n    127.0.0.12 "+harness.UpdateServer+"\n    fallthrough\n}\nforward . 203.0.113.53\n")},
		{"coredns-custom: an owner reference for the garbage collector", coredns.CustomConfigMap,
			`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"00000000-0000-0000-0000-000000000000"}]}}`},
	})
	refuse(t, []hostile{
		{"coredns-custom: another key removed", coredns.CustomConfigMap, `{"data":{"log.override":null}}`},
	})
	ownRaw(t, "coredns-custom: the engine's key removed (cleanup at uninstall)", coredns.CustomConfigMap, `{"data":{"`+coredns.DefaultHostsKey+`":null}}`)
	corefileAfter, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corefileBefore.ResourceVersion, corefileAfter.ResourceVersion, "with coredns-custom the engine never writes the Corefile")

	// The administrator is not the engine: the policy leaves them alone.
	_, err = cms.Patch(ctx, coredns.CustomConfigMap, "application/merge-patch+json", []byte(mergeData("admin.override", "log\n")), metav1.PatchOptions{})
	require.NoError(t, err, "an administrator's edit of coredns-custom is not the policy's business")

	if t.Failed() {
		return
	}
	t.Logf("proved: as %s (a TokenRequest token), job/incluster/coredns's own edits were admitted (%s); the same token was refused:", "system:serviceaccount:"+operator.Namespace+":"+harness.EngineSA, strings.Join(admitted, "; "))
	for _, what := range []string{
		"Corefile: forward . to an outside resolver",
		"Corefile: a cluster address in the cluster's hosts block, which answers PTR queries",
		"coredns-custom: the engine's block without no_reverse (a PTR renaming of 10.0.0.1)",
		"coredns-custom: a foreign key",
		"coredns-custom: a rewrite override",
		"coredns-custom: an entry for a name outside UPDATE_SERVER_DOMAINS",
		"Corefile: an entry for a name outside UPDATE_SERVER_DOMAINS",
	} {
		t.Logf("proved: refused %s: HTTP 422 %q", what, refusals[what])
	}
	t.Logf("proved: also refused (HTTP 422): %d more hostile writes, among them an IMDS address, a hosts block without fallthrough, a label and an owner reference", len(refusals)-7)
}

// TestCoreDNSAdmissionPolicyLongCorefile proves on the real API server (the
// LTS version too: LTS_TESTS) that the policy checks a Corefile of
// coredns.PolicyMaxLines lines within the API server's CEL cost
// limits, so the engine's edit of a cluster with a long hosts block of its
// own is admitted; and that beyond the limit the engine says it is the
// Corefile's length (ErrPolicyCostLimit), not that its edit is foreign.
// The policy checks each line against its neighbours only: one that
// compared each line with every line above it refused every engine edit
// from about 250 hosts entries on.
func TestCoreDNSAdmissionPolicyLongCorefile(t *testing.T) {
	e := setupCluster(t)
	ctx := harness.Context(t)
	e.ResetCoreDNS(ctx, t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		e.ResetCoreDNS(ctx, t)
	})
	cms := e.Admin.CoreV1().ConfigMaps("kube-system")
	as := e.Plane.ClientAs(t, e.Token(t))
	clients, err := kube.NewClients(as)
	require.NoError(t, err)
	engine := &coredns.Editor{ConfigMaps: clients.ConfigMaps, Domains: []string{"susecloud.net"}}

	// Enforced once a dry run of a hostile write is refused.
	forward := mergeData(coredns.CorefileKey, strings.Replace(e.Corefile, "forward . /etc/resolv.conf", "forward . 203.0.113.53", 1))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, _ := request(t, as, http.MethodPatch, configMapPath("kube-system", coredns.ConfigMap)+"?dryRun=All", mergeType, forward)
		return code == http.StatusUnprocessableEntity, nil
	})
	require.NoError(t, err, "the policy is not enforced")

	// The cluster's own hosts block, as long as it takes for the Corefile
	// to reach lines lines once the engine's entry and ttl are in.
	withHosts := func(lines int) string {
		n := lines - strings.Count(e.Corefile, "\n") - 5 // "hosts {", fallthrough, "}", and the engine's entry and ttl
		var b strings.Builder
		b.WriteString("    hosts {\n")
		for i := range n {
			fmt.Fprintf(&b, "        10.%d.%d.%d host%d.corp.internal\n", i>>16&255, i>>8&255, i&255, i)
		}
		b.WriteString("        fallthrough\n    }\n")
		return strings.Replace(e.Corefile, ".:53 {\n", ".:53 {\n"+b.String(), 1)
	}
	setCorefile := func(t *testing.T, corefile string) {
		cm, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
		require.NoError(t, err)
		cm.Data[coredns.CorefileKey] = corefile
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		require.NoError(t, err, "the administrator's Corefile")
	}
	ip := netip.MustParseAddr("20.38.0.87")

	setCorefile(t, withHosts(coredns.PolicyMaxLines))
	edit, err := engine.Ensure(ctx, harness.UpdateServer, ip)
	require.NoError(t, err, "the engine's entry into a %d-line Corefile", coredns.PolicyMaxLines)
	require.True(t, edit.Changed)
	cm, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	lines := strings.Count(strings.TrimSuffix(cm.Data[coredns.CorefileKey], "\n"), "\n") + 1
	assert.Equal(t, coredns.PolicyMaxLines, lines, "the Corefile the policy admitted")
	moved, err := engine.Ensure(ctx, harness.UpdateServer, netip.MustParseAddr("20.38.0.88"))
	require.NoError(t, err, "a new address in the %d-line Corefile", lines)
	require.True(t, moved.Changed)

	far := 4 * coredns.PolicyMaxLines
	setCorefile(t, withHosts(far))
	_, err = engine.Ensure(ctx, harness.UpdateServer, ip)
	require.ErrorIs(t, err, coredns.ErrPolicyCostLimit, "a %d-line Corefile", far)
	assert.NotErrorIs(t, err, coredns.ErrPolicyRefused)
	if t.Failed() {
		return
	}
	t.Logf("proved: the policy admitted the engine's edits of a %d-line Corefile (a hosts block of the cluster's own, %d entries); at %d lines the API server's CEL cost limit refused it and the engine said so: %v",
		lines, lines-strings.Count(e.Corefile, "\n")-5, far, err)
}

// TestCoreDNSAdmissionPolicyCleanupCopy proves on the real API server (the
// LTS version too: LTS_TESTS) that the uninstall hook's copy of the policy,
// as the chart renders it for the hook's ServiceAccount, admits only
// removal (issue 45, S5-07): with the hook's token the engine's entry and
// key can go, but no entry can be written, readdressed or added, no ttl
// changed, in either layout. The copy used to be the engine's own policy,
// which let the hook's token write an entry of its choosing.
func TestCoreDNSAdmissionPolicyCleanupCopy(t *testing.T) {
	e := setupCluster(t)
	ctx := harness.Context(t)
	e.ResetCoreDNS(ctx, t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		e.ResetCoreDNS(ctx, t)
	})
	helm := testkit.Helm(t)
	chart := filepath.Join("..", "manifests", "chart", "registration-engine")
	const sa = "registration-engine-cleanup"
	const hookPolicy = "registration-engine-coredns-cleanup"
	// The hook's objects but its Job, for a layout: its ServiceAccount,
	// its Roles (patch on the layout's ConfigMap), the policy copy and its
	// binding.
	hookAccess := func(t *testing.T, layout string) {
		out, err := testkit.Command(ctx, helm, "template", "registration-engine", chart, "--namespace", operator.Namespace,
			"--values", filepath.Join("..", "manifests", "testdata", "chart", "minimal.yaml"), "--set", "coreDNSLayout="+layout,
			"--show-only", "templates/cleanup-job.yaml")
		require.NoError(t, err)
		var docs []string
		for _, doc := range strings.Split(string(out), "\n---\n") {
			if !strings.Contains(doc, "\nkind: Job\n") {
				docs = append(docs, doc)
			}
		}
		e.Plane.Apply(t, []byte(strings.Join(docs, "\n---\n")))
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		adm := e.Admin.AdmissionregistrationV1()
		_ = adm.ValidatingAdmissionPolicyBindings().Delete(ctx, hookPolicy, metav1.DeleteOptions{})
		_ = adm.ValidatingAdmissionPolicies().Delete(ctx, hookPolicy, metav1.DeleteOptions{})
		_ = e.Admin.RbacV1().RoleBindings("kube-system").Delete(ctx, sa, metav1.DeleteOptions{})
		_ = e.Admin.RbacV1().Roles("kube-system").Delete(ctx, sa, metav1.DeleteOptions{})
		_ = e.Admin.RbacV1().RoleBindings(operator.Namespace).Delete(ctx, sa, metav1.DeleteOptions{})
		_ = e.Admin.RbacV1().Roles(operator.Namespace).Delete(ctx, sa, metav1.DeleteOptions{})
		_ = e.Admin.CoreV1().ServiceAccounts(operator.Namespace).Delete(ctx, sa, metav1.DeleteOptions{})
	})
	cms := e.Admin.CoreV1().ConfigMaps("kube-system")
	setData := func(t *testing.T, name, key, value string) {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		cm.Data[key] = value
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		require.NoError(t, err)
	}

	// The Corefile layout: the engine's block, as the engine wrote it.
	hookAccess(t, "corefile")
	as := e.Plane.ClientAs(t, e.Plane.ServiceAccountToken(t, operator.Namespace, sa))
	patch := func(name, body string, dryRun bool) (int, string) {
		path := configMapPath("kube-system", name)
		if dryRun {
			path += "?dryRun=All"
		}
		return request(t, as, http.MethodPatch, path, mergeType, body)
	}
	entry := "        20.38.0.87 " + harness.UpdateServer + "\n"
	corefile := strings.Replace(e.Corefile, ".:53 {\n", ".:53 {\n    hosts {\n"+entry+"        ttl 15\n        no_reverse\n        fallthrough\n    }\n", 1)
	setData(t, coredns.ConfigMap, coredns.CorefileKey, corefile)
	readdressed := mergeData(coredns.CorefileKey, strings.Replace(corefile, entry, "        203.0.113.66 "+harness.UpdateServer+"\n", 1))
	var code int
	var body string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, body = patch(coredns.ConfigMap, readdressed, true)
		return code == http.StatusUnprocessableEntity, nil
	})
	require.NoError(t, err, "the hook's policy copy is not enforced on its token (dry run of a readdressed entry): HTTP %d %s", code, body)

	refusals := map[string]string{}
	refuse := func(what, name, body string) {
		t.Helper()
		code, resp := patch(name, body, false)
		if assert.Equal(t, http.StatusUnprocessableEntity, code, "%s must be refused: %s", what, resp) {
			assert.Contains(t, resp, fmt.Sprintf("ValidatingAdmissionPolicy '%s'", hookPolicy), what)
			assert.Contains(t, resp, "may only remove the engine", what)
			var status metav1.Status
			require.NoError(t, json.Unmarshal([]byte(resp), &status), resp)
			refusals[what] = status.Message
		}
	}
	refuse("Corefile: the engine's entry readdressed by the hook's token", coredns.ConfigMap, readdressed)
	refuse("Corefile: an entry added by the hook's token", coredns.ConfigMap,
		mergeData(coredns.CorefileKey, strings.Replace(corefile, entry, entry+"        203.0.113.66 evil.susecloud.net\n", 1)))
	refuse("Corefile: the ttl changed by the hook's token", coredns.ConfigMap,
		mergeData(coredns.CorefileKey, strings.Replace(corefile, "ttl 15\n", "ttl 3600\n", 1)))
	refuse("Corefile: a hosts block added by the hook's token", coredns.ConfigMap,
		mergeData(coredns.CorefileKey, strings.Replace(e.Corefile, ".:53 {\n", ".:53 {\n    hosts {\n        203.0.113.66 "+harness.UpdateServer+"\n        no_reverse\n        fallthrough\n    }\n", 1)))
	cleaned, removed := coredns.RemoveCorefileHostsEntries(corefile, []string{"susecloud.net"}, nil)
	require.Equal(t, []string{strings.TrimSpace(entry)}, removed)
	code, body = patch(coredns.ConfigMap, mergeData(coredns.CorefileKey, cleaned), false)
	require.Equal(t, http.StatusOK, code, "the cleanup's removal of the engine's entry: %s", body)

	// AKS's layout: the engine's key in coredns-custom.
	e.UseAKSLayout(ctx, t)
	hookAccess(t, "aks")
	block := "hosts {\n    20.38.0.87 " + harness.UpdateServer + "\n    ttl 15\n    no_reverse\n    fallthrough\n}\n"
	setData(t, coredns.CustomConfigMap, coredns.DefaultHostsKey, block)
	moved := mergeData(coredns.DefaultHostsKey, strings.Replace(block, "20.38.0.87", "203.0.113.66", 1))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, body = patch(coredns.CustomConfigMap, moved, true)
		return code == http.StatusUnprocessableEntity, nil
	})
	require.NoError(t, err, "the hook's Role for AKS's layout: HTTP %d %s", code, body)
	refuse("coredns-custom: the engine's key readdressed by the hook's token", coredns.CustomConfigMap, moved)
	code, body = patch(coredns.CustomConfigMap, `{"data":{"`+coredns.DefaultHostsKey+`":null}}`, false)
	require.Equal(t, http.StatusOK, code, "the cleanup's removal of the engine's key: %s", body)
	refuse("coredns-custom: the engine's key written afresh by the hook's token", coredns.CustomConfigMap, mergeData(coredns.DefaultHostsKey, block))

	if t.Failed() {
		return
	}
	for what, resp := range refusals {
		t.Logf("proved: the uninstall hook's token (system:serviceaccount:%s:%s) refused: %s: HTTP 422 %q", operator.Namespace, sa, what, resp)
	}
	t.Logf("proved: the same token removed the engine's Corefile entry and its coredns-custom key (HTTP 200)")
}
