package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// logLines parses the engine's JSON log lines; summary is the last one.
var (
	logLines = testkit.LogLines
	summary  = testkit.Summary
)

func TestEngineAgainstFakeCloud(t *testing.T) {
	tests := map[string]struct {
		fault       string
		wantCode    int
		wantOutcome string
		wantAddress string
		wantInLog   []string
		// env is added to the cloud's (the chart's own variables).
		env []string
		// proved, when set, is logged as the proved: line of a passing case.
		proved string
	}{
		"healthy cloud":         {wantCode: 0, wantOutcome: "registered"},
		"wrong plan":            {fault: "wrong-plan", wantCode: 2, wantOutcome: "failed", wantInLog: []string{`expected \"premium\", got \"premium-other\"`}},
		"no plan":               {fault: "no-plan", wantCode: 2, wantOutcome: "failed"},
		"tampered document":     {fault: "tampered-document", wantCode: 2, wantOutcome: "failed", wantInLog: []string{"signature over the content does not verify"}},
		"unknown root":          {fault: "unknown-root", wantCode: 2, wantOutcome: "failed"},
		"ARM 403":               {fault: "arm-403", wantCode: 2, wantOutcome: "failed", wantInLog: []string{"role"}},
		"wrong fingerprint":     {fault: "wrong-fingerprint", wantCode: 1, wantOutcome: "failed", wantInLog: []string{"fingerprint"}},
		"region server down":    {fault: "region-down", wantCode: 0, wantOutcome: "registered"},
		"update server offline": {fault: "update-server-offline", wantCode: 0, wantOutcome: "registered", wantAddress: "127.0.0.5"},
		"IPv6 black hole":       {fault: "ipv6-blackhole", wantCode: 0, wantOutcome: "registered", wantAddress: "127.0.0.4"},
		"IMDS throttles":        {fault: "imds-429", wantCode: 0, wantOutcome: "registered"},
		// AKS's IMDS restriction: every connect to IMDS hangs, as a
		// non-hostNetwork pod's does; detection falls back to DMI (Azure),
		// and phase 2 stops for good, naming the cause and the chart value.
		"IMDS restricted": {fault: "imds-restricted", wantCode: 2, wantOutcome: "failed",
			wantInLog: []string{`"source":"dmi"`, "instance metadata unreachable from this pod", "AKS's IMDS restriction", "--set hostNetwork=true"},
			proved:    "IMDS restricted (every connect to IMDS dropped, DMI says Azure): exit 2, permanent, the error names AKS's IMDS restriction and the chart value hostNetwork=true"},
		// The same on a Marketplace install (the chart says so in
		// RELEASE_MANAGER): Azure's command for the extension, never a
		// helm upgrade Azure would revert, and the reimage step.
		"IMDS restricted on a Marketplace install": {fault: "imds-restricted", wantCode: 2, wantOutcome: "failed",
			env: []string{"RELEASE_MANAGER=azure-extension", "RELEASE_NAME=suse-registration"},
			wantInLog: []string{"AKS's IMDS restriction",
				"(az k8s-extension update --resource-group rg-fake --cluster-name aks-fake --cluster-type managedClusters --name suse-registration --configuration-settings hostNetwork=true --yes)",
				"then az aks upgrade --node-image-only"},
			proved: "IMDS restricted on a Marketplace install: the verdict gives az k8s-extension update … --configuration-settings hostNetwork=true --yes for the extension and the node-image reimage"},
		// Off any cloud: every metadata endpoint a black hole, DMI a
		// bare-metal server; detection gives up after its budget.
		"off cloud": {fault: "off-cloud", wantCode: 2, wantOutcome: "failed",
			wantInLog: []string{`"failedPhase":"detect"`, "Dell Inc."}},
		"ARM throttles": {fault: "arm-429", wantCode: 0, wantOutcome: "registered"},
		"cached nonce":  {fault: "cached-nonce", wantCode: 0, wantOutcome: "registered"},
		"extension of another cluster": {fault: "other-cluster", wantCode: 2, wantOutcome: "failed",
			wantInLog: []string{"extension belongs to another cluster", "EXTENSION_RESOURCE_ID points at another cluster's extension"}},
		"identity may not read the cluster": {fault: "cluster-403", wantCode: 2, wantOutcome: "failed",
			// The engine's own hint, not the fake's 403 body it quotes.
			wantInLog: []string{"may read the extension but not its managed cluster", "Reader on the cluster grants both reads"}},
		// A wrong node clock is transient in both directions: exit 1, which
		// the Job retries (TestProve shows the retry succeeding once the
		// clock is right).
		"node clock behind": {fault: "node-clock-behind", wantCode: 1, wantOutcome: "failed",
			wantInLog: []string{"attested document dated ahead of the node clock", "check the node clock: it is behind"}},
		"node clock ahead": {fault: "node-clock-ahead", wantCode: 1, wantOutcome: "failed",
			wantInLog: []string{"attested document expired", "check the node clock: it is ahead"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := harness.StartCloud(t, tc.fault)
			res := harness.RunEngine(t, context.Background(), append(slices.Concat(c.Env, tc.env), "REGISTRATION_CODE=E2E-CODE"), "--dry-run")
			require.Equal(t, tc.wantCode, res.Code, res.String())
			for _, want := range tc.wantInLog {
				if strings.Contains(want, "k8s-extension") {
					assert.NotContains(t, res.Stderr, "helm upgrade", "no helm upgrade on a release Azure owns")
				}
			}
			s := summary(t, res.Stderr)
			assert.Equal(t, tc.wantOutcome, s["outcome"], res.String())
			if tc.wantAddress != "" {
				assert.Equal(t, tc.wantAddress, s["address"])
			}
			for _, want := range tc.wantInLog {
				assert.Contains(t, res.Stderr, want)
			}
			if tc.wantCode == 0 {
				var secret struct {
					StringData map[string]string `json:"stringData"`
				}
				require.NoError(t, yaml.Unmarshal([]byte(strings.SplitN(res.Stdout, "\n", 2)[1]), &secret), res.Stdout)
				assert.Equal(t, "https://smt-azure.susecloud.net", secret.StringData["registrationUrl"])
				assert.Equal(t, "online", secret.StringData["registrationType"])
				assert.Contains(t, secret.StringData["registrationUrlCert"], "BEGIN CERTIFICATE")
				assert.Regexp(t, `^REDACTED`, secret.StringData["regCode"])
				assert.Regexp(t, `^REDACTED`, secret.StringData["instanceData"])
			} else {
				assert.Empty(t, res.Stdout, "a failed run prints no Secret")
			}
			if tc.proved != "" && !t.Failed() {
				t.Logf("proved: %s (process tier, in %s)", tc.proved, res.Took.Round(time.Millisecond))
			}
		})
	}
}

