package sccoperator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/incluster/handover"
)

// CoreDNSBinEnv names the CoreDNS binary ClusterDNS runs; make test sets it
// (e2e/scripts/coredns-bin.sh builds it).
const CoreDNSBinEnv = "COREDNS_BIN"

// corednsNamespace holds the ConfigMaps ClusterDNS serves, as on kubeadm,
// kind and AKS.
const corednsNamespace = "kube-system"

// ClusterDNS is the cluster's DNS in the process tier, for the engine and
// the operator alike: a real CoreDNS process serving kube-system's CoreDNS
// ConfigMaps as the kubelet mounts them into CoreDNS's pod (the Corefile,
// and every coredns-custom key as a file under custom/, which AKS's
// Corefile imports). So a name resolves exactly when CoreDNS's own reading
// of what the engine wrote answers it; nothing of the engine's parses it.
//
// A change to the ConfigMaps reaches the files Delay after ClusterDNS first
// saw it, the way the kubelet's periodic sync and the reload plugin serve a
// new entry only a while later (the kind tier measures 30-110 s); before
// that the name is not answered. CoreDNS then reloads at once (SIGUSR1).
// Point the engine's HANDOVER_DNS_SERVER at Addr and the operator's
// HTTPS_PROXY at a Proxy with Route, so both see the same name at the same
// moment.
//
// What the process tier cannot run is left out of the Corefile CoreDNS
// serves: the plugins that reach beyond the machine or bind fixed ports
// (kubernetes, forward, health, ready, prometheus, loop); every server
// block binds 127.0.0.1 on Addr's port. A name without an entry gets
// SERVFAIL (no plugin after hosts), which a resolver treats as no answer.
type ClusterDNS struct {
	// Addr is 127.0.0.1:<port>, the value of HANDOVER_DNS_SERVER.
	Addr string

	client kubernetes.Interface
	delay  time.Duration
	bin    string
	dir    string
	port   int
	log    string
	stop   context.CancelFunc
	synced sync.WaitGroup

	mu      sync.Mutex
	proc    *controlplane.Process
	written map[string]string // the files as last written, by path under dir
	pending time.Time         // when a difference from written was first seen
	readErr error             // the last read of the ConfigMaps, nil once one works
	loadErr error             // the last write and reload of the files
}

// StartClusterDNS starts CoreDNS on a loopback port with the ConfigMaps as
// they are now (served at once), and a sync of their later changes every
// 200 ms. The test's cleanup stops both; when the test failed, it logs
// CoreDNS's output.
func StartClusterDNS(t testing.TB, client kubernetes.Interface, delay time.Duration) *ClusterDNS {
	t.Helper()
	bin := os.Getenv(CoreDNSBinEnv)
	if fi, err := os.Stat(bin); bin == "" || err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s=%q is not a CoreDNS binary: the process tier serves the cluster's DNS with a real CoreDNS (make test builds it with make coredns and sets %s)", CoreDNSBinEnv, bin, CoreDNSBinEnv)
	}
	d := &ClusterDNS{client: client, delay: delay, bin: bin, dir: t.TempDir(), port: testkit.FreeDNSPort(t)}
	d.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(d.port))
	d.log = filepath.Join(d.dir, "coredns.log")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	files, err := d.render(ctx)
	if err != nil {
		t.Fatalf("cluster DNS: %v", err)
	}
	if err := d.write(files); err != nil {
		t.Fatalf("cluster DNS: %v", err)
	}
	if err := d.start(ctx); err != nil {
		t.Fatalf("cluster DNS: %v\ncoredns output:\n%s", err, d.output())
	}
	syncCtx, stop := context.WithCancel(context.Background())
	d.stop = stop
	d.synced.Add(1)
	go d.syncLoop(syncCtx)
	t.Cleanup(func() {
		d.Close()
		if t.Failed() {
			t.Logf("cluster DNS (CoreDNS on %s) output:\n%s", d.Addr, d.output())
		}
	})
	return d
}

