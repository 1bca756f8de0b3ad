package coredns

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/incluster/handover"
	"github.com/rancher/registration-engine/job/kube/kubetest"
)

// Inputs of the real-CoreDNS tests. make test sets COREDNS_BIN (built by
// e2e/scripts/coredns-bin.sh); without it the tests skip, unless CI is set.
const (
	envCoreDNSBin = "COREDNS_BIN"
	envCI         = "CI"
)

// corednsBin returns the CoreDNS binary the tests run.
func corednsBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(envCoreDNSBin)
	fi, err := os.Stat(bin)
	if bin != "" && err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return bin
	}
	if os.Getenv(envCI) != "" {
		t.Fatalf("%s=%q is not a CoreDNS binary; CI is set, so the real-CoreDNS tests must run (e2e/scripts/coredns-bin.sh builds it)", envCoreDNSBin, bin)
	}
	t.Skipf("%s=%q is not a CoreDNS binary (e2e/scripts/coredns-bin.sh builds it; make test sets it)", envCoreDNSBin, bin)
	return ""
}

// TestRealCoreDNS proves, with a real CoreDNS started on a loopback port
// from the configuration the engine wrote, that each Corefile shape the
// engine supports answers the update server's name with the address phase
// 5 chose, that other names still resolve, and that a later change (a new
// address) is served by the running CoreDNS through its reload plugin,
// without a restart: for the Corefile and for AKS's coredns-custom, whose
// keys CoreDNS imports. That is why the engine needs no access to CoreDNS's
// Deployment.
func TestRealCoreDNS(t *testing.T) {
	bin := corednsBin(t)
	newIP := netip.MustParseAddr("20.38.0.99")

	tests := map[string]struct {
		corefile string            // kube-system/coredns, before the engine
		custom   map[string]string // kube-system/coredns-custom; nil: absent
		files    map[string]string // files beside the Corefile
		others   map[string]string // other names that must still resolve
	}{
		"kubeadm and kind: no hosts block": {
			corefile: kindCorefile,
		},
		"k3s: hosts block reading a file": {
			corefile: ".:53 {\n    errors\n    hosts NodeHosts {\n      ttl 60\n      reload 15s\n      fallthrough\n    }\n    cache 30\n    reload\n}\n",
			files:    map[string]string{"NodeHosts": "172.18.0.2 k3s-server\n"},
			others:   map[string]string{"k3s-server": "172.18.0.2"},
		},
		"hosts block with entries and no zones": {
			corefile: ".:53 {\n    errors\n    hosts {\n        10.0.0.9 other.example.com\n        fallthrough\n    }\n    reload\n}\n",
			others:   map[string]string{"other.example.com": "10.0.0.9"},
		},
		"hosts block limited to a zone": {
			corefile: ".:53 {\n    errors\n    hosts NodeHosts corp.internal {\n        10.1.0.5 db.corp.internal\n        fallthrough\n    }\n    reload\n}\n",
			files:    map[string]string{"NodeHosts": "10.1.0.6 files.corp.internal\n"},
			others:   map[string]string{"db.corp.internal": "10.1.0.5", "files.corp.internal": "10.1.0.6"},
		},
		"AKS: coredns-custom imported by the Corefile": {
			corefile: aksCorefile,
			custom: map[string]string{
				"log.override": "log\n",
				"corp.server":  "corp.internal:53 {\n    bind 127.0.0.1\n    hosts {\n        10.1.0.7 app.corp.internal\n    }\n}\n",
			},
			others: map[string]string{"app.corp.internal": "10.1.0.7"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sv := serveEngineEntry(ctx, t, bin, tc.corefile, tc.custom, tc.files)
			c, engine, dir, port, dns := sv.c, sv.engine, sv.dir, sv.port, sv.dns
			for host, want := range tc.others {
				assert.Equal(t, netip.MustParseAddr(want), dns.waitFor(ctx, t, port, host, netip.MustParseAddr(want)), "%s still resolves", host)
			}

			// Another address won phase 4's race: the engine edits the same
			// ConfigMap, the kubelet syncs it into the pod, reload loads it.
			edit, err := engine.Ensure(ctx, smtName, newIP)
			changed := edit.Changed
			require.NoError(t, err)
			require.True(t, changed)
			writeConfig(t, c, dir, port)
			start := time.Now()
			assert.Equal(t, newIP, dns.waitFor(ctx, t, port, smtName, newIP), "the running CoreDNS serves the new address")
			assert.Nil(t, dns.cmd.ProcessState, "the same CoreDNS process, never restarted")
			t.Logf("proved: CoreDNS %s answered %s with %s from the engine's configuration, and %s after the engine changed it, reloaded in %s without a restart",
				name, smtName, smtIP, newIP, time.Since(start).Round(100*time.Millisecond))
		})
	}
}

