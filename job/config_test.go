package job

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/hostname"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/regionconfig"
	"github.com/rancher/registration-engine/job/smt"
	"github.com/rancher/registration-engine/providers"
	"github.com/rancher/registration-engine/providers/azure"
)

// testRegionConfig is a valid regionserverclnt.cfg, which LoadConfig reads.
const testRegionConfig = "regionconfig/testdata/azure.cfg"

// env serves m as the environment, with REGIONSRV_CONFIG pointing at
// testRegionConfig unless m sets it.
func env(m map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := m[k]; ok || k != "REGIONSRV_CONFIG" {
			return v
		}
		return testRegionConfig
	}
}

// notRendered lists the problems of a load error that are placeholders:
// every path of its tree of wrapped and joined errors that ends at
// ErrNotFilledIn.
func notRendered(err error) []error {
	if err == ErrNotFilledIn {
		return []error{err}
	}
	var out []error
	switch e := err.(type) {
	case interface{ Unwrap() []error }:
		for _, c := range e.Unwrap() {
			out = append(out, notRendered(c)...)
		}
	case interface{ Unwrap() error }:
		out = notRendered(e.Unwrap())
	}
	return out
}

func TestLoadConfigDefaults(t *testing.T) {
	c, err := LoadConfig(nil, env(nil))
	require.NoError(t, err)
	assert.Equal(t, "scc-registration", c.SecretName)
	assert.Equal(t, "cattle-scc-system", c.SecretNamespace)
	assert.Equal(t, "http://169.254.169.254", c.Azure.IMDSEndpoint)
	assert.Equal(t, "https://management.azure.com", c.Azure.ARMEndpoint)
	assert.Equal(t, testRegionConfig, c.RegionConfigPath)
	assert.Equal(t, []string{"23.100.36.229", "40.121.202.140", "52.187.53.250", "104.45.31.195", "191.237.254.253"}, c.RegionSettings.RegionServers, "the file is read at load")
	assert.Equal(t, "/sys/class/dmi/id", c.DMIDir)
	assert.Equal(t, 5, c.Azure.RetryMax)
	assert.Equal(t, 2.0, c.Azure.RetryBackoff)
	assert.Equal(t, 5, c.K8sRetryMax)
	assert.Equal(t, []time.Duration{15 * time.Second, 7500 * time.Millisecond, 5 * time.Second}, c.SMT.PassTimeouts)
	assert.Equal(t, []time.Duration{20 * time.Second, 10 * time.Second}, c.SMT.PassPauses)
	assert.Equal(t, 2*time.Second, c.DetectBudget)
	assert.Equal(t, time.Hour, c.StartupSleepMax)
	assert.Equal(t, 10*time.Minute, c.RunDeadline)
	assert.Equal(t, slog.LevelInfo, c.LogLevel)
	assert.True(t, c.InCluster.Map)
	assert.Equal(t, 443, c.SMT.HTTPSPort)
	assert.Equal(t, 3*time.Minute, c.InCluster.Timeout)
	assert.Equal(t, 20*time.Second, c.InCluster.Settle)
	assert.Equal(t, 2*time.Minute, c.OperatorWait)
	assert.Equal(t, "registration-engine", c.LeaseName)
	assert.Equal(t, "registration-engine", c.CronJobName)
	assert.Empty(t, c.InCluster.DNSServer, "the pod's own resolver")
	assert.True(t, c.Recovery.Enabled, "a Failed Registration is recovered unless OPERATOR_RECOVERY=false")
	assert.Equal(t, "kube-system/scc-controllers", c.Recovery.OperatorLease)
}

// TestLoadConfigOperatorRecovery: OPERATOR_RECOVERY turns the recovery
// off, and an OPERATOR_LEASE that is not namespace/name stops the run at
// load.
func TestLoadConfigOperatorRecovery(t *testing.T) {
	c, err := LoadConfig(nil, env(map[string]string{"OPERATOR_RECOVERY": "false", "OPERATOR_LEASE": "ops/scc-leader"}))
	require.NoError(t, err)
	assert.False(t, c.Recovery.Enabled)
	assert.Equal(t, "ops/scc-leader", c.Recovery.OperatorLease)
	_, err = LoadConfig(nil, env(map[string]string{"OPERATOR_LEASE": "scc-controllers"}))
	require.Error(t, err)
	assert.True(t, failure.IsPermanent(err))
	r := testkit.NewMessages(t)
	r.Add("OPERATOR_LEASE without a namespace", err)
}