// TestSecretsNeverLeak runs a whole registration at DEBUG with a known
// registration code and asserts that neither it, nor the federated token,
// nor the ARM access token, nor the attested document's signature appears
// in any log line or in the dry run's output.
func TestSecretsNeverLeak(t *testing.T) {
	c := harness.StartCloud(t)
	const regCode = "LEAKCHECK-REGCODE-7f3a9c"
	env := append(c.Env, "REGISTRATION_CODE="+regCode, "LOG_LEVEL=DEBUG")

	out := filepath.Join(t.TempDir(), "secret.yaml")
	full := harness.RunEngine(t, context.Background(), env, "--output", out)
	require.Equal(t, 0, full.Code, full.String())
	dry := harness.RunEngine(t, context.Background(), env, "--dry-run")
	require.Equal(t, 0, dry.Code, dry.String())

	manifest, err := os.ReadFile(out)
	require.NoError(t, err)
	info, err := os.Stat(out)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the output file holds the registration code")
	signature := regexp.MustCompile(`\\"signature\\": \\"([^\\]+)\\"|"signature": "([^"]+)"`).FindStringSubmatch(string(manifest))
	require.NotNil(t, signature, "the output file carries the attested document: %s", manifest)
	sig := signature[1] + signature[2]

	secrets := map[string]string{
		"registration code":  regCode,
		"federated token":    c.File(t, "token"),
		"ARM access token":   c.File(t, "access-token"),
		"document signature": sig[:64],
	}
	assert.Contains(t, string(manifest), regCode, "--output writes the real code")
	assert.Greater(t, strings.Count(full.Stderr, "\n")+strings.Count(dry.Stderr, "\n"), 20, "DEBUG logging is on")
	for what, value := range secrets {
		for name, text := range map[string]string{"logs of --output": full.Stderr, "logs of --dry-run": dry.Stderr, "dry-run output": dry.Stdout, "stdout of --output": full.Stdout} {
			assert.NotContains(t, text, value, "%s leaked into the %s", what, name)
		}
	}
}