// loopbackOnly turns a cluster's Corefile into one a test may run: the
// plugins that reach beyond the machine or bind fixed ports (kubernetes,
// forward, health, ready, prometheus, loop) are dropped, every server block
// binds 127.0.0.1 only, and reload checks every 2 s instead of 30 s. The
// hosts, cache, reload and import lines the engine's edits depend on stay as
// they were.
func loopbackOnly(t *testing.T, corefile string) string {
	t.Helper()
	drop := map[string]bool{"kubernetes": true, "forward": true, "health": true, "ready": true, "prometheus": true, "loop": true}
	lines := parseCorefile(corefile)
	var out []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if l.depth == 1 && len(l.fields) > 0 && drop[l.fields[0]] {
			if l.opens > l.closes {
				i = blockEnd(lines, i)
				require.GreaterOrEqual(t, i, 0, "unclosed block in the test's Corefile")
			}
			continue
		}
		if l.depth == 1 && len(l.fields) == 1 && l.fields[0] == "reload" {
			out = append(out, l.indent+"reload 2s 1s")
			continue
		}
		out = append(out, l.text)
		if l.depth == 0 && l.opens > l.closes {
			out = append(out, "    bind 127.0.0.1")
		}
	}
	return strings.Join(out, "\n")
}

// writeConfig lays out the ConfigMaps as the kubelet mounts them in
// CoreDNS's pod: the Corefile, and every coredns-custom key as a file under
// custom/. Each file is replaced by a rename, as the kubelet swaps a
// ConfigMap volume. The root block's port 53 becomes port.
func writeConfig(t *testing.T, c *fake.Clientset, dir string, port int) {
	t.Helper()
	corefile := getCM(t, c, ConfigMap).Data[CorefileKey]
	require.Equal(t, 1, strings.Count(corefile, ".:53 {"), "one root block on port 53:\n%s", corefile)
	writeFile(t, filepath.Join(dir, "Corefile"), strings.Replace(corefile, ".:53 {", ".:"+strconv.Itoa(port)+" {", 1))
	custom, err := c.CoreV1().ConfigMaps("kube-system").Get(context.Background(), CustomConfigMap, metav1.GetOptions{})
	if err != nil {
		return
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "custom"), 0o755))
	for k, v := range custom.Data {
		if strings.HasSuffix(k, ".server") {
			v = strings.ReplaceAll(v, ":53 {", ":"+strconv.Itoa(port)+" {")
		}
		writeFile(t, filepath.Join(dir, "custom", k), v)
	}
}

// served is kube-system after the engine mapped smtName to smtIP, and a
// real CoreDNS on port serving it from dir as the kubelet would mount it.
type served struct {
	c      *fake.Clientset
	engine *Editor
	dir    string
	port   int
	dns    *realCoreDNS
}