// Close stops the sync and CoreDNS.
func (d *ClusterDNS) Close() {
	if d.stop != nil {
		d.stop()
		d.synced.Wait()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.kill()
}

// Lookup asks CoreDNS for host's addresses as a pod would (the absolute
// name); none when CoreDNS does not answer it (NXDOMAIN, SERVFAIL, no
// reply), as a pod's resolver gives up.
func (d *ClusterDNS) Lookup(ctx context.Context, host string) []netip.Addr {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addrs, err := handover.ServerResolver(d.Addr)(qctx, strings.TrimSuffix(host, ".")+".")
	if err != nil {
		return nil
	}
	for i := range addrs {
		addrs[i] = addrs[i].Unmap()
	}
	return addrs
}

// Route routes CONNECT <name>:443 to the first address CoreDNS answers for
// name, on port (the fake update server's HTTPS port: on loopback it
// cannot listen on 443). A name CoreDNS does not answer is refused
// (ErrNoRoute), as a pod would fail to resolve it; so is every port but
// 443.
func (d *ClusterDNS) Route(port int) Route {
	return func(ctx context.Context, hostport string) (string, error) {
		host, p, err := net.SplitHostPort(hostport)
		if err != nil {
			return "", fmt.Errorf("proxy: %q: %w", hostport, err)
		}
		if p != "443" {
			return "", fmt.Errorf("proxy: %s: only port 443 is forwarded: %w", hostport, ErrNoRoute)
		}
		addrs := d.Lookup(ctx, host)
		if len(addrs) == 0 {
			return "", fmt.Errorf("proxy: the cluster's CoreDNS (%s) does not answer %s: %w", d.Addr, host, ErrNoRoute)
		}
		return netip.AddrPortFrom(addrs[0], uint16(port)).String(), nil
	}
}

// Forget serves the ConfigMaps as they are now, at once, from a reloaded
// CoreDNS (its cache empty), as after CoreDNS restarted: a case that reset
// them starts from them, and the next change waits its Delay afresh.
func (d *ClusterDNS) Forget() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d.mu.Lock()
	defer d.mu.Unlock()
	files, err := d.render(ctx)
	d.readErr = err
	if err == nil {
		d.apply(ctx, files)
	}
}

// apply writes files and has CoreDNS load them, recording the outcome; the
// caller holds mu.
func (d *ClusterDNS) apply(ctx context.Context, files map[string]string) {
	err := d.write(files)
	if err == nil {
		err = d.reload(ctx)
	}
	d.pending = time.Time{}
	d.loadErr = err
}

// Err is why the cluster's DNS is not serving the ConfigMaps as they are:
// the last read of them failed, or CoreDNS would not load the files last
// written (it keeps serving the ones before); nil when neither.
func (d *ClusterDNS) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return errors.Join(d.readErr, d.loadErr)
}

func (d *ClusterDNS) syncLoop(ctx context.Context) {
	defer d.synced.Done()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		d.syncOnce(ctx)
	}
}

// syncOnce writes the ConfigMaps' current files once they have differed
// from the written ones for Delay, and reloads CoreDNS.
func (d *ClusterDNS) syncOnce(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	files, err := d.render(rctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	if ctx.Err() != nil {
		return // stopping: not a failure of the read
	}
	if d.readErr = err; err != nil {
		return
	}
	if maps.Equal(files, d.written) {
		d.pending = time.Time{}
		return
	}
	if d.pending.IsZero() {
		d.pending = time.Now()
	}
	if time.Since(d.pending) < d.delay {
		return
	}
	d.apply(rctx, files)
}

// render is what the kubelet would mount from the ConfigMaps now: the
// Corefile and custom/<key> for each coredns-custom key, made loopback-only.
func (d *ClusterDNS) render(ctx context.Context) (map[string]string, error) {
	files := map[string]string{}
	cms := d.client.CoreV1().ConfigMaps(corednsNamespace)
	core, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		files["Corefile"] = loopbackCorefile(".:53 {\n    errors\n}\n", d.port)
	case err != nil:
		return nil, fmt.Errorf("read %s/%s: %w", corednsNamespace, coredns.ConfigMap, err)
	default:
		files["Corefile"] = loopbackCorefile(core.Data[coredns.CorefileKey], d.port)
	}
	custom, err := cms.Get(ctx, coredns.CustomConfigMap, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("read %s/%s: %w", corednsNamespace, coredns.CustomConfigMap, err)
	default:
		for k, v := range custom.Data {
			if strings.Contains(k, "/") {
				continue // not a file name: the kubelet would refuse the volume
			}
			if strings.HasSuffix(k, ".server") {
				v = loopbackCorefile(v, d.port)
			}
			files[filepath.Join("custom", k)] = v
		}
	}
	return files, nil
}