func TestOutputFileUnchangedOnSecondRun(t *testing.T) {
	c := harness.StartCloud(t)
	out := filepath.Join(t.TempDir(), "secret.yaml")
	env := append(c.Env, "REGISTRATION_CODE=E2E-CODE")
	first := harness.RunEngine(t, context.Background(), env, "--output", out)
	require.Equal(t, 0, first.Code, first.String())
	assert.Equal(t, "registered", summary(t, first.Stderr)["outcome"])
	before, err := os.ReadFile(out)
	require.NoError(t, err)

	info, err := os.Stat(out)
	require.NoError(t, err)

	// Same findings a minute later (IMDS serves the same document for a
	// nonce): the file is complete, and left exactly as it was.
	second := harness.RunEngine(t, context.Background(), env, "--output", out)
	require.Equal(t, 0, second.Code, second.String())
	assert.Equal(t, "unchanged", summary(t, second.Stderr)["outcome"])
	after, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after))
	info2, err := os.Stat(out)
	require.NoError(t, err)
	assert.Equal(t, info.ModTime(), info2.ModTime(), "an unchanged registration is not rewritten")

	var s struct {
		Kind       string            `json:"kind"`
		StringData map[string]string `json:"stringData"`
	}
	require.NoError(t, yaml.Unmarshal(after, &s))
	assert.Equal(t, "Secret", s.Kind)
	assert.Len(t, s.StringData, 5)
}

func TestSIGTERMMidRun(t *testing.T) {
	// A slow IMDS holds phases 1 and 2 for seconds: time enough to stop it.
	// (An IPv6 black hole no longer does: phase 4 races past it.)
	c := harness.StartCloud(t, "slow-imds")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait, err := harness.StartEngine(ctx, c.Env, "--dry-run")
	require.NoError(t, err)
	time.Sleep(700 * time.Millisecond)
	cancel() // SIGTERM, as from a kubelet
	res, err := wait()
	require.NoError(t, err, res.Stderr)
	assert.Equal(t, 143, res.Code, res.Stderr)
	assert.Empty(t, res.Stdout, "nothing half-written")
	assert.Contains(t, res.Stderr, "terminated by signal")
}

// managedIdentityEnv turns the fake cloud's workload identity environment
// into what the chart renders for a Marketplace install: the mode and the
// extension's client ID, and none of the webhook's variables.
func managedIdentityEnv(env []string, clientID string) []string {
	var out []string
	for _, kv := range env {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE":
			continue
		}
		out = append(out, kv)
	}
	return append(out, "AZURE_CREDENTIAL_MODE=managed-identity", "AZURE_CLIENT_ID="+clientID)
}

// TestEngineManagedIdentity runs the binary in managed-identity mode: the
// ARM token comes from the fake IMDS's /metadata/identity/oauth2/token.
func TestEngineManagedIdentity(t *testing.T) {
	tests := map[string]struct {
		fault     string
		wantCode  int
		wantInLog []string
		// wantTokenRequests is how many token requests IMDS answered.
		wantTokenRequests int32
	}{
		"token from IMDS":              {wantCode: 0, wantTokenRequests: 1, wantInLog: []string{`"credentialMode":"managed-identity"`}},
		"IMDS throttles, then a token": {fault: "identity-token-429", wantCode: 0, wantTokenRequests: 2, wantInLog: []string{`"credentialMode":"managed-identity"`}},
		"identity not found": {fault: "identity-not-found", wantCode: 2, wantTokenRequests: 1,
			wantInLog: []string{"AZURE_CLIENT_ID=" + fakecloud.DefaultAzureConfig().ManagedIdentityClientID, "global.azure.identity.clientId", "Identity not found"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := harness.StartCloud(t, tc.fault)
			env := managedIdentityEnv(c.Env, fakecloud.DefaultAzureConfig().ManagedIdentityClientID)
			res := harness.RunEngine(t, context.Background(), append(env, "REGISTRATION_CODE=E2E-CODE"), "--dry-run")
			require.Equal(t, tc.wantCode, res.Code, res.String())
			s := summary(t, res.Stderr)
			if tc.wantCode == 0 {
				assert.Equal(t, "registered", s["outcome"], res.String())
				assert.Contains(t, res.Stdout, "registrationUrl")
			} else {
				assert.Equal(t, "prove", s["failedPhase"], res.String())
				assert.Empty(t, res.Stdout, "a failed run prints no Secret")
			}
			for _, want := range tc.wantInLog {
				assert.Contains(t, res.Stderr, want)
			}
			assert.Equal(t, tc.wantTokenRequests, identityTokenRequests(t, c), "token requests IMDS answered")
		})
	}
}