func TestLoadConfigPrecedence(t *testing.T) {
	tests := map[string]struct {
		args []string
		env  map[string]string
		want func(t *testing.T, c *Config)
	}{
		"REGISTRATION_CODE wins over REG_CODE and REGCODE": {
			env:  map[string]string{"REGISTRATION_CODE": "a", "REG_CODE": "b", "REGCODE": "c"},
			want: func(t *testing.T, c *Config) { assert.Equal(t, "a", c.RegCode.Reveal()) },
		},
		"first non-empty of the three": {
			env:  map[string]string{"REGISTRATION_CODE": "", "REG_CODE": "", "REGCODE": "c"},
			want: func(t *testing.T, c *Config) { assert.Equal(t, "c", c.RegCode.Reveal()) },
		},
		"REGISTRATION_ENGINE_LOG_LEVEL over LOG_LEVEL": {
			env:  map[string]string{"REGISTRATION_ENGINE_LOG_LEVEL": "DEBUG", "LOG_LEVEL": "ERROR"},
			want: func(t *testing.T, c *Config) { assert.Equal(t, slog.LevelDebug, c.LogLevel) },
		},
		"LOG_LEVEL alone, CRITICAL maps to error": {
			env:  map[string]string{"LOG_LEVEL": "CRITICAL"},
			want: func(t *testing.T, c *Config) { assert.Equal(t, slog.LevelError, c.LogLevel) },
		},
		"flag beats environment": {
			args: []string{"--secret-name=from-flag", "--dry-run"},
			env:  map[string]string{"REGISTRATION_SECRET_NAME": "from-env"},
			want: func(t *testing.T, c *Config) {
				assert.Equal(t, "from-flag", c.SecretName)
				assert.True(t, c.DryRun)
			},
		},
		"plain seconds and Go durations": {
			env: map[string]string{"STARTUP_SLEEP_MAX": "0", "RUN_DEADLINE": "90", "REGION_PASS_TIMEOUTS": "1s, 500ms", "REGION_PASS_PAUSES": "10ms"},
			want: func(t *testing.T, c *Config) {
				assert.Zero(t, c.StartupSleepMax)
				assert.Equal(t, 90*time.Second, c.RunDeadline)
				assert.Equal(t, []time.Duration{time.Second, 500 * time.Millisecond}, c.SMT.PassTimeouts)
			},
		},
		"handover and operator settings": {
			env: map[string]string{"HANDOVER_TIMEOUT": "0", "HANDOVER_DNS_SERVER": "127.0.0.1:5353", "OPERATOR_WAIT": "30s", "JOB_UID": "uid-1"},
			want: func(t *testing.T, c *Config) {
				assert.Zero(t, c.InCluster.Timeout, "0 disables the wait")
				assert.Equal(t, "127.0.0.1:5353", c.InCluster.DNSServer)
				assert.Equal(t, 30*time.Second, c.OperatorWait)
				assert.Equal(t, "uid-1", c.JobUID)
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := LoadConfig(tc.args, env(tc.env))
			require.NoError(t, err)
			tc.want(t, c)
		})
	}
}

func TestLoadConfigReportsEveryProblemAtOnce(t *testing.T) {
	_, err := LoadConfig([]string{"--dry-run", "--output=/tmp/x"}, env(map[string]string{
		"VERIFY_RETRY_MAX":     "abc",
		"K8S_RETRY_BACKOFF":    "-1",
		"ARM_ENDPOINT":         "http://plain.example",
		"LOG_LEVEL":            "LOUD",
		"REGION_PASS_TIMEOUTS": "soon",
		"REGISTRATION_CODE":    "sekrit-code",
		"HANDOVER_DNS_SERVER":  "dns.example",
		"REGION_PASS_PAUSES":   "1s",
	}))
	require.Error(t, err)
	assert.True(t, failure.IsPermanent(err))
	// Every problem, REGION_PASS_PAUSES's against smt's rule for the default
	// passes among them, in one message; the code never in it.
	r := testkit.NewMessages(t)
	msg := r.Add("eight problems", err)
	assert.NotContains(t, msg, "sekrit-code", "the registration code is a secret")
	assert.Equal(t, ExitPermanent, ExitCode(err))
}

