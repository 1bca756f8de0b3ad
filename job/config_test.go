package job

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/providers/failure"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadConfigDefaults(t *testing.T) {
	c, err := LoadConfig(nil, env(nil))
	require.NoError(t, err)
	assert.Equal(t, "scc-registration", c.SecretName)
	assert.Equal(t, "cattle-scc-system", c.SecretNamespace)
	assert.Equal(t, DefaultAzureIMDS, c.AzureIMDSEndpoint)
	assert.Equal(t, DefaultARM, c.ARMEndpoint)
	assert.Equal(t, DefaultRegionCfg, c.RegionConfigPath)
	assert.Equal(t, DefaultDMIDir, c.DMIDir)
	assert.Equal(t, 5, c.VerifyRetryMax)
	assert.Equal(t, 2.0, c.VerifyRetryBackoff)
	assert.Equal(t, 5, c.K8sRetryMax)
	assert.Equal(t, []time.Duration{15 * time.Second, 7500 * time.Millisecond, 5 * time.Second}, c.RegionPassTimeouts)
	assert.Equal(t, []time.Duration{20 * time.Second, 10 * time.Second}, c.RegionPassPauses)
	assert.Equal(t, 2*time.Second, c.DetectBudget)
	assert.Equal(t, time.Hour, c.StartupSleepMax)
	assert.Equal(t, 10*time.Minute, c.RunDeadline)
	assert.Equal(t, slog.LevelInfo, c.LogLevel)
	assert.True(t, c.InClusterDNS)
	assert.Equal(t, 443, c.UpdateHTTPSPort)
	assert.Equal(t, 3*time.Minute, c.HandoverTimeout)
	assert.Equal(t, 2*time.Minute, c.OperatorWait)
	assert.Empty(t, c.HandoverDNSServer, "the pod's own resolver")
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
				assert.Equal(t, []time.Duration{time.Second, 500 * time.Millisecond}, c.RegionPassTimeouts)
			},
		},
		"handover and operator settings": {
			env: map[string]string{"HANDOVER_TIMEOUT": "0", "HANDOVER_DNS_SERVER": "127.0.0.1:5353", "OPERATOR_WAIT": "30s", "JOB_UID": "uid-1"},
			want: func(t *testing.T, c *Config) {
				assert.Zero(t, c.HandoverTimeout, "0 disables the wait")
				assert.Equal(t, "127.0.0.1:5353", c.HandoverDNSServer)
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
	}))
	require.Error(t, err)
	assert.True(t, failure.IsPermanent(err))
	msg := err.Error()
	for _, want := range []string{
		`VERIFY_RETRY_MAX="abc"`, `K8S_RETRY_BACKOFF="-1"`, `ARM_ENDPOINT="http://plain.example"`,
		`LOG_LEVEL="LOUD"`, `REGION_PASS_TIMEOUTS="soon"`, "--dry-run and --output exclude each other",
		`HANDOVER_DNS_SERVER="dns.example"`,
	} {
		assert.Contains(t, msg, want)
	}
	assert.NotContains(t, msg, "sekrit-code")
	assert.Equal(t, ExitPermanent, ExitCode(err))
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