// identityTokenRequests asks the fake cloud process how many
// managed-identity token requests its IMDS answered.
func identityTokenRequests(t *testing.T, c harness.Cloud) int32 {
	t.Helper()
	resp, err := http.Get(c.Value(t, "AZURE_IMDS_ENDPOINT") + "/fakecloud/identity-token-requests")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var got struct{ Count int32 }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	return got.Count
}

// TestDONOTMODIFYIsPermanent runs the binary as a Marketplace bundle
// rendered outside Azure would start it: the values Azure fills in are
// still DONOTMODIFY. It stops at load, exit 2, naming each of them.
func TestDONOTMODIFYIsPermanent(t *testing.T) {
	c := harness.StartCloud(t)
	env := managedIdentityEnv(c.Env, "DONOTMODIFY")
	env = append(env, "EXTENSION_RESOURCE_ID=DONOTMODIFY", "MARKETPLACE_PLAN_ID=DONOTMODIFY")
	res := harness.RunEngine(t, context.Background(), env, "--dry-run")
	assert.Equal(t, 2, res.Code, res.String())
	s := summary(t, res.Stderr)
	assert.Equal(t, "load-config", s["failedPhase"])
	for _, name := range []string{"AZURE_CLIENT_ID", "EXTENSION_RESOURCE_ID", "MARKETPLACE_PLAN_ID"} {
		assert.Contains(t, s["error"], name+`="DONOTMODIFY": not filled in by Azure`, res.String())
	}
	assert.NotContains(t, res.Stderr, "registration-engine starting", "nothing runs on a placeholder")
	assert.Empty(t, res.Stdout)
}

func TestBrokenConfigReportsEveryProblem(t *testing.T) {
	res := harness.RunEngine(t, context.Background(), []string{
		"VERIFY_RETRY_MAX=abc", "K8S_RETRY_MAX=0", "RUN_DEADLINE=forever", "ARM_ENDPOINT=ftp://x", "REGISTRATION_CODE=DONT-SHOW-ME",
	})
	assert.Equal(t, 2, res.Code)
	s := summary(t, res.Stderr)
	for _, want := range []string{`VERIFY_RETRY_MAX="abc"`, `K8S_RETRY_MAX="0"`, `RUN_DEADLINE="forever"`, `ARM_ENDPOINT="ftp://x"`} {
		assert.Contains(t, s["error"], want)
	}
	assert.NotContains(t, res.Stderr+res.Stdout, "DONT-SHOW-ME")
}