// TestLoadConfigRefusesASettleAsLongAsTheTimeout: the handover needs every
// check to pass for HANDOVER_SETTLE within HANDOVER_TIMEOUT, so a settle as
// long as the timeout is refused at load, naming both; where there is no
// wait (HANDOVER_TIMEOUT=0, IN_CLUSTER_DNS=false) it is not checked.
func TestLoadConfigRefusesASettleAsLongAsTheTimeout(t *testing.T) {
	r := testkit.NewMessages(t)
	tests := map[string]struct {
		env     map[string]string
		wantErr bool
	}{
		"timeout shorter than the default settle": {env: map[string]string{"HANDOVER_TIMEOUT": "15s"}, wantErr: true},
		"settle equal to the timeout":             {env: map[string]string{"HANDOVER_TIMEOUT": "1m", "HANDOVER_SETTLE": "1m"}, wantErr: true},
		"settle just shorter":                     {env: map[string]string{"HANDOVER_TIMEOUT": "1m", "HANDOVER_SETTLE": "59s"}},
		"no settle":                               {env: map[string]string{"HANDOVER_TIMEOUT": "1s", "HANDOVER_SETTLE": "0"}},
		"wait disabled":                           {env: map[string]string{"HANDOVER_TIMEOUT": "0"}},
		"no in-cluster DNS, so no wait":           {env: map[string]string{"HANDOVER_TIMEOUT": "15s", "IN_CLUSTER_DNS": "false"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := LoadConfig(nil, env(tc.env))
			if !tc.wantErr {
				require.NoError(t, err)
				assert.NotNil(t, c)
				return
			}
			require.Error(t, err)
			assert.Equal(t, ExitPermanent, ExitCode(err))
			r.Add(name, err)
		})
	}
}

// TestLoadConfigCapsThePropagationWindow: a PROPAGATION_WINDOW past its cap
// would keep a role that was never assigned reading as "waiting for Azure"
// for as long as it says: refused at load, naming the cap.
func TestLoadConfigCapsThePropagationWindow(t *testing.T) {
	tests := map[string]struct {
		window  string
		wantErr string
	}{
		"ten years": {window: "87600h", wantErr: "PROPAGATION_WINDOW 87600h is longer than its cap of 6h (twelve times the 30 minutes Azure documents for a role assignment to take effect, and the schedule's shorter gap): set it to at most 6h"},
		"the cap":   {window: "6h"},
		"default":   {window: "1h"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := LoadConfig(nil, env(map[string]string{"PROPAGATION_WINDOW": tc.window}))
			if tc.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.window, formatDuration(c.FirstContact))
				return
			}
			require.Error(t, err)
			assert.Equal(t, ExitPermanent, ExitCode(err))
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// The region servers' file, the retry bounds and the extension's ID are
// checked at load, with everything else, so that a run with any of them
// wrong stops before phase 1 instead of after IMDS, Entra and ARM.
func TestLoadConfigChecksBoundsGrammarAndRegionFileAtOnce(t *testing.T) {
	broken := filepath.Join(t.TempDir(), "regionserverclnt.cfg")
	require.NoError(t, os.WriteFile(broken, []byte("[server]\nregionsrv = 10.0.0.1, smt}.example\n"), 0o644))
	_, err := LoadConfig(nil, env(map[string]string{
		"VERIFY_RETRY_MAX":      "21",
		"VERIFY_RETRY_BACKOFF":  "61",
		"EXTENSION_RESOURCE_ID": "x/../y",
		"REGIONSRV_CONFIG":      broken,
	}))
	require.Error(t, err)
	assert.Equal(t, ExitPermanent, ExitCode(err))
	assert.ErrorIs(t, err, azure.ErrExtensionID)
	assert.ErrorIs(t, err, regionconfig.ErrMissingKey)
	assert.ErrorIs(t, err, regionconfig.ErrInvalidRegionServer)
	// Each problem names its setting, so one round of fixes is enough.
	r := testkit.NewMessages(t)
	r.Replace = []string{filepath.Dir(broken), "<dir>"}
	r.Add("four problems", err)
}

// TestNumberSettingsNameTheirRange: a bad number is told the whole range
// it must fall in, and NaN and Inf, which strconv parses, are refused at
// load instead of reaching a backoff computation.
func TestNumberSettingsNameTheirRange(t *testing.T) {
	tests := map[string]map[string]string{
		"bounded whole number, not a number": {"VERIFY_RETRY_MAX": "abc"},
		"bounded whole number, below":        {"VERIFY_RETRY_MAX": "0"},
		"open whole number, below":           {"K8S_RETRY_MAX": "0"},
		"bounded number, not a number":       {"VERIFY_RETRY_BACKOFF": "abc"},
		"bounded number, NaN":                {"VERIFY_RETRY_BACKOFF": "NaN"},
		"bounded number, below":              {"VERIFY_RETRY_BACKOFF": "0.5"},
		"open number, NaN":                   {"K8S_RETRY_BACKOFF": "NaN"},
		"open number, Inf":                   {"K8S_RETRY_BACKOFF": "+Inf"},
		"open number, below":                 {"K8S_RETRY_BACKOFF": "0.5"},
	}
	r := testkit.NewMessages(t)
	for name, vars := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := LoadConfig(nil, env(vars))
			require.Error(t, err)
			assert.Equal(t, ExitPermanent, ExitCode(err))
			r.Add(name, err)
		})
	}
	c, err := LoadConfig(nil, env(map[string]string{"VERIFY_RETRY_MAX": "20", "VERIFY_RETRY_BACKOFF": "60", "K8S_RETRY_BACKOFF": "1.5"}))
	require.NoError(t, err, "the bounds themselves are accepted")
	assert.Equal(t, 20, c.Azure.RetryMax)
	assert.Equal(t, 60.0, c.Azure.RetryBackoff)
	assert.Equal(t, 1.5, c.K8sRetryBackoff)
}