// serveEngineEntry builds kube-system from corefile and, unless custom is
// nil, coredns-custom; has the engine map smtName to smtIP; writes the
// ConfigMaps and files beside them into a directory; and starts CoreDNS on
// it, returning once CoreDNS answers the engine's entry.
func serveEngineEntry(ctx context.Context, t *testing.T, bin, corefile string, custom, files map[string]string) served {
	t.Helper()
	c := fake.NewClientset(cm(ConfigMap, map[string]string{CorefileKey: loopbackOnly(t, corefile)}))
	if custom != nil {
		_, err := c.CoreV1().ConfigMaps("kube-system").Create(ctx, cm(CustomConfigMap, custom), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	engine := newCoreDNS(c)
	_, err := engine.Ensure(ctx, smtName, smtIP)
	require.NoError(t, err)
	dir := t.TempDir()
	for f, content := range files {
		writeFile(t, filepath.Join(dir, f), content)
	}
	port := testkit.FreeDNSPort(t)
	writeConfig(t, c, dir, port)
	dns := startCoreDNS(t, bin, dir)
	require.Equal(t, smtIP, dns.waitFor(ctx, t, port, smtName, smtIP), "the update server's name, as the engine wrote it")
	return served{c: c, engine: engine, dir: dir, port: port, dns: dns}
}

var writeFile = testkit.WriteFile

// realCoreDNS is a CoreDNS process serving dir/Corefile; its output goes to
// a file beside it, shown when the test fails.
type realCoreDNS struct {
	cmd *exec.Cmd
	log string
}

func startCoreDNS(t *testing.T, bin, dir string) *realCoreDNS {
	t.Helper()
	logFile := filepath.Join(t.TempDir(), "coredns.log")
	out, err := os.Create(logFile)
	require.NoError(t, err)
	defer out.Close()
	cmd := exec.Command(bin, "-conf", filepath.Join(dir, "Corefile"))
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	d := &realCoreDNS{cmd: cmd, log: logFile}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("coredns output:\n%s", d.output())
		}
	})
	return d
}

// output is what CoreDNS has printed so far.
func (d *realCoreDNS) output() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

// waitFor asks CoreDNS on port for host's IPv4 address until it answers
// want (or the test's context ends), and returns the last answer.
func (d *realCoreDNS) waitFor(ctx context.Context, t *testing.T, port int, host string, want netip.Addr) netip.Addr {
	t.Helper()
	last, lastErr, ok := d.ask(ctx, port, host, func(a netip.Addr) bool { return a == want })
	if !ok {
		t.Errorf("CoreDNS never answered %s with %s: last answer %v, error %v\ncoredns output:\n%s", host, want, last, lastErr, d.output())
	}
	return last
}