// The engine checks every setting and the region servers' file before its
// first request. A trap answers on every endpoint the run could reach
// (metadata, Entra, ARM, the region servers, the API server) and fails the
// test when anything arrives: a wrong retry bound, a malformed extension ID
// and a broken file must be reported together, with exit 2, and cost the
// peers nothing.
func TestBadSettingsStopBeforeAnyRequest(t *testing.T) {
	var hits atomic.Int32
	trapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		t.Errorf("request sent before the settings were checked: %s %s%s", r.Method, r.Host, r.URL)
		http.Error(w, "trap", http.StatusTeapot)
	})
	trap := httptest.NewServer(trapped)
	defer trap.Close()
	tlsTrap := httptest.NewTLSServer(trapped)
	defer tlsTrap.Close()

	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	trapURL, err := url.Parse(tlsTrap.URL)
	require.NoError(t, err)
	cfg := write("regionserverclnt.cfg", "[server]\napi = regionInfo\nregionsrv = "+trapURL.Hostname()+", smt}.example\n")
	kubeconfig := write("kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: trap, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: trap, user: {token: t}}]
contexts: [{name: trap, context: {cluster: trap, user: trap}}]
current-context: trap
`, tlsTrap.URL))
	res := harness.RunEngine(t, context.Background(), []string{
		"VERIFY_RETRY_MAX=21", "EXTENSION_RESOURCE_ID=x/../y", "REGIONSRV_CONFIG=" + cfg,
		"AZURE_IMDS_ENDPOINT=" + trap.URL, "GCP_METADATA_ENDPOINTS=" + trap.URL, "AWS_IMDS_ENDPOINTS=" + trap.URL,
		"ARM_ENDPOINT=" + tlsTrap.URL, "AZURE_AUTHORITY_HOST=" + tlsTrap.URL, "REGION_SERVER_PORT=" + trapURL.Port(),
		"AZURE_CLIENT_ID=c", "AZURE_TENANT_ID=t", "AZURE_FEDERATED_TOKEN_FILE=" + write("token", "t"),
		"MARKETPLACE_PUBLISHER_ID=p", "MARKETPLACE_OFFER_ID=o", "MARKETPLACE_PLAN_ID=p",
		"DMI_DIR_PATH=../providers/dmi/testdata/azure", "KUBECONFIG=" + kubeconfig,
	})
	assert.Equal(t, 2, res.Code, res.String())
	s := summary(t, res.Stderr)
	assert.Equal(t, "load-config", s["failedPhase"])
	for _, want := range []string{
		`VERIFY_RETRY_MAX="21": want a whole number from 1 to 20`,
		`EXTENSION_RESOURCE_ID="x/../y"`, `".." segment is not allowed`,
		"REGIONSRV_CONFIG: regionconfig: " + cfg, "certLocation", `"smt}.example"`,
	} {
		assert.Contains(t, s["error"], want)
	}
	assert.Zero(t, hits.Load(), "requests that reached a peer")
}

// testRegionConfig writes a valid regionserverclnt.cfg whose only region
// server is a closed loopback port, for runs that must get past the
// settings check without a fake cloud.
func testRegionConfig(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "regionserverclnt.cfg")
	require.NoError(t, os.WriteFile(path, []byte("[server]\napi = regionInfo\ncertLocation = /nonexistent\nregionsrv = 127.0.0.1\n"), 0o600))
	return path
}

func TestNoCloudIsPermanent(t *testing.T) {
	// Every metadata endpoint is a closed loopback port; DMI says bare metal.
	dmi := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dmi, "sys_vendor"), []byte("Dell Inc.\n"), 0o644))
	closed := "http://127.0.0.1:9"
	res := harness.RunEngine(t, context.Background(), []string{
		"AZURE_IMDS_ENDPOINT=" + closed, "GCP_METADATA_ENDPOINTS=" + closed, "AWS_IMDS_ENDPOINTS=" + closed,
		"DMI_DIR_PATH=" + dmi, "DETECT_BUDGET=500ms", "REGIONSRV_CONFIG=" + testRegionConfig(t),
	}, "--dry-run")
	assert.Equal(t, 2, res.Code, res.String())
	s := summary(t, res.Stderr)
	assert.Equal(t, "detect", s["failedPhase"])
	assert.Contains(t, s["error"], "Dell Inc.")
}

func TestHelpAndVersion(t *testing.T) {
	help := harness.RunEngine(t, context.Background(), nil, "--help")
	assert.Equal(t, 0, help.Code)
	for _, want := range []string{"--registration-code", "REGISTRATION_CODE | REG_CODE | REGCODE", "EXTENSION_RESOURCE_ID", "Exit codes"} {
		assert.Contains(t, help.Stdout, want)
	}
	version := harness.RunEngine(t, context.Background(), nil, "--version")
	assert.Equal(t, 0, version.Code)
	assert.True(t, strings.HasPrefix(version.Stdout, "registration-engine "))
}

func TestAttestationInspect(t *testing.T) {
	c := harness.StartCloud(t)
	out := filepath.Join(t.TempDir(), "secret.yaml")
	res := harness.RunEngine(t, context.Background(), append(c.Env, "REGISTRATION_CODE=E2E-INSPECT-CODE"), "--output", out)
	require.Equal(t, 0, res.Code, res.String())
	var s struct {
		StringData map[string]string `json:"stringData"`
	}
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &s))
	doc := filepath.Join(t.TempDir(), "document.xml")
	require.NoError(t, os.WriteFile(doc, []byte(s.StringData["instanceData"]), 0o600))
	args := []string{"attestation", "inspect", "--offline", "--roots", filepath.Join(c.Dir, "attestation-roots.pem"),
		"--intermediates", filepath.Join(c.Dir, "attestation-intermediate.pem")}

	good := harness.RunEngine(t, context.Background(), nil, append(args, doc)...)
	assert.Equal(t, 0, good.Code, good.String())
	assert.Contains(t, good.Stdout, `"nonce"`)

	// One character of the signature changed: the PKCS#7 no longer verifies.
	sig := regexp.MustCompile(`"signature": "([^"]{200})`).FindStringSubmatchIndex(s.StringData["instanceData"])
	require.NotNil(t, sig)
	bad := []byte(s.StringData["instanceData"])
	i := sig[3] - 20
	if bad[i] == 'A' {
		bad[i] = 'B'
	} else {
		bad[i] = 'A'
	}
	require.NoError(t, os.WriteFile(doc, bad, 0o600))
	tampered := harness.RunEngine(t, context.Background(), nil, append(args, doc)...)
	assert.Equal(t, 2, tampered.Code, tampered.String())
}

// TestSecretsNeverLeakOnFailure runs failing registrations at DEBUG and
// asserts that no secret reaches a log line or stdout on the way out: Entra
// and ARM error bodies, an apply the API server refuses with a message that
// quotes what it was sent (as an admission webhook may), and a permanent
// failure in each phase that has one (phase 5, the address race, fails
// only transiently: its addresses passed phase 4). Each secret is looked
// for as it is and base64-encoded, as a Secret's data carries it.
func TestSecretsNeverLeakOnFailure(t *testing.T) {
	const regCode = "LEAKCHECK-REGCODE-F41L"
	c := harness.StartCloud(t)
	forbidden := harness.StartCloud(t, "arm-403")

	// The document the fake IMDS signs for this deployment is the same for
	// every run within minutes; a successful run shows it.
	out := filepath.Join(t.TempDir(), "secret.yaml")
	ok := harness.RunEngine(t, context.Background(), append(c.Env, "REGISTRATION_CODE="+regCode), "--output", out)
	require.Equal(t, 0, ok.Code, ok.String())
	manifest, err := os.ReadFile(out)
	require.NoError(t, err)
	m := regexp.MustCompile(`\\"signature\\": \\"([^\\]+)\\"|"signature": "([^"]+)"`).FindStringSubmatch(string(manifest))
	require.NotNil(t, m, string(manifest))
	sig := m[1] + m[2]

	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	const foreignToken = "LEAKCHECK-FOREIGN-FEDERATED-TOKEN-0b5e"
	bareMetal := filepath.Join(dir, "dmi")
	require.NoError(t, os.MkdirAll(bareMetal, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bareMetal, "sys_vendor"), []byte("Dell Inc.\n"), 0o644))
	noCerts := filepath.Join(dir, "no-certs")
	require.NoError(t, os.MkdirAll(noCerts, 0o755))
	cfg := c.File(t, "regionserverclnt.cfg")
	apiServer := refusingAPIServer(t)
	// The code an earlier run (or the operator's admin) left in the Secret,
	// kept by a run with none configured.
	const keptCode = "LEAKCHECK-KEPT-REGCODE-9c1d"
	flaky := fakeAPIServer(t, apiServerScript{unavailable: 1})
	kept := fakeAPIServer(t, apiServerScript{keptCode: keptCode})
	job := []string{"JOB_NAME=registration-engine-manual", "JOB_UID=6a0e3c3e-0000-4000-8000-000000000001"}

	tests := map[string]struct {
		cloud      harness.Cloud
		env        []string
		args       []string
		noCode     bool     // no REGISTRATION_CODE: the Secret's is kept
		api        *fakeAPI // whose Events are checked too
		wantCode   int
		wantPhase  string
		wantInLogs string // proves the failure path was the one taken
	}{
		"Entra refuses the federated token": {
			cloud: c, env: []string{"AZURE_FEDERATED_TOKEN_FILE=" + write("foreign-token", foreignToken)},
			wantCode: 2, wantPhase: "prove", wantInLogs: "AADSTS70021",
		},
		"ARM answers 403 with its error body": {
			cloud: forbidden, wantCode: 2, wantPhase: "prove", wantInLogs: "AuthorizationFailed",
		},
		"phase 1: no cloud": {
			cloud: c, env: []string{"AZURE_IMDS_ENDPOINT=http://127.0.0.1:9", "GCP_METADATA_ENDPOINTS=http://127.0.0.1:9",
				"AWS_IMDS_ENDPOINTS=http://127.0.0.1:9", "DMI_DIR_PATH=" + bareMetal, "DETECT_BUDGET=500ms"},
			wantCode: 2, wantPhase: "detect", wantInLogs: "Dell Inc.",
		},
		"phase 2: plan mismatch": {
			cloud: c, env: []string{"MARKETPLACE_PLAN_ID=another-plan"}, wantCode: 2, wantPhase: "prove", wantInLogs: "marketplace plan mismatch",
		},
		"phase 3: broken regionserverclnt.cfg": {
			cloud: c, env: []string{"REGIONSRV_CONFIG=" + write("broken.cfg", "[server]\nthis is not ini\n")},
			// Checked at load with every other setting, before the JSON
			// logger exists: the one stderr line must be as clean.
			wantCode: 2, wantInLogs: "not a valid INI file",
		},
		"phase 4: no pinned region-server certificate": {
			cloud: c, env: []string{"REGIONSRV_CONFIG=" + write("no-certs.cfg", regexp.MustCompile(`(?m)^certLocation = .*$`).ReplaceAllString(cfg, "certLocation = "+noCerts))},
			wantCode: 2, wantPhase: "find-update-server", wantInLogs: "pinned certificate unusable",
		},
		"phase 6: the API server refuses the apply, quoting it": {
			cloud: c, env: []string{"KUBECONFIG=" + apiServer, "IN_CLUSTER_DNS=false", "POD_NAME=leakcheck"},
			wantCode: 2, wantPhase: "write-secret", wantInLogs: "denied the request",
		},
		"phase 6: a webhook unavailable (503, quoting the apply), then the apply succeeds": {
			cloud: c, env: append([]string{"KUBECONFIG=" + flaky.kubeconfig, "IN_CLUSTER_DNS=false", "POD_NAME=leakcheck"}, job...),
			api: &flaky, wantCode: 0, wantInLogs: "kubernetes request failed, retrying",
		},
		"phase 6: no code configured, the kept one quoted by a denied apply": {
			cloud: c, env: append([]string{"KUBECONFIG=" + kept.kubeconfig, "IN_CLUSTER_DNS=false", "POD_NAME=leakcheck"}, job...),
			noCode: true, api: &kept, wantCode: 2, wantPhase: "write-secret", wantInLogs: "denied the request",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			env := append(slices.Clone(tc.cloud.Env), "LOG_LEVEL=DEBUG")
			if !tc.noCode {
				env = append(env, "REGISTRATION_CODE="+regCode)
			}
			env = append(env, tc.env...)
			args := tc.args
			if args == nil && !slices.ContainsFunc(tc.env, func(kv string) bool { return strings.HasPrefix(kv, "KUBECONFIG=") }) {
				args = []string{"--dry-run"}
			}
			res := harness.RunEngine(t, context.Background(), env, args...)
			require.Equal(t, tc.wantCode, res.Code, res.String())
			assert.Contains(t, res.Stderr, tc.wantInLogs)
			if tc.wantPhase != "" {
				assert.Equal(t, tc.wantPhase, summary(t, res.Stderr)["failedPhase"])
				assert.Contains(t, res.Stderr, `"level":"DEBUG"`, "DEBUG logging is on")
			}
			emitted := res.Stderr + res.Stdout
			if tc.api != nil {
				events := tc.api.eventBodies()
				require.Contains(t, events, `"note"`, "the run recorded its Event")
				emitted += events
			}
			secrets := map[string]string{
				"registration code":         regCode,
				"kept registration code":    keptCode,
				"federated token":           tc.cloud.File(t, "token"),
				"foreign federated token":   foreignToken,
				"ARM access token":          tc.cloud.File(t, "access-token"),
				"document signature":        sig[:64],
				"document signature (tail)": sig[len(sig)-64:],
			}
			for what, value := range secrets {
				for form, v := range map[string]string{"as is": value, "base64": base64.StdEncoding.EncodeToString([]byte(value)),
					"base64 unpadded": base64.RawStdEncoding.EncodeToString([]byte(value)), "URL base64": base64.URLEncoding.EncodeToString([]byte(value))} {
					assert.NotContains(t, emitted, v, "%s (%s) leaked", what, form)
				}
			}
		})
	}
}