func TestLoadConfigReadsTheDefaultRegionFile(t *testing.T) {
	if _, err := os.Stat(regionconfig.DefaultPath); err == nil {
		t.Skipf("%s exists on this machine", regionconfig.DefaultPath)
	}
	_, err := LoadConfig(nil, env(map[string]string{"REGIONSRV_CONFIG": ""}))
	require.ErrorIs(t, err, regionconfig.ErrRead)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	var pathErr *fs.PathError
	require.ErrorAs(t, err, &pathErr)
	assert.Equal(t, regionconfig.DefaultPath, pathErr.Path, "the file read is the default one, and the error names it")
}

// Secrecy belongs to the setting: any setting marked secret has its bad
// value redacted, whatever its name.
func TestSecretSettingNeverInAnError(t *testing.T) {
	saved := settings
	t.Cleanup(func() { settings = saved })
	settings = append(slices.Clone(saved), setting{
		flag: "future-token", envs: []string{"FUTURE_TOKEN"}, secret: true,
		set: func(*Config, string) error { return errors.New("want a token of 32 characters") },
	})
	r := testkit.NewMessages(t)
	_, err := LoadConfig([]string{"--future-token=tok-FLAG-LEAK"}, env(nil))
	require.Error(t, err)
	flagMsg := r.Add("a flag", err)
	_, err = LoadConfig(nil, env(map[string]string{"FUTURE_TOKEN": "tok-ENV-LEAK"}))
	require.Error(t, err)
	envMsg := r.Add("a variable", err)
	// The golden file shows REDACTED; these hold the secrecy even if it is
	// rewritten carelessly.
	assert.NotContains(t, flagMsg, "FLAG-LEAK")
	assert.NotContains(t, envMsg, "ENV-LEAK")

	for _, s := range saved {
		if s.flag == "registration-code" {
			assert.True(t, s.secret, "the registration code is a secret setting")
		}
	}
}

func TestConfigLogNeverShowsTheRegistrationCode(t *testing.T) {
	c, err := LoadConfig(nil, env(map[string]string{"REG_CODE": "INTERNAL-REGCODE-123"}))
	require.NoError(t, err)
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", slog.Any("config", c))
	assert.NotContains(t, buf.String(), "INTERNAL-REGCODE-123")
	assert.Contains(t, buf.String(), `"regCode":"REDACTED"`)
}

