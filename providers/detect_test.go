package providers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
)

// TestMain fails the package when a probe goroutine or connection outlives
// its test: Detect promises that nothing it starts survives it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Metadata documents shaped like the real ones (values invented).
const (
	azureInstanceDoc = `{"compute":{"azEnvironment":"AzurePublicCloud","location":"westeurope",` +
		`"vmId":"02aab8a4-74ef-476e-8182-f6d2ba4166a6","subscriptionId":"8d10da13-8125-4ba9-a717-bf7490507b3d"},"network":{}}`
	awsIdentityDoc = `{"accountId":"123456789012","architecture":"x86_64","availabilityZone":"eu-west-1a",` +
		`"imageId":"ami-0abcdef1234567890","instanceId":"i-1234567890abcdef0","instanceType":"m5.large","region":"eu-west-1"}`
	awsTokenValue = "AQAEAKm6XAvVZkD8Mv9gEFrJE5ey7vLsJG2bXvqmKZ1zDbOxTRBbhQ=="
)

// azureIMDS answers like Azure IMDS: the instance document only for the
// pinned api-version and with Metadata: true, 400 otherwise.
func azureIMDS(doc string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metadata/instance" || r.URL.Query().Get("api-version") != "2021-02-01" ||
			r.Header.Get("Metadata") != "true" || r.Header.Get("X-Forwarded-For") != "" {
			http.Error(w, `{"error":"Bad request"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		fmt.Fprint(w, doc)
	}
}

// gceMetadata answers like GCE's metadata server, which sets
// Metadata-Flavor: Google on every answer and refuses requests without it.
func gceMetadata(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Metadata-Flavor", "Google")
	if r.Header.Get("Metadata-Flavor") != "Google" {
		http.Error(w, "Missing Metadata-Flavor:Google header.", http.StatusForbidden)
		return
	}
	fmt.Fprint(w, "instance/\nproject/\n")
}

// ec2IMDS answers like EC2's metadata service. tokenStatus != 200 makes the
// token PUT fail with that status; tokensRequired refuses IMDSv1 with 401.
func ec2IMDS(doc string, tokenStatus int, tokensRequired bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/latest/api/token" && r.Method == http.MethodPut:
			if r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") == "" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			if tokenStatus != http.StatusOK {
				w.WriteHeader(tokenStatus)
				return
			}
			fmt.Fprint(w, awsTokenValue)
		case r.URL.Path == "/latest/dynamic/instance-identity/document" && r.Method == http.MethodGet:
			switch tok := r.Header.Get("X-aws-ec2-metadata-token"); {
			case tok == "" && tokensRequired, tok != "" && tok != awsTokenValue:
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			fmt.Fprint(w, doc)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}
}

// webServer is some other web server on the metadata address (a captive
// portal, a proxy's error page): 200 with the wrong content for everything.
func webServer(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html")
	fmt.Fprint(w, "<html><body>It works!</body></html>")
}

func serve(t testing.TB, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// hanging returns the base URL of a loopback listener that accepts
// connections and never answers, like a firewalled metadata address.
func hanging(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// refused returns the base URL of a loopback port nothing listens on.
func refused(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "http://" + addr
}

// none is an explicit "probe nothing for this cloud".
var none = []string{}

func TestDetectProof(t *testing.T) {
	tests := map[string]struct {
		cloud      Cloud // the cloud whose endpoint list gets the server
		handler    http.HandlerFunc
		want       Cloud // None: ErrNoCloud expected
		wantDetail string
	}{
		"azure instance document":              {Azure, azureIMDS(azureInstanceDoc), Azure, "azEnvironment=AzurePublicCloud location=westeurope"},
		"azure 200 without compute.vmId":       {Azure, azureIMDS(`{"compute":{"vmId":""}}`), None, ""},
		"azure 200 with compute as string":     {Azure, azureIMDS(`{"compute":"vmId"}`), None, ""},
		"azure 200 not UTF-8":                  {Azure, azureIMDS("{\"compute\":{\"vmId\":\"\xff\xfe\"}}"), None, ""},
		"azure document larger than limit":     {Azure, azureIMDS(`{"compute":{"vmId":"x"},"pad":"` + strings.Repeat("x", maxAzureInstance) + `"}`), None, ""},
		"gce metadata flavor header":           {GCP, gceMetadata, GCP, "Metadata-Flavor: Google"},
		"gcp 200 without the header":           {GCP, webServer, None, ""},
		"aws IMDSv2":                           {AWS, ec2IMDS(awsIdentityDoc, http.StatusOK, true), AWS, "IMDSv2 region=eu-west-1"},
		"aws IMDSv1 when the token PUT fails":  {AWS, ec2IMDS(awsIdentityDoc, http.StatusForbidden, false), AWS, "IMDSv1 region=eu-west-1"},
		"aws tokens required and PUT fails":    {AWS, ec2IMDS(awsIdentityDoc, http.StatusForbidden, true), None, ""},
		"aws document without i- instanceId":   {AWS, ec2IMDS(`{"instanceId":"vm-1","accountId":"1","region":"r"}`, http.StatusOK, false), None, ""},
		"aws document without region":          {AWS, ec2IMDS(`{"instanceId":"i-1","accountId":"1"}`, http.StatusOK, false), None, ""},
		"aws emulation with 200 on every path": {AWS, webServer, None, ""},
		"redirect is not followed": {Azure, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/elsewhere" {
				azureIMDS(azureInstanceDoc)(w, r)
				return
			}
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, None, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			base := serve(t, tc.handler)
			d := &Detector{AzureEndpoints: none, GCPEndpoints: none, AWSEndpoints: none, Budget: 5 * time.Second}
			switch tc.cloud {
			case Azure:
				d.AzureEndpoints = []string{base}
			case GCP:
				d.GCPEndpoints = []string{base}
			case AWS:
				d.AWSEndpoints = []string{base}
			}
			got, err := d.Detect(t.Context())
			if tc.want == None {
				require.ErrorIs(t, err, ErrNoCloud)
				assert.True(t, failure.IsPermanent(err))
				assert.Zero(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, Detection{Cloud: tc.want, Source: SourceIMDS, Endpoint: base, Detail: tc.wantDetail}, got)
		})
	}
}

// TestDetectGarbageNeverPanics points every cloud at servers that send
// what a broken or hostile peer might, and expects "not detected".
func TestDetectGarbageNeverPanics(t *testing.T) {
	bodies := map[string]string{
		"binary":         "\x00\x01\x02\xff\xfe\x7fELF",
		"truncated JSON": `{"compute":{"vmId":"abc"`,
		"JSON array":     `[1,2,3]`,
		"JSON null":      `null`,
		"deep nesting":   strings.Repeat("[", 100000),
		"wrong types":    `{"compute":{"vmId":42},"instanceId":["i-1"],"accountId":{},"region":true}`,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			base := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) }))
			d := &Detector{AzureEndpoints: []string{base}, GCPEndpoints: []string{base}, AWSEndpoints: []string{base}, Budget: 5 * time.Second}
			_, err := d.Detect(t.Context())
			assert.ErrorIs(t, err, ErrNoCloud)
		})
	}
}

func TestDetectPriority(t *testing.T) {
	// awsServed is closed once the AWS fake has handed out its identity
	// document; the slow Azure fake answers only then, so AWS is proven
	// first and only the priority can make Azure win.
	awsServed := make(chan struct{})
	var awsOnce sync.Once
	awsFirst := func(w http.ResponseWriter, r *http.Request) {
		ec2IMDS(awsIdentityDoc, http.StatusOK, false)(w, r)
		if r.URL.Path == awsIdentityPath {
			awsOnce.Do(func() { close(awsServed) })
		}
	}
	azureSecond := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-awsServed:
		case <-r.Context().Done():
			return
		}
		azureIMDS(azureInstanceDoc)(w, r)
	}
	tests := map[string]struct {
		azure, gcp, aws func(t *testing.T) string
		budget          time.Duration
		want            Cloud
		// quick: the answer is decided before the budget, and Detect must not
		// wait for it (checked with a budget far above any scheduling delay).
		quick bool
	}{
		"azure and aws both answer, aws first": {
			azure: srv(azureSecond), aws: srv(awsFirst),
			budget: 30 * time.Second, want: Azure, quick: true,
		},
		"azure proven returns without waiting for a hanging aws": {
			azure: srv(azureIMDS(azureInstanceDoc)), gcp: hangingURL, aws: hangingURL,
			budget: 30 * time.Second, want: Azure, quick: true,
		},
		"aws waits for a hanging azure until the budget ends": {
			azure: hangingURL, aws: srv(ec2IMDS(awsIdentityDoc, http.StatusOK, false)),
			budget: 200 * time.Millisecond, want: AWS,
		},
		"aws decided as soon as azure and gcp have failed": {
			azure: refusedURL, gcp: srv(webServer), aws: srv(ec2IMDS(awsIdentityDoc, http.StatusOK, false)),
			budget: 30 * time.Second, want: AWS, quick: true,
		},
		"gcp over aws": {
			gcp: srv(gceMetadata), aws: srv(ec2IMDS(awsIdentityDoc, http.StatusOK, false)),
			budget: 30 * time.Second, want: GCP, quick: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := &Detector{AzureEndpoints: none, GCPEndpoints: none, AWSEndpoints: none, Budget: tc.budget}
			if tc.azure != nil {
				d.AzureEndpoints = []string{tc.azure(t)}
			}
			if tc.gcp != nil {
				d.GCPEndpoints = []string{tc.gcp(t)}
			}
			if tc.aws != nil {
				d.AWSEndpoints = []string{tc.aws(t)}
			}
			start := time.Now()
			got, err := d.Detect(t.Context())
			elapsed := time.Since(start)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.Cloud)
			assert.Equal(t, SourceIMDS, got.Source)
			if tc.quick {
				assert.Less(t, elapsed, tc.budget/2, "Detect waited although the result was decided")
			} else {
				assert.Less(t, elapsed, tc.budget+time.Second)
			}
		})
	}
}

func srv(h http.HandlerFunc) func(t *testing.T) string {
	return func(t *testing.T) string { return serve(t, h) }
}
func hangingURL(t *testing.T) string { return hanging(t) }
func refusedURL(t *testing.T) string { return refused(t) }

// TestDetectBudget: a host whose metadata addresses swallow packets must be
// through in about one budget, not one per endpoint.
func TestDetectBudget(t *testing.T) {
	const budget = 200 * time.Millisecond
	d := &Detector{
		AzureEndpoints: []string{hanging(t)},
		GCPEndpoints:   []string{hanging(t), hanging(t), hanging(t)},
		AWSEndpoints:   []string{hanging(t), hanging(t)},
		Budget:         budget,
	}
	start := time.Now()
	_, err := d.Detect(t.Context())
	elapsed := time.Since(start)
	require.ErrorIs(t, err, ErrNoCloud)
	assert.True(t, failure.IsPermanent(err))
	// Generous slack: the point is "one budget, not six".
	assert.Less(t, elapsed, budget+time.Second)
	// Every endpoint that did not answer is named, with the budget.
	msgs := testkit.NewMessages(t)
	msgs.Varying = true
	msgs.Add("no endpoint answers within the budget", err)
}

func TestDetectDMI(t *testing.T) {
	hyperV := fstest.MapFS{
		"sys_vendor":        {Data: []byte("Microsoft Corporation\n")},
		"product_name":      {Data: []byte("Virtual Machine\n")},
		"chassis_asset_tag": {Data: []byte("4125-1193-8743-8362-0954-3411-02\n")},
	}
	tests := map[string]struct {
		fsys       fs.FS
		want       Cloud
		wantDetail string
	}{
		"azure tree":                       {os.DirFS("dmi/testdata/azure"), Azure, `sys_vendor="Microsoft Corporation" product_name="Virtual Machine" chassis_asset_tag="7783-7084-3265-9085-8269-3286-77"`},
		"gcp tree":                         {os.DirFS("dmi/testdata/gcp"), GCP, `sys_vendor="Google" product_name="Google Compute Engine" chassis_asset_tag=""`},
		"aws tree":                         {os.DirFS("dmi/testdata/aws"), AWS, `sys_vendor="Amazon EC2" product_name="m5.large" chassis_asset_tag="Amazon EC2"`},
		"baremetal tree":                   {os.DirFS("dmi/testdata/baremetal"), None, ""},
		"on-premises Hyper-V is not azure": {hyperV, None, ""},
		"azure chassis tag alone, other files unreadable": {
			fstest.MapFS{
				"sys_vendor/x":      {Data: []byte("directory where a file should be")},
				"product_name/x":    {Data: []byte("directory where a file should be")},
				"chassis_asset_tag": {Data: []byte("7783-7084-3265-9085-8269-3286-77\n")},
			},
			Azure, `sys_vendor="" product_name="" chassis_asset_tag="7783-7084-3265-9085-8269-3286-77"`,
		},
		"empty directory": {fstest.MapFS{}, None, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := &Detector{AzureEndpoints: none, GCPEndpoints: none, AWSEndpoints: none, DMI: tc.fsys}
			got, err := d.Detect(t.Context())
			if tc.want == None {
				require.ErrorIs(t, err, ErrNoCloud)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, Detection{Cloud: tc.want, Source: SourceDMI, Detail: tc.wantDetail}, got)
		})
	}
}

func TestDetectDmidecode(t *testing.T) {
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	tests := map[string]struct {
		run  func(ctx context.Context) (string, error)
		want Cloud
	}{
		"google manufacturer": {
			func(context.Context) (string, error) {
				return "# SMBIOS implementations newer than version 3.2.0 are not\n# fully supported.\nGoogle\n", nil
			},
			GCP,
		},
		"amazon manufacturer": {func(context.Context) (string, error) { return "Amazon EC2\n", nil }, AWS},
		"microsoft alone is not azure": {
			func(context.Context) (string, error) { return "Microsoft Corporation\n", nil }, None,
		},
		"missing binary tolerated": {
			func(context.Context) (string, error) { return "", fmt.Errorf("dmidecode: %w", exec.ErrNotFound) }, None,
		},
		"permission denied tolerated": {
			func(context.Context) (string, error) {
				return "", errors.New("dmidecode: exit status 1: /dev/mem: Permission denied")
			}, None,
		},
		"hang until the timeout tolerated": {
			func(ctx context.Context) (string, error) { <-ctx.Done(); return "", ctx.Err() }, None,
		},
		"hang ignoring the context tolerated": {
			func(context.Context) (string, error) { <-stuck; return "Google", nil }, None,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := &Detector{
				AzureEndpoints: none, GCPEndpoints: none, AWSEndpoints: none,
				Dmidecode: tc.run, DmidecodeTimeout: 100 * time.Millisecond,
			}
			start := time.Now()
			got, err := d.Detect(t.Context())
			assert.Less(t, time.Since(start), 100*time.Millisecond+time.Second)
			if tc.want == None {
				require.ErrorIs(t, err, ErrNoCloud)
				assert.True(t, failure.IsPermanent(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.Cloud)
			assert.Equal(t, SourceDmidecode, got.Source)
		})
	}
}

// TestNoCloudMessage: the error an operator sees on a machine that is not a
// cloud says what was tried and how each attempt ended.
func TestNoCloudMessage(t *testing.T) {
	azure, gcp, aws := refused(t), serve(t, http.HandlerFunc(webServer)), hanging(t)
	d := &Detector{
		AzureEndpoints: []string{azure},
		GCPEndpoints:   []string{gcp},
		AWSEndpoints:   []string{aws},
		Budget:         200 * time.Millisecond,
		DMI:            os.DirFS("dmi/testdata/baremetal"),
		Dmidecode: func(context.Context) (string, error) {
			return "", fmt.Errorf("dmidecode: %w", exec.ErrNotFound)
		},
	}
	_, err := d.Detect(t.Context())
	require.ErrorIs(t, err, ErrNoCloud)
	assert.True(t, failure.IsPermanent(err))
	msg := err.Error()
	for _, want := range []string{
		"imds azure " + azure + ": ", // with its dial error
		"imds gcp " + gcp + ": answer is not proof: HTTP 200 without Metadata-Flavor: Google",
		"imds aws " + aws + ": ", // with its timeout
		`dmi sys_vendor="Dell Inc." product_name="PowerEdge R640" chassis_asset_tag=""`,
		"dmidecode: not installed",
	} {
		assert.Contains(t, msg, want)
	}
}

func TestDetectInvalidEndpoint(t *testing.T) {
	for name, e := range map[string]string{
		"no scheme": "169.254.169.254",
		"path":      "http://169.254.169.254/metadata",
		"query":     "http://127.0.0.1?x=1",
		"other":     "ftp://127.0.0.1",
	} {
		t.Run(name, func(t *testing.T) {
			d := &Detector{AzureEndpoints: []string{e}, GCPEndpoints: none, AWSEndpoints: none}
			_, err := d.Detect(t.Context())
			require.ErrorIs(t, err, ErrInvalidEndpoint)
			assert.True(t, failure.IsPermanent(err))
			assert.ErrorIs(t, CheckEndpoint(e), ErrInvalidEndpoint)
		})
	}
	assert.NoError(t, CheckEndpoint("http://[::1]:8080/"))
}

// TestDetectCancelled: a shutdown during detection is not "no cloud", and
// not permanent.
func TestDetectCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	d := &Detector{AzureEndpoints: []string{hanging(t)}, GCPEndpoints: none, AWSEndpoints: none, Budget: 30 * time.Second,
		DMI: os.DirFS("dmi/testdata/azure")}
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := d.Detect(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrNoCloud)
	assert.False(t, failure.IsPermanent(err))
}

// TestDetectIgnoresProxy: with HTTP_PROXY set, the production client must
// still talk to the metadata server directly. Go computes the environment
// proxy once per process, so the check runs in a fresh child process that
// starts with the proxy variables set; the trap proxy lives here and fails
// the test if the child reaches it.
func TestDetectIgnoresProxy(t *testing.T) {
	if os.Getenv("PROVIDERS_TEST_PROXY_CHILD") == "1" {
		proxyChild(t)
		return
	}
	var hits atomic.Int32
	trap := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		t.Errorf("metadata request went through the proxy: %s %s", r.Method, r.URL)
		http.Error(w, "proxy", http.StatusBadGateway)
	}))
	imds := serve(t, azureIMDS(azureInstanceDoc))
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		t.Setenv(k, trap)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	t.Setenv("PROVIDERS_TEST_PROXY_CHILD", "1")
	t.Setenv("PROVIDERS_TEST_IMDS", strings.TrimPrefix(imds, "http://"))

	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestDetectIgnoresProxy$", "-test.v")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child test failed:\n%s", out)
	assert.Contains(t, string(out), "--- PASS: TestDetectIgnoresProxy")
	assert.Zero(t, hits.Load())
}

// proxyChild runs in the child process. The metadata host is a name that is
// not loopback (loopback is never proxied, which would make the trap
// pointless); the test dialer maps it to the fake IMDS on loopback, and
// passes every other address through, so a proxied request reaches the trap.
func proxyChild(t *testing.T) {
	const host = "metadata.test"
	imds := os.Getenv("PROVIDERS_TEST_IMDS")
	req, err := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
	require.NoError(t, err)
	proxy, err := http.ProxyFromEnvironment(req)
	require.NoError(t, err)
	require.NotNil(t, proxy, "the environment must route %s through the trap, or this test proves nothing", host)

	d := &Detector{
		AzureEndpoints: []string{"http://" + host},
		GCPEndpoints:   []string{"http://" + host},
		AWSEndpoints:   []string{"http://" + host},
		Budget:         5 * time.Second,
		dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == host+":80" {
				addr = imds
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	got, err := d.Detect(t.Context())
	require.NoError(t, err)
	assert.Equal(t, Azure, got.Cloud)
}

func TestRunDmidecode(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("needs sleep for the hanging fake dmidecode")
	}
	// What a failed dmidecode says reaches the detection's log: compared
	// whole with testdata/messages/TestRunDmidecode.txt.
	msgs := testkit.NewMessages(t)
	tests := map[string]struct {
		script   string // "" installs no dmidecode at all
		timeout  time.Duration
		want     string
		wantIs   error
		wantExit bool // dmidecode ran and failed; its stderr must reach the error
	}{
		"prints the manufacturer": {script: `echo "Google"`, timeout: 5 * time.Second, want: "Google\n"},
		"not installed":           {timeout: 5 * time.Second, wantIs: exec.ErrNotFound},
		"permission denied": {
			script: `echo "/dev/mem: Permission denied" >&2; exit 1`, timeout: 5 * time.Second, wantExit: true,
		},
		"hangs": {script: `exec sleep 30`, timeout: 100 * time.Millisecond, wantIs: context.DeadlineExceeded},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.script != "" {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "dmidecode"), []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755))
			}
			t.Setenv("PATH", dir+string(os.PathListSeparator)+filepath.Dir(sleep))
			ctx, cancel := context.WithTimeout(t.Context(), tc.timeout)
			defer cancel()
			start := time.Now()
			got, err := RunDmidecode(ctx)
			assert.Less(t, time.Since(start), tc.timeout+2*time.Second)
			switch {
			case tc.wantIs != nil:
				require.ErrorIs(t, err, tc.wantIs)
				msgs.Add(name, err)
			case tc.wantExit:
				var exitErr *exec.ExitError
				require.ErrorAs(t, err, &exitErr)
				msgs.Add(name, err) // with dmidecode's own reason
			default:
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
			}
		})
	}
}

// The fuzz targets feed the proof parsers what a peer on the metadata
// address could send. Parsing must never panic, and an accepted document
// must satisfy the proof.

func FuzzParseAzureInstance(f *testing.F) {
	f.Add([]byte(azureInstanceDoc))
	f.Add([]byte(`{"compute":{"vmId":""}}`))
	f.Add([]byte(`<html>It works!</html>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		inst, err := parseAzureInstance(body)
		if err == nil {
			assert.NotEmpty(t, strings.TrimSpace(inst.Compute.VMID))
		}
	})
}

func FuzzParseAWSIdentity(f *testing.F) {
	f.Add([]byte(awsIdentityDoc))
	f.Add([]byte(`{"instanceId":"i-","accountId":"1","region":"r"}`))
	f.Add([]byte("\xff\xfe{}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		id, err := parseAWSIdentity(body)
		if err == nil {
			assert.True(t, strings.HasPrefix(id.InstanceID, "i-") && len(id.InstanceID) > 2)
			assert.NotEmpty(t, strings.TrimSpace(id.AccountID))
			assert.NotEmpty(t, strings.TrimSpace(id.Region))
		}
	})
}