// refusingAPIServer is a Kubernetes API server that grants the Lease and
// refuses every write of the Secret with a message quoting the request
// body, as an admission webhook that echoes what it denied does. It returns
// the path of a kubeconfig for it.
func refusingAPIServer(t *testing.T) string {
	t.Helper()
	return fakeAPIServer(t, apiServerScript{}).kubeconfig
}

// apiServerScript is what fakeAPIServer answers about the Secret.
type apiServerScript struct {
	// keptCode, when set, is the regCode of an existing Secret; otherwise
	// the Secret is absent.
	keptCode string
	// unavailable is how many applies of the Secret are answered 503 by an
	// admission webhook "unavailable for object <the request>" before one
	// succeeds; 0 refuses every apply with 400 "denied the request: <the
	// request>".
	unavailable int
}

// fakeAPI is a running fakeAPIServer.
type fakeAPI struct {
	kubeconfig string
	mu         *sync.Mutex
	events     *[]string // the bodies of the Events created
}

// eventBodies returns the Events the engine created, as sent.
func (a fakeAPI) eventBodies() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(*a.events, "\n")
}

// fakeAPIServer is a Kubernetes API server that grants the Lease, records
// Events, and answers the Secret as script says: every refusal quotes the
// request body, as an admission webhook that echoes what it denied does.
func fakeAPIServer(t *testing.T, script apiServerScript) fakeAPI {
	t.Helper()
	var mu sync.Mutex
	var lease, secret []byte
	var events []string
	applies := 0
	if script.keptCode != "" {
		secret, _ = json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
			"metadata": map[string]any{"name": "scc-registration", "namespace": "cattle-scc-system", "resourceVersion": "7"},
			"data":     map[string][]byte{"regCode": []byte(script.keptCode), "registrationType": []byte("online")}})
	}
	status := func(w http.ResponseWriter, code int, reason, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "message": msg, "code": code})
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.Contains(r.URL.Path, "/leases/") && r.Method == http.MethodGet:
			if lease == nil {
				status(w, http.StatusNotFound, "NotFound", "leases not found")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(lease)
		case strings.Contains(r.URL.Path, "/leases/"):
			var l map[string]any
			_ = json.Unmarshal(body, &l)
			if md, ok := l["metadata"].(map[string]any); ok {
				md["resourceVersion"] = "1"
			}
			lease, _ = json.Marshal(l)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(lease)
		case strings.Contains(r.URL.Path, "/secrets/") && r.Method == http.MethodGet:
			if secret == nil {
				status(w, http.StatusNotFound, "NotFound", "secrets not found")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(secret)
		case strings.Contains(r.URL.Path, "/secrets/"):
			applies++
			switch {
			case script.unavailable == 0:
				status(w, http.StatusBadRequest, "BadRequest", `admission webhook "policy.example.com" denied the request: `+string(body))
			case applies <= script.unavailable:
				status(w, http.StatusServiceUnavailable, "InternalError", `Internal error occurred: failed calling webhook "policy.example.com": admission webhook "policy.example.com" is unavailable for object `+string(body))
			default:
				var s map[string]any
				_ = json.Unmarshal(body, &s)
				if md, ok := s["metadata"].(map[string]any); ok {
					md["resourceVersion"] = "8"
				}
				secret, _ = json.Marshal(s)
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(secret)
			}
		case strings.HasSuffix(r.URL.Path, "/events") && r.Method == http.MethodPost:
			events = append(events, string(body))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(body)
		default:
			status(w, http.StatusNotFound, "NotFound", r.URL.Path)
		}
	}))
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+srv.URL+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: not-a-secret}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	return fakeAPI{kubeconfig: kubeconfig, mu: &mu, events: &events}
}