func TestHelpListsEveryFlagAndVariable(t *testing.T) {
	var buf bytes.Buffer
	WriteHelp(&buf)
	help := buf.String()
	for _, s := range settings {
		if s.flag != "" {
			assert.Contains(t, help, "--"+s.flag)
		}
	}
	for _, e := range envNames() {
		assert.Contains(t, help, e)
	}
	// Both subcommands are in the usage.
	assert.Contains(t, help, "registration-engine status [")
	assert.Contains(t, help, "registration-engine attestation inspect [")
	// Defaults read the way a user would write them.
	for _, want := range []string{"(default 1h)", "(default 3m)", "(default 2m)", "(default 20s)", "(default 10m)"} {
		assert.Contains(t, help, want)
	}
	// Every variable of the seed's environment table.
	for _, e := range strings.Fields(`AZURE_CLIENT_ID AZURE_TENANT_ID AZURE_FEDERATED_TOKEN_FILE EXTENSION_RESOURCE_ID
		MARKETPLACE_PUBLISHER_ID MARKETPLACE_OFFER_ID MARKETPLACE_PLAN_ID REGISTRATION_SECRET_NAME REGISTRATION_SECRET_NAMESPACE
		REGISTRATION_CODE REG_CODE REGCODE KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT KUBERNETES_TOKEN KUBERNETES_CA_CERT
		REGISTRATION_ENGINE_LOG_LEVEL LOG_LEVEL VERIFY_RETRY_MAX VERIFY_RETRY_BACKOFF K8S_RETRY_MAX K8S_RETRY_BACKOFF DMI_DIR_PATH`) {
		assert.Contains(t, help, e)
	}
}

func TestExitCode(t *testing.T) {
	tests := map[string]struct {
		err  error
		want int
	}{
		"success":    {nil, ExitOK},
		"transient":  {assert.AnError, ExitTransient},
		"permanent":  {failure.Permanent(assert.AnError), ExitPermanent},
		"deadline":   {ErrDeadline, ExitDeadline},
		"terminated": {failure.Permanent(ErrTerminated), ExitTerminated},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) { assert.Equal(t, tc.want, ExitCode(tc.err)) })
	}
}

// envNames lists every environment variable the engine reads, for the help test.
func envNames() []string {
	var out []string
	for _, s := range settings {
		out = append(out, s.envs...)
	}
	slices.Sort(out)
	return out
}

func TestUpdateServerSettings(t *testing.T) {
	tests := map[string]struct {
		env          map[string]string
		wantDomains  []string
		wantLoopback bool
		wantErr      bool  // refused: its message is in the golden file
		wantIs       error // the sentinel the error must wrap, if any
	}{
		"defaults: SUSE's domain, no loopback": {wantDomains: smt.DefaultDomains},
		"domains listed, normalised":           {env: map[string]string{"UPDATE_SERVER_DOMAINS": "SUSECloud.net., rmt.example.com"}, wantDomains: []string{"susecloud.net", "rmt.example.com"}},
		"loopback for the fake cloud":          {env: map[string]string{"UPDATE_SERVER_ALLOW_LOOPBACK": "true"}, wantDomains: smt.DefaultDomains, wantLoopback: true},
		"a domain with an underscore":          {env: map[string]string{"UPDATE_SERVER_DOMAINS": "susecloud.net,bad_name.example"}, wantErr: true, wantIs: hostname.ErrInvalid},
		"a single-label domain":                {env: map[string]string{"UPDATE_SERVER_DOMAINS": "net"}, wantErr: true, wantIs: hostname.ErrInvalid},
		"only commas":                          {env: map[string]string{"UPDATE_SERVER_DOMAINS": ", ,"}, wantErr: true},
		// The chart copies the list into the CoreDNS admission policy:
		// the cluster domain would let the engine's token map
		// kubernetes.default.svc.cluster.local.
		"the cluster domain":                {env: map[string]string{"UPDATE_SERVER_DOMAINS": "susecloud.net,Cluster.Local."}, wantErr: true, wantIs: smt.ErrClusterDomain},
		"a domain under the cluster's":      {env: map[string]string{"UPDATE_SERVER_DOMAINS": "svc.cluster.local"}, wantErr: true, wantIs: smt.ErrClusterDomain},
		"a domain covering the cluster's":   {env: map[string]string{"UPDATE_SERVER_DOMAINS": "local"}, wantErr: true, wantIs: hostname.ErrInvalid},
		"a look-alike is no cluster domain": {env: map[string]string{"UPDATE_SERVER_DOMAINS": "mycluster.local.example"}, wantDomains: []string{"mycluster.local.example"}},
	}
	r := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := LoadConfig(nil, env(tc.env))
			if tc.wantErr {
				require.Error(t, err)
				r.Add(name, err)
				assert.True(t, failure.IsPermanent(err))
				if tc.wantIs != nil {
					assert.ErrorIs(t, err, tc.wantIs, "checked by the one host-name rule")
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantDomains, c.SMT.Domains)
			assert.Equal(t, tc.wantLoopback, c.SMT.AllowLoopback)
		})
	}
}