// write lays files out under dir, each replaced by a rename as the kubelet
// swaps a ConfigMap volume, and removes the custom/ files that are gone.
// The caller holds mu.
func (d *ClusterDNS) write(files map[string]string) error {
	if err := os.MkdirAll(filepath.Join(d.dir, "custom"), 0o755); err != nil {
		return err
	}
	for name, content := range files {
		path := filepath.Join(d.dir, name)
		if err := os.WriteFile(path+".tmp", []byte(content), 0o644); err != nil {
			return err
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			return err
		}
	}
	for name := range d.written {
		if _, ok := files[name]; !ok {
			if err := os.Remove(filepath.Join(d.dir, name)); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	d.written = files
	return nil
}

// start runs CoreDNS on dir/Corefile and waits until it answers. The
// caller holds mu or is the constructor.
func (d *ClusterDNS) start(ctx context.Context) error {
	cmd := exec.Command(d.bin, "-conf", filepath.Join(d.dir, "Corefile"))
	cmd.Dir = d.dir
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	proc, err := controlplane.StartProcess("coredns", d.log, cmd)
	if err != nil {
		return err
	}
	d.proc = proc
	for {
		if d.answers(ctx) {
			return nil
		}
		select {
		case <-proc.Done():
			return fmt.Errorf("CoreDNS exited at start")
		case <-ctx.Done():
			return fmt.Errorf("CoreDNS did not answer on %s: %w", d.Addr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// reload has CoreDNS load the written files (SIGUSR1) and waits until it
// says it did; a Corefile it refuses leaves the previous one serving, as in
// a pod, and is the error. The caller holds mu.
func (d *ClusterDNS) reload(ctx context.Context) error {
	before := strings.Count(d.output(), "Reloading complete")
	failedBefore := strings.Count(d.output(), "[ERROR] Restart failed")
	if err := d.proc.Signal(syscall.SIGUSR1); err != nil {
		return fmt.Errorf("reload CoreDNS: %w", err)
	}
	for {
		out := d.output()
		switch {
		case strings.Count(out, "Reloading complete") > before:
			return nil
		case strings.Count(out, "[ERROR] Restart failed") > failedBefore:
			return fmt.Errorf("CoreDNS refused the configuration: %s", lastLine(out, "[ERROR] Restart failed"))
		}
		select {
		case <-d.proc.Done():
			return fmt.Errorf("CoreDNS exited on reload: %w", d.proc.ExitErr())
		case <-ctx.Done():
			return fmt.Errorf("CoreDNS did not reload: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// answers is whether CoreDNS answers a query at all (any rcode).
func (d *ClusterDNS) answers(ctx context.Context) bool {
	q := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: 0x5eed, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName("ready.invalid."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}},
	}
	packet, err := q.Pack()
	if err != nil {
		return false
	}
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "udp", d.Addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := conn.Write(packet); err != nil {
		return false
	}
	buf := make([]byte, 512)
	n, err := conn.Read(buf)
	var h dnsmessage.Parser
	hdr, perr := h.Start(buf[:n])
	return err == nil && perr == nil && hdr.ID == q.Header.ID
}

// kill stops CoreDNS; the caller holds mu.
func (d *ClusterDNS) kill() {
	if d.proc == nil {
		return
	}
	_ = d.proc.Stop(10 * time.Second)
	d.proc = nil
}

// output is what CoreDNS has printed so far.
func (d *ClusterDNS) output() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

func lastLine(out, prefix string) string {
	lines := strings.Split(out, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], prefix) {
			return strings.TrimSpace(lines[i])
		}
	}
	return ""
}

// cannotRun are the plugins the process tier leaves out: they reach beyond
// the machine (kubernetes, forward) or bind fixed ports (health, ready,
// prometheus), would query the forwarder (loop), or would reload CoreDNS
// on their own (reload): the harness reloads it (SIGUSR1) when the kubelet
// would have synced the files, and the reload plugin's own restart racing
// that one leaves CoreDNS without its listener ("getting old listener
// file: use of closed network connection"), answering nothing.
var cannotRun = map[string]bool{"kubernetes": true, "forward": true, "health": true, "ready": true, "prometheus": true, "loop": true, "bind": true, "reload": true}

// loopbackCorefile is corefile as this machine may serve it: every server
// block on 127.0.0.1 at port, without the plugins of cannotRun. Every other
// line, the hosts blocks and imports included, stays as it was, so CoreDNS
// reads the engine's entries as a cluster's CoreDNS would. It reads
// lines and braces only: the tests' Corefiles open a block at the end of a
// line and close it on a line of its own, as CoreDNS's examples do.
func loopbackCorefile(corefile string, port int) string {
	var out []string
	depth := 0
	skipTo := -1 // while skipping a dropped plugin's block: the depth it ends at
	for _, line := range strings.Split(corefile, "\n") {
		code, _, _ := strings.Cut(line, "#")
		opens, closes := strings.Count(code, "{"), strings.Count(code, "}")
		fields := strings.Fields(code)
		start := depth
		depth += opens - closes
		if skipTo >= 0 {
			if depth <= skipTo {
				skipTo = -1
			}
			continue
		}
		switch {
		case start == 0 && opens > closes:
			// A server block's keys: each on port.
			var keys []string
			for _, f := range fields {
				if f == "{" {
					break
				}
				keys = append(keys, onPort(f, port))
			}
			out = append(out, strings.Join(keys, " ")+" {", "    bind 127.0.0.1")
		case start == 1 && len(fields) > 0 && cannotRun[fields[0]]:
			if opens > closes {
				skipTo = start
			}
		default:
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// onPort is a server block key (".:53", "example.org", "dns://x:53") on
// port.
func onPort(key string, port int) string {
	if i := strings.LastIndex(key, ":"); i >= 0 && !strings.HasSuffix(key[:i], "/") {
		if _, err := strconv.Atoi(key[i+1:]); err == nil {
			key = key[:i]
		}
	}
	return key + ":" + strconv.Itoa(port)
}