// ask asks CoreDNS on port for host's (first) IPv4 address every 200 ms until done
// holds for the answer (an invalid address when there is none), or ctx
// ends: then ok is false. It returns the last answer and its error.
func (d *realCoreDNS) ask(ctx context.Context, port int, host string, done func(netip.Addr) bool) (last netip.Addr, lastErr error, ok bool) {
	resolve := handover.ServerResolver(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	for {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		addrs, err := resolve(qctx, host+".")
		cancel()
		last, lastErr = netip.Addr{}, err
		for _, a := range addrs {
			if a = a.Unmap(); a.Is4() {
				last = a
				break
			}
		}
		if done(last) {
			return last, lastErr, true
		}
		select {
		case <-ctx.Done():
			return last, lastErr, false
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestRealCoreDNSCacheInFront proves, with real CoreDNS processes, that a
// cache between the pods and CoreDNS lets go of an address the engine moved
// within the hosts block's TTL (HostsTTL), in both layouts. The cache is a
// second CoreDNS configured as AKS's LocalDNS is (cache up to 3600 s, stale
// answers served immediately), forwarding to the cluster's CoreDNS, which
// runs the configuration the engine wrote. Without the block's ttl, CoreDNS
// answers with the hosts plugin's 3600 s, capped at 30 s where its root
// block has cache 30 (AKS's and kubeadm's do): longer than HANDOVER_SETTLE,
// so the operator could still be handed the old address.
func TestRealCoreDNSCacheInFront(t *testing.T) {
	bin := corednsBin(t)
	newIP := netip.MustParseAddr("20.38.0.99")
	ttl := time.Duration(HostsTTL) * time.Second

	tests := map[string]struct {
		corefile string
		custom   map[string]string // kube-system/coredns-custom; nil: absent
	}{
		"kubeadm: the Corefile": {corefile: kindCorefile},
		"AKS: coredns-custom":   {corefile: aksCorefile, custom: map[string]string{"log.override": "log\n"}},
		// Nothing in front of hosts caps its TTL here.
		"a root block without cache": {corefile: ".:53 {\n    errors\n    reload\n}\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sv := serveEngineEntry(ctx, t, bin, tc.corefile, tc.custom, nil)
			c, engine, dir, port, cluster := sv.c, sv.engine, sv.dir, sv.port, sv.dns
			addr, answered := answerTTL(t, port, smtName)
			require.Equal(t, smtIP, addr)
			assert.LessOrEqual(t, answered, uint32(HostsTTL), "CoreDNS answers the engine's entry with the block's ttl, not the hosts plugin's 3600 s")

			nodeDir := t.TempDir()
			nodePort := testkit.FreeDNSPort(t)
			writeFile(t, filepath.Join(nodeDir, "Corefile"), ".:"+strconv.Itoa(nodePort)+" {\n"+
				"    bind 127.0.0.1\n"+
				"    cache 3600 {\n        serve_stale 3600s immediate\n    }\n"+
				"    forward . 127.0.0.1:"+strconv.Itoa(port)+"\n"+
				"}\n")
			node := startCoreDNS(t, bin, nodeDir)
			// A pod on the node asks: the node's cache now holds smtIP.
			require.Equal(t, smtIP, node.waitFor(ctx, t, nodePort, smtName, smtIP))
			cached := time.Now()

			// Another address won phase 4's race; the cluster's CoreDNS reloads.
			edit, err := engine.Ensure(ctx, smtName, newIP)
			require.NoError(t, err)
			require.True(t, edit.Changed)
			writeConfig(t, c, dir, port)
			require.Equal(t, newIP, cluster.waitFor(ctx, t, port, smtName, newIP))
			served := time.Now()
			if served.Sub(cached) < ttl-time.Second {
				addr, _ := answerTTL(t, nodePort, smtName)
				assert.Equal(t, smtIP, addr, "the node's cache still holds the old address: it is in front of CoreDNS")
			}

			// Within the TTL of caching the old answer the node's cache
			// asks again (serving the stale answer once while it does).
			deadline := cached.Add(ttl + 2*time.Second)
			var last netip.Addr
			for time.Now().Before(deadline) {
				if last, _ = answerTTL(t, nodePort, smtName); last == newIP {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			require.Equal(t, newIP, last, "the node's cache served %s for longer than the %s TTL after CoreDNS moved %s to %s", smtIP, ttl, smtName, newIP)
			now := time.Now()
			t.Logf("proved: %s: CoreDNS answered %s with TTL %d s; a LocalDNS-like cache (cache 3600, serve_stale immediate) in front of it served the new address %s %s after CoreDNS did and %s after it had cached the old one (the block's ttl: %s)",
				name, smtName, answered, newIP, now.Sub(served).Round(100*time.Millisecond), now.Sub(cached).Round(100*time.Millisecond), ttl)
		})
	}
}

// answerTTL asks the DNS server on the loopback port for host's A record
// once and returns the first address with its TTL; the zero address when
// there is none.
func answerTTL(t *testing.T, port int, host string) (netip.Addr, uint32) {
	t.Helper()
	name, err := dnsmessage.NewName(host + ".")
	require.NoError(t, err)
	q := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: uint16(time.Now().UnixNano()), RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}},
	}
	packet, err := q.Pack()
	require.NoError(t, err)
	conn, err := net.Dial("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(2*time.Second)))
	_, err = conn.Write(packet)
	require.NoError(t, err)
	buf := make([]byte, 1500)
	n, err := conn.Read(buf)
	if err != nil {
		return netip.Addr{}, 0 // no answer in time: the caller asks again
	}
	var m dnsmessage.Message
	require.NoError(t, m.Unpack(buf[:n]))
	for _, a := range m.Answers {
		if r, ok := a.Body.(*dnsmessage.AResource); ok {
			return netip.AddrFrom4(r.A), a.Header.TTL
		}
	}
	return netip.Addr{}, 0
}

// TestRealCoreDNSEdges proves with a real CoreDNS the two edges the engine
// must see itself, because no handover wait can fix them:
//
//   - A coredns-custom .server key for a zone above the update server's
//     name is a server block of its own, and CoreDNS answers the name from
//     it, never from the root block where AKS imports the engine's key: the
//     entry an earlier run wrote is unreachable, and the engine now refuses
//     at once instead of waiting out HANDOVER_TIMEOUT.
//   - In the Corefile layout, once phase 4 chose another update server, the
//     name no longer chosen stops resolving to the address the earlier run
//     pinned (Azure may give that address to someone else).
func TestRealCoreDNSEdges(t *testing.T) {
	bin := corednsBin(t)
	old := "smt-azure-old.susecloud.net"
	oldIP := netip.MustParseAddr("20.38.0.1")
	// What the refusal says, the coredns-custom key and its server block
	// among it: the golden file.
	msgs := testkit.NewMessages(t)

	t.Run("AKS: a .server zone above the name answers instead of the engine's key", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		shadow := netip.MustParseAddr("10.9.9.9")
		c := fake.NewClientset(cm(ConfigMap, map[string]string{CorefileKey: loopbackOnly(t, aksCorefile)}), cm(CustomConfigMap, map[string]string{
			// As an earlier run wrote it, before the .server key was added.
			DefaultHostsKey: hostsBlock("", smtName, smtIP) + "\n",
			"corp.server":   "susecloud.net:53 {\n    bind 127.0.0.1\n    hosts {\n        " + shadow.String() + " " + smtName + "\n    }\n}\n",
		}))
		dir := t.TempDir()
		port := testkit.FreeDNSPort(t)
		writeConfig(t, c, dir, port)
		dns := startCoreDNS(t, bin, dir)

		assert.Equal(t, shadow, dns.waitFor(ctx, t, port, smtName, shadow), "the .server block answers the name, not the engine's entry")

		_, err := newCoreDNS(c).Ensure(ctx, smtName, smtIP)
		require.ErrorIs(t, err, ErrCorefile, "refused at once")
		msgs.Add("a .server zone above the name", err)
		t.Logf("proved: a real CoreDNS answered %s with %s from coredns-custom key corp.server, not %s from %s; the engine refuses: %v", smtName, shadow, smtIP, DefaultHostsKey, err)
	})

	t.Run("Corefile: the update server no longer chosen stops resolving", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := fake.NewClientset(cm(ConfigMap, map[string]string{CorefileKey: loopbackOnly(t, kindCorefile)}))
		engine := &Editor{ConfigMaps: kubetest.Typed(c), Domains: testDomains}
		_, err := engine.Ensure(ctx, old, oldIP)
		require.NoError(t, err)
		dir := t.TempDir()
		port := testkit.FreeDNSPort(t)
		writeConfig(t, c, dir, port)
		dns := startCoreDNS(t, bin, dir)
		require.Equal(t, oldIP, dns.waitFor(ctx, t, port, old, oldIP), "the earlier run's entry is served")

		edit, err := engine.Ensure(ctx, smtName, smtIP)
		require.NoError(t, err)
		assert.Equal(t, []string{oldIP.String() + " " + old}, edit.Removed)
		writeConfig(t, c, dir, port)
		assert.Equal(t, smtIP, dns.waitFor(ctx, t, port, smtName, smtIP), "the new update server is served")
		// Within the hosts block's TTL, whatever a cache kept.
		start := time.Now()
		gctx, gcancel := context.WithTimeout(ctx, 2*HostsTTL*time.Second)
		defer gcancel()
		answer := "no address"
		if last := dns.waitGone(gctx, t, port, old, oldIP); last.IsValid() {
			answer = last.String()
		}
		t.Logf("proved: after the engine moved to %s, a real CoreDNS stopped answering %s with %s within %s of serving the new entry (now: %s)",
			smtName, old, oldIP, time.Since(start).Round(100*time.Millisecond), answer)
	})
}

// waitGone asks CoreDNS on port for host's IPv4 address until it no longer
// answers gone (or the test's context ends), and returns the last answer.
func (d *realCoreDNS) waitGone(ctx context.Context, t *testing.T, port int, host string, gone netip.Addr) netip.Addr {
	t.Helper()
	last, _, ok := d.ask(ctx, port, host, func(a netip.Addr) bool { return a != gone })
	if !ok {
		t.Errorf("CoreDNS still answers %s with %s\ncoredns output:\n%s", host, gone, d.output())
	}
	return last
}

// TestRealCoreDNSNoReverse proves, with a real CoreDNS, that the engine's
// entry renames no address: the hosts plugin answers the reverse (PTR)
// query for each entry's address ahead of the plugins after it (the
// kubernetes plugin in a cluster; here a zone file answering as it does
// for the kubernetes Service's address), so a hosts entry for 10.96.0.1
// would make every PTR lookup of that Service answer the update server's
// name. The engine's block carries no_reverse, in AKS's coredns-custom and
// in a Corefile it adds its block to; the block an older engine wrote
// (without it) is shown renaming the address.
func TestRealCoreDNSNoReverse(t *testing.T) {
	bin := corednsBin(t)
	service := netip.MustParseAddr("10.96.0.1") // the kubernetes Service, as kubeadm numbers it
	const serviceName = "kubernetes.default.svc.cluster.local."
	zone := "$ORIGIN 96.10.in-addr.arpa.\n" +
		"@ 30 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 30\n" +
		"1.0 30 IN PTR " + serviceName + "\n"
	files := map[string]string{"db.10.96": zone}
	const file = "    file db.10.96 96.10.in-addr.arpa\n"
	corefile := ".:53 {\n    errors\n" + file + "    reload\n}\n"
	aks := ".:53 {\n    errors\n" + file + "    reload\n    import custom/*.override\n}\nimport custom/*.server\n"

	tests := map[string]struct {
		corefile string
		custom   map[string]string // nil: no coredns-custom
		engine   bool              // the engine writes the entry; else an older engine's block is in place
		wantPTR  string
	}{
		"AKS: the engine's key in coredns-custom":     {corefile: aks, custom: map[string]string{"log.override": "log\n"}, engine: true, wantPTR: serviceName},
		"kubeadm: the engine's block in the Corefile": {corefile: corefile, engine: true, wantPTR: serviceName},
		"AKS: an older engine's key, without no_reverse, renames the address": {corefile: aks,
			custom:  map[string]string{DefaultHostsKey: "hosts {\n    " + service.String() + " " + smtName + "\n    ttl 15\n    fallthrough\n}\n"},
			wantPTR: smtName + "."},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := fake.NewClientset(cm(ConfigMap, map[string]string{CorefileKey: loopbackOnly(t, tc.corefile)}))
			if tc.custom != nil {
				_, err := c.CoreV1().ConfigMaps("kube-system").Create(ctx, cm(CustomConfigMap, tc.custom), metav1.CreateOptions{})
				require.NoError(t, err)
			}
			if tc.engine {
				_, err := newCoreDNS(c).Ensure(ctx, smtName, service)
				require.NoError(t, err)
			}
			dir := t.TempDir()
			for f, content := range files {
				writeFile(t, filepath.Join(dir, f), content)
			}
			port := testkit.FreeDNSPort(t)
			writeConfig(t, c, dir, port)
			dns := startCoreDNS(t, bin, dir)
			require.Equal(t, service, dns.waitFor(ctx, t, port, smtName, service), "the update server's name resolves to the entry's address")

			arpa := "1.0.96.10.in-addr.arpa."
			got := askPTR(t, port, arpa)
			assert.Equal(t, []string{tc.wantPTR}, got, "PTR %s", arpa)
			t.Logf("proved: %s: a real CoreDNS answered %s with %s and the reverse query %s with %v", name, smtName, service, arpa, got)
		})
	}
}

// askPTR asks the DNS server on the loopback port for the PTR records of
// arpa once and returns their names.
func askPTR(t *testing.T, port int, arpa string) []string {
	t.Helper()
	name, err := dnsmessage.NewName(arpa)
	require.NoError(t, err)
	q := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: uint16(time.Now().UnixNano()), RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: name, Type: dnsmessage.TypePTR, Class: dnsmessage.ClassINET}},
	}
	packet, err := q.Pack()
	require.NoError(t, err)
	conn, err := net.Dial("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(2*time.Second)))
	_, err = conn.Write(packet)
	require.NoError(t, err)
	buf := make([]byte, 1500)
	n, err := conn.Read(buf)
	require.NoError(t, err)
	var m dnsmessage.Message
	require.NoError(t, m.Unpack(buf[:n]))
	var names []string
	for _, a := range m.Answers {
		if r, ok := a.Body.(*dnsmessage.PTRResource); ok {
			names = append(names, r.PTR.String())
		}
	}
	return names
}