// CLUSTER_ADDRESS_RANGES, the chart's clusterAddressRanges, loads as the
// list the CoreDNS editor checks: by default coredns.DefaultClusterRanges
// (the chart's default, manifests' TestClusterAddressRangesMatchEngine),
// each range masked to its network, duplicates dropped; a value that is no
// CIDR is refused at load, naming the variable and the value (golden).
func TestClusterAddressRanges(t *testing.T) {
	tests := map[string]struct {
		env     map[string]string
		want    []netip.Prefix
		wantErr bool // refused: its message is in the golden file
	}{
		"default: the chart's default list": {want: coredns.DefaultClusterRanges},
		"the chart's default, as it passes it": {
			env:  map[string]string{"CLUSTER_ADDRESS_RANGES": "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7"},
			want: coredns.DefaultClusterRanges,
		},
		"a public range added, masked, duplicates dropped": {
			env:  map[string]string{"CLUSTER_ADDRESS_RANGES": " 10.0.0.0/8, 203.0.113.7/24,203.0.113.0/24 ,2001:DB8::1/32,10.1.2.3/8"},
			want: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::/32")},
		},
		"an address without a prefix length": {env: map[string]string{"CLUSTER_ADDRESS_RANGES": "10.0.0.0/8,203.0.113.7"}, wantErr: true},
		"a prefix longer than the address":   {env: map[string]string{"CLUSTER_ADDRESS_RANGES": "10.0.0.0/33"}, wantErr: true},
		"a host name":                        {env: map[string]string{"CLUSTER_ADDRESS_RANGES": "cluster.example/16"}, wantErr: true},
		"only commas":                        {env: map[string]string{"CLUSTER_ADDRESS_RANGES": ", ,"}, wantErr: true},
	}
	r := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := LoadConfig(nil, env(tc.env))
			if tc.wantErr {
				require.Error(t, err)
				r.Add(name, err)
				assert.True(t, failure.IsPermanent(err), "exit 2")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.InCluster.ClusterRanges)
		})
	}
}

// The registration code reaches SUSE Customer Center through the operator
// as the engine writes it: white space around it is dropped, and a code
// that is blank, has white space inside or is a placeholder is refused at
// load, naming the variable and never the value (golden). Unset, it loads:
// the run then ends waiting for one (TestRunWithoutACodeWaits).
func TestLoadConfigRegistrationCode(t *testing.T) {
	accepted := map[string]struct {
		env  map[string]string
		want string
	}{
		"a code pasted with a space and a newline": {env: map[string]string{"REGISTRATION_CODE": "ABC-123 \n"}, want: "ABC-123"},
		"tabs and a carriage return around it":     {env: map[string]string{"REG_CODE": "\tINTERNAL-USE-ONLY-1a2b-3c4d\r\n"}, want: "INTERNAL-USE-ONLY-1a2b-3c4d"},
		"none: the run waits for one":              {env: nil, want: ""},
		"a code that starts like a placeholder":    {env: map[string]string{"REGCODE": "CODE-7F3A"}, want: "CODE-7F3A"},
		"x inside a code":                          {env: map[string]string{"REGISTRATION_CODE": "X1X2-XX"}, want: "X1X2-XX"},
	}
	for name, tc := range accepted {
		t.Run(name, func(t *testing.T) {
			c, err := LoadConfig(nil, env(tc.env))
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.RegCode.Reveal())
		})
	}

	refused := map[string]struct {
		args   []string
		env    map[string]string
		wantIs error
	}{
		"blank":                         {env: map[string]string{"REGISTRATION_CODE": " \n\t"}, wantIs: ErrRegCode},
		"a newline inside":              {env: map[string]string{"REGISTRATION_CODE": "ABC-123\nDEF"}, wantIs: ErrRegCode},
		"two codes with a space":        {env: map[string]string{"REG_CODE": "ABC-123 DEF-456"}, wantIs: ErrRegCode},
		"a control character":           {env: map[string]string{"REGISTRATION_CODE": "ABC\x00123"}, wantIs: ErrRegCode},
		"the chart's REPLACE-ME":        {env: map[string]string{"REGISTRATION_CODE": "REPLACE-ME-registration-code"}, wantIs: ErrRegCode},
		"an angle-bracket placeholder":  {env: map[string]string{"REGISTRATION_CODE": "<registration-code>"}, wantIs: ErrRegCode},
		"a shell variable left as is":   {env: map[string]string{"REGCODE": "${REGCODE}"}, wantIs: ErrRegCode},
		"a template left as is":         {env: map[string]string{"REGISTRATION_CODE": "{{.Values.registrationCode}}"}, wantIs: ErrRegCode},
		"all x":                         {env: map[string]string{"REGISTRATION_CODE": "XXXX-XXXX-XXXX"}, wantIs: ErrRegCode},
		"changeme":                      {env: map[string]string{"REGISTRATION_CODE": "ChangeMe"}, wantIs: ErrRegCode},
		"the Marketplace's DONOTMODIFY": {env: map[string]string{"REGISTRATION_CODE": "DONOTMODIFY"}, wantIs: ErrNotFilledIn},
		"a blank flag":                  {args: []string{"--registration-code", "  "}, wantIs: ErrRegCode},
		// Outside a cluster: a Secret manifest with regCode "" reported
		// as registered.
		"none, with --output": {args: []string{"--output", "registration.yaml"}, wantIs: ErrRegCode},
	}
	r := testkit.NewMessages(t)
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := LoadConfig(tc.args, env(tc.env))
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.wantIs)
			assert.Equal(t, ExitPermanent, ExitCode(err))
			msg := r.Add(name, err)
			for _, v := range tc.env {
				if strings.TrimSpace(v) != "" && v != Placeholder {
					assert.NotContains(t, msg, strings.TrimSpace(v), "the message never quotes the code")
				}
			}
		})
	}
}

func TestLoadConfigCredentialMode(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("sa-token"), 0o600))
	tests := map[string]struct {
		env      map[string]string
		wantMode azure.CredentialMode
		// wantErr: refused at load, with the message in the golden file.
		wantErr bool
	}{
		"unset: workload identity, checked when Azure is detected": {
			env:      nil,
			wantMode: azure.WorkloadIdentity,
		},
		"managed identity with its client ID": {
			env:      map[string]string{"AZURE_CREDENTIAL_MODE": "managed-identity", "AZURE_CLIENT_ID": "9b2f3c1d-0000-4000-8000-00000000e0e1"},
			wantMode: azure.ManagedIdentity,
		},
		"workload identity set explicitly with the webhook's variables": {
			env: map[string]string{"AZURE_CREDENTIAL_MODE": "workload-identity", "AZURE_CLIENT_ID": "c", "AZURE_TENANT_ID": "t",
				"AZURE_FEDERATED_TOKEN_FILE": token},
			wantMode: azure.WorkloadIdentity,
		},
		"managed identity without AZURE_CLIENT_ID fails at load with every other problem": {
			env:     map[string]string{"AZURE_CREDENTIAL_MODE": "managed-identity", "RUN_DEADLINE": "soon"},
			wantErr: true,
		},
		"workload identity set explicitly without the webhook's variables fails at load": {
			env:     map[string]string{"AZURE_CREDENTIAL_MODE": "workload-identity"},
			wantErr: true,
		},
		"an unknown mode is named, not guessed": {
			env:     map[string]string{"AZURE_CREDENTIAL_MODE": "auto"},
			wantErr: true,
		},
	}
	r := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := LoadConfig(nil, env(tc.env))
			if !tc.wantErr {
				require.NoError(t, err)
				assert.Equal(t, tc.wantMode, c.Azure.CredentialMode)
				var buf bytes.Buffer
				slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", slog.Any("config", c))
				assert.Contains(t, buf.String(), `"azureCredentialMode":"`+string(tc.wantMode)+`"`, "the log says which mode runs")
				return
			}
			require.Error(t, err)
			assert.Equal(t, ExitPermanent, ExitCode(err))
			assert.ErrorIs(t, err, azure.ErrConfig, "the identity settings are a configuration error")
			r.Add(name, err)
		})
	}
}

func TestLoadConfigDONOTMODIFYIsMissing(t *testing.T) {
	tests := map[string]struct {
		args []string
		env  map[string]string
		// named: how many settings the error names, one line each.
		named int
	}{
		"EXTENSION_RESOURCE_ID": {env: map[string]string{"EXTENSION_RESOURCE_ID": "DONOTMODIFY"}, named: 1},
		"MARKETPLACE_PLAN_ID":   {env: map[string]string{"MARKETPLACE_PLAN_ID": "DONOTMODIFY"}, named: 1},
		"AZURE_CLIENT_ID of the managed identity, named once": {
			env:   map[string]string{"AZURE_CREDENTIAL_MODE": "managed-identity", "AZURE_CLIENT_ID": "DONOTMODIFY"},
			named: 1,
		},
		"a setting with a default": {env: map[string]string{"ARM_ENDPOINT": "DONOTMODIFY"}, named: 1},
		"a flag":                   {args: []string{"--publisher-id", "DONOTMODIFY"}, named: 1},
		"every one at once": {
			env:   map[string]string{"EXTENSION_RESOURCE_ID": "DONOTMODIFY", "MARKETPLACE_PLAN_ID": " DONOTMODIFY ", "MARKETPLACE_OFFER_ID": "DONOTMODIFY"},
			named: 3,
		},
	}
	r := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := LoadConfig(tc.args, env(tc.env))
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrNotFilledIn)
			assert.Equal(t, ExitPermanent, ExitCode(err))
			// Each placeholder is reported as such, once, and not also as a
			// missing setting: the golden file shows the lines.
			assert.Len(t, notRendered(err), tc.named, "one refusal per setting: %v", err)
			r.Add(name, err)
		})
	}

	_, err := LoadConfig(nil, env(map[string]string{"MARKETPLACE_PLAN_ID": "DONOTMODIFY-premium"}))
	assert.NoError(t, err, "only the whole literal is the placeholder")
}

// TestLoadConfigRefusesAMetadataEndpointTheDetectorWouldRefuse: a metadata
// override with a path, a query or credentials is refused at start, by the
// detector's own rule (providers.CheckEndpoint), not found at run time as
// "no cloud detected" on every run.
func TestLoadConfigRefusesAMetadataEndpointTheDetectorWouldRefuse(t *testing.T) {
	for name, v := range map[string]string{
		"AZURE_IMDS_ENDPOINT":    "http://127.0.0.1:8080/metadata",
		"GCP_METADATA_ENDPOINTS": "http://127.0.0.1:8080,http://127.0.0.1:9090?x=1",
		"AWS_IMDS_ENDPOINTS":     "http://user:pw@127.0.0.1:8080",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadConfig([]string{"--dry-run"}, env(map[string]string{name: v, "REGISTRATION_CODE": "c"}))
			require.ErrorIs(t, err, providers.ErrInvalidEndpoint)
			assert.Equal(t, ExitPermanent, ExitCode(err))
		})
	}
	_, err := LoadConfig([]string{"--dry-run"}, env(map[string]string{"AZURE_IMDS_ENDPOINT": "http://127.0.0.1:8080/", "REGISTRATION_CODE": "c"}))
	assert.NoError(t, err, "a trailing slash is no path")
}

// TestLoadConfigRefusesSecondsPastADuration: seconds a duration cannot hold
// ("Inf", "1e300": converted, they wrap round to a negative duration, which
// read as "must be positive" for RUN_DEADLINE and as no sleep at all for
// STARTUP_SLEEP_MAX) are refused as too large, each named; the longest
// duration Go holds is taken (here 1e9 s, about 31 years).
func TestLoadConfigRefusesSecondsPastADuration(t *testing.T) {
	for _, v := range []string{"Inf", "+Inf", "1e300", "9223372037"} {
		_, err := LoadConfig(nil, env(map[string]string{"RUN_DEADLINE": v, "STARTUP_SLEEP_MAX": v}))
		require.Error(t, err, v)
		for _, name := range []string{"RUN_DEADLINE", "STARTUP_SLEEP_MAX"} {
			assert.Contains(t, err.Error(), name+`="`+v+`": too large: at most 292 years`)
		}
		assert.NotContains(t, err.Error(), "must be positive", v)
	}
	c, err := LoadConfig(nil, env(map[string]string{"RUN_DEADLINE": "1e9", "STARTUP_SLEEP_MAX": "0.5"}))
	require.NoError(t, err)
	assert.Equal(t, 1e9*time.Second, c.RunDeadline)
	assert.Equal(t, 500*time.Millisecond, c.StartupSleepMax)
}
