package job

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rancher/registration-engine/job/handover"
	"github.com/rancher/registration-engine/job/hostname"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/regionconfig"
	"github.com/rancher/registration-engine/job/smt"
	"github.com/rancher/registration-engine/providers"
	"github.com/rancher/registration-engine/providers/azure"
	"github.com/rancher/registration-engine/providers/dmi"
	"github.com/rancher/registration-engine/providers/failure"
)

// Secret is a string that never reaches a log or an error message: its
// String and LogValue say REDACTED. Reveal returns the value for the one
// place that must write it (the Secret's data).
type Secret string

// Reveal returns the secret value.
func (s Secret) Reveal() string { return string(s) }

// String implements fmt.Stringer so %v and %s cannot leak it.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "REDACTED"
}

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Config is every setting of a run, filled once by LoadConfig from flags,
// then the environment, then defaults. Nothing reads the environment after
// it is built (the AZURE_* variables included: they are read here and handed
// to azidentity explicitly).
type Config struct {
	// Marketplace and Azure identity.
	ExtensionResourceID string
	PublisherID         string
	OfferID             string
	PlanID              string
	// AzureCredentialMode is AZURE_CREDENTIAL_MODE, never empty after load.
	AzureCredentialMode azure.CredentialMode
	AzureClientID       string
	AzureTenantID       string
	AzureTokenFile      string
	AzureAuthorityHost  string
	ARMEndpoint         string
	AttestationRoots    string
	AIAAllowedHosts     []string

	// Metadata endpoints (overridable for tests and the demo only).
	AzureIMDSEndpoint    string
	GCPMetadataEndpoints []string
	AWSIMDSEndpoints     []string
	DetectBudget         time.Duration
	DMIDir               string
	VerifyRetryMax       int
	VerifyRetryBackoff   float64

	// Region and update servers. RegionSettings is the file at
	// RegionConfigPath, read and checked by LoadConfig with everything else.
	RegionConfigPath   string
	RegionSettings     regionconfig.Settings
	CAFile             string
	RegionServerPort   int
	UpdateHTTPSPort    int
	UpdateHTTPPort     int
	RegionPassTimeouts []time.Duration
	RegionPassPauses   []time.Duration
	// UpdateServerDomains and UpdateServerAllowLoopback are smt.Finder's
	// Domains and AllowLoopback.
	UpdateServerDomains       []string
	UpdateServerAllowLoopback bool

	// Kubernetes storage.
	RegCode         Secret
	SecretName      string
	SecretNamespace string
	Kubeconfig      string
	KubeHost        string
	KubePort        string
	KubeToken       string
	KubeCACert      string
	K8sRetryMax     int
	K8sRetryBackoff float64
	LeaseName       string
	PodName         string
	JobName         string
	CronJobName     string
	JobUID          string
	InClusterDNS    bool

	// Handover to rancher/scc-operator.
	HandoverTimeout   time.Duration
	HandoverSettle    time.Duration
	HandoverDNSServer string
	OperatorWait      time.Duration

	// The run.
	RunDeadline     time.Duration
	StartupSleepMax time.Duration
	DryRun          bool
	Output          string
	LogLevel        slog.Level
	LogFormat       string

	ShowHelp    bool
	ShowVersion bool

	// given holds the flags of the settings set by a flag or a variable
	// (not defaulted); rejected those whose value was already reported
	// (Placeholder, or not parseable).
	given, rejected map[string]bool
}

// setting is one configurable value: a flag, the environment variables that
// may carry it (first non-empty wins), its default, and how to store it.
type setting struct {
	flag    string
	envs    []string
	def     string
	group   string
	help    string
	boolean bool
	// secret keeps the value out of every message LoadConfig writes: a bad
	// value is shown as REDACTED. Its Config field must be a Secret, so that
	// the log of the effective configuration redacts it too.
	secret bool
	set    func(c *Config, v string) error
}

func str(dst func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *dst(c) = v; return nil }
}

func integer(min int, dst func(*Config) *int) func(*Config, string) error {
	return integerUpTo(min, math.MaxInt, dst)
}

// integerUpTo takes a whole number from min to max; a bad value is told the
// whole range, whatever was wrong with it.
func integerUpTo(min, max int, dst func(*Config) *int) func(*Config, string) error {
	want := fmt.Errorf("want a whole number from %d to %d", min, max)
	if max == math.MaxInt {
		want = fmt.Errorf("want a whole number ≥ %d", min)
	}
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < min || n > max {
			return want
		}
		*dst(c) = n
		return nil
	}
}

func port(dst func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > 65535 {
			return errors.New("want a TCP port 1-65535")
		}
		*dst(c) = n
		return nil
	}
}

func float(min float64, dst func(*Config) *float64) func(*Config, string) error {
	return floatUpTo(min, math.Inf(1), dst)
}

// floatUpTo takes a finite number from min to max (NaN and Inf, which
// strconv parses, are refused); a bad value is told the whole range.
func floatUpTo(min, max float64, dst func(*Config) *float64) func(*Config, string) error {
	want := fmt.Errorf("want a number from %g to %g", min, max)
	if math.IsInf(max, 1) {
		want = fmt.Errorf("want a number ≥ %g", min)
	}
	return func(c *Config, v string) error {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsInf(f, 0) || !(f >= min && f <= max) {
			return want
		}
		*dst(c) = f
		return nil
	}
}

func duration(dst func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := parseDuration(v)
		if err != nil {
			return err
		}
		*dst(c) = d
		return nil
	}
}

func durations(dst func(*Config) *[]time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []time.Duration
		for _, part := range splitList(v) {
			d, err := parseDuration(part)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		*dst(c) = out
		return nil
	}
}

// parseDuration accepts Go durations ("90s", "1h") and, like the seed's
// numbers, plain seconds ("3600").
func parseDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
		return time.Duration(secs * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, errors.New(`want a duration such as "90s", "10m" or seconds`)
	}
	return d, nil
}

func addrPort(dst func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		ap, err := netip.ParseAddrPort(strings.TrimSpace(v))
		if err != nil {
			return errors.New("want an IP address and port such as 127.0.0.1:5353")
		}
		*dst(c) = ap.String()
		return nil
	}
}

func boolean(dst func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return errors.New("want true or false")
		}
		*dst(c) = b
		return nil
	}
}

func endpoint(https bool, dst func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		v = strings.TrimRight(strings.TrimSpace(v), "/")
		if err := checkURL(v, https); err != nil {
			return err
		}
		*dst(c) = v
		return nil
	}
}

func endpoints(dst func(*Config) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []string
		for _, part := range splitList(v) {
			part = strings.TrimRight(part, "/")
			if err := checkURL(part, false); err != nil {
				return err
			}
			out = append(out, part)
		}
		*dst(c) = out
		return nil
	}
}

// hostnames takes a comma-separated list of DNS names, each as
// hostname.Normalize returns it.
func hostnames(dst func(*Config) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []string
		for _, part := range splitList(v) {
			n, err := hostname.Normalize(part)
			if err != nil {
				return err
			}
			out = append(out, n)
		}
		if len(out) == 0 {
			return errors.New("want at least one domain")
		}
		*dst(c) = out
		return nil
	}
}

func checkURL(v string, httpsOnly bool) error {
	u, err := url.Parse(v)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return errors.New("want an http(s) URL such as https://host:port")
	}
	if httpsOnly && u.Scheme != "https" {
		return errors.New("want an https URL (Entra and ARM are only spoken to over TLS)")
	}
	return nil
}

// formatDuration writes a default the way a user would set it: 10m, not
// 10m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// formatDurations writes a default list the way a user would set it.
func formatDurations(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = formatDuration(d)
	}
	return strings.Join(parts, ",")
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// extensionID accepts only the exact ARM grammar of a cluster extension's
// ID, so a malformed one stops the run before any request (phase 2 would
// otherwise find out after detection, Entra and IMDS).
func extensionID(c *Config, v string) error {
	if _, err := azure.ParseExtensionID(strings.TrimSpace(v)); err != nil {
		return err
	}
	c.ExtensionResourceID = strings.TrimSpace(v)
	return nil
}

func logLevel(c *Config, v string) error {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "DEBUG":
		c.LogLevel = slog.LevelDebug
	case "INFO", "":
		c.LogLevel = slog.LevelInfo
	case "WARNING", "WARN":
		c.LogLevel = slog.LevelWarn
	case "ERROR", "CRITICAL":
		c.LogLevel = slog.LevelError
	default:
		return errors.New("want DEBUG, INFO, WARNING, ERROR or CRITICAL")
	}
	return nil
}

var settings = []setting{
	{group: "Marketplace and Azure identity"},
	{flag: "extension-resource-id", envs: []string{"EXTENSION_RESOURCE_ID"}, help: "ARM resource ID of the cluster extension whose Marketplace plan is verified", set: extensionID},
	{flag: "publisher-id", envs: []string{"MARKETPLACE_PUBLISHER_ID"}, help: "expected plan publisher", set: str(func(c *Config) *string { return &c.PublisherID })},
	{flag: "offer-id", envs: []string{"MARKETPLACE_OFFER_ID"}, help: "expected plan product (offer ID)", set: str(func(c *Config) *string { return &c.OfferID })},
	{flag: "plan-id", envs: []string{"MARKETPLACE_PLAN_ID"}, help: "expected plan name (plan ID)", set: str(func(c *Config) *string { return &c.PlanID })},
	{flag: "azure-credential-mode", envs: []string{"AZURE_CREDENTIAL_MODE"}, def: string(azure.WorkloadIdentity), help: "how ARM is reached: workload-identity (the webhook's federated token) or managed-identity (AZURE_CLIENT_ID through IMDS); set explicitly, its identity settings are checked at load", set: func(c *Config, v string) error {
		m, err := azure.ParseCredentialMode(strings.TrimSpace(v))
		c.AzureCredentialMode = m
		return err
	}},
	{flag: "azure-client-id", envs: []string{"AZURE_CLIENT_ID"}, help: "workload-identity: the client ID the webhook injects; managed-identity: the extension's managed identity (the chart's global.azure.identity.clientId)", set: str(func(c *Config) *string { return &c.AzureClientID })},
	{flag: "azure-tenant-id", envs: []string{"AZURE_TENANT_ID"}, help: "Entra tenant ID (injected by the webhook)", set: str(func(c *Config) *string { return &c.AzureTenantID })},
	{flag: "azure-federated-token-file", envs: []string{"AZURE_FEDERATED_TOKEN_FILE"}, help: "projected ServiceAccount token file (injected by the webhook)", set: str(func(c *Config) *string { return &c.AzureTokenFile })},
	{flag: "azure-authority-host", envs: []string{"AZURE_AUTHORITY_HOST"}, help: "Entra authority host, https (injected by the webhook; default public cloud)", set: endpoint(true, func(c *Config) *string { return &c.AzureAuthorityHost })},
	{flag: "arm-endpoint", envs: []string{"ARM_ENDPOINT"}, def: azure.DefaultARMEndpoint, help: "Azure Resource Manager endpoint, https", set: endpoint(true, func(c *Config) *string { return &c.ARMEndpoint })},
	{flag: "attestation-roots", envs: []string{"ATTESTATION_ROOTS_FILE"}, help: "PEM trust anchors for IMDS attested documents instead of the pinned Azure roots (tests and the fake cloud only)", set: str(func(c *Config) *string { return &c.AttestationRoots })},
	{flag: "aia-allowed-hosts", envs: []string{"AIA_ALLOWED_HOSTS"}, def: strings.Join(azure.DefaultAIAAllowedHosts, ","), help: "hosts the attested document's intermediate may be fetched from, comma-separated", set: func(c *Config, v string) error { c.AIAAllowedHosts = splitList(v); return nil }},
	{flag: "verify-retry-max", envs: []string{"VERIFY_RETRY_MAX"}, def: strconv.Itoa(azure.DefaultRetryMax), help: "attempts for ARM and IMDS calls", set: integerUpTo(1, azure.MaxRetryMax, func(c *Config) *int { return &c.VerifyRetryMax })},
	{flag: "verify-retry-backoff", envs: []string{"VERIFY_RETRY_BACKOFF"}, def: formatFloat(azure.DefaultRetryBackoff), help: "backoff factor: IMDS waits 1s × factor^n between attempts; ARM starts at factor seconds and doubles (Retry-After wins)", set: floatUpTo(1, azure.MaxRetryBackoff, func(c *Config) *float64 { return &c.VerifyRetryBackoff })},

	{group: "Cloud detection"},
	{flag: "azure-imds-endpoint", envs: []string{"AZURE_IMDS_ENDPOINT"}, def: providers.DefaultAzureIMDS, help: "Azure IMDS base URL", set: endpoint(false, func(c *Config) *string { return &c.AzureIMDSEndpoint })},
	{flag: "gcp-metadata-endpoints", envs: []string{"GCP_METADATA_ENDPOINTS"}, def: strings.Join(providers.DefaultGCPEndpoints, ","), help: "GCP metadata base URLs, comma-separated", set: endpoints(func(c *Config) *[]string { return &c.GCPMetadataEndpoints })},
	{flag: "aws-imds-endpoints", envs: []string{"AWS_IMDS_ENDPOINTS"}, def: strings.Join(providers.DefaultAWSEndpoints, ","), help: "AWS IMDS base URLs, comma-separated", set: endpoints(func(c *Config) *[]string { return &c.AWSIMDSEndpoints })},
	{flag: "detect-budget", envs: []string{"DETECT_BUDGET"}, def: formatDuration(providers.DefaultBudget), help: "time for all metadata probes together", set: duration(func(c *Config) *time.Duration { return &c.DetectBudget })},
	{flag: "dmi-dir", envs: []string{"DMI_DIR_PATH"}, def: dmi.DefaultDir, help: "directory of the DMI files sys_vendor, product_name, chassis_asset_tag", set: str(func(c *Config) *string { return &c.DMIDir })},

	{group: "Region and update servers"},
	{flag: "config", envs: []string{"REGIONSRV_CONFIG"}, def: regionconfig.DefaultPath, help: "regionserverclnt.cfg to read", set: str(func(c *Config) *string { return &c.RegionConfigPath })},
	{flag: "ca-file", envs: []string{"SSL_CERT_FILE"}, help: "PEM bundle trusted for Entra and ARM: --ca-file adds it to the system roots; SSL_CERT_FILE, which Go reads itself, replaces them", set: str(func(c *Config) *string { return &c.CAFile })},
	{flag: "region-server-port", envs: []string{"REGION_SERVER_PORT"}, def: strconv.Itoa(smt.DefaultPort), help: "TCP port of the region servers", set: port(func(c *Config) *int { return &c.RegionServerPort })},
	{flag: "update-server-https-port", envs: []string{"UPDATE_SERVER_HTTPS_PORT"}, def: strconv.Itoa(smt.DefaultPort), help: "HTTPS port of the update servers (health, certificate, address race)", set: port(func(c *Config) *int { return &c.UpdateHTTPSPort })},
	{flag: "update-server-http-port", envs: []string{"UPDATE_SERVER_HTTP_PORT"}, def: strconv.Itoa(smt.DefaultHTTPPort), help: "HTTP port of the update servers (certificate when httpsOnly is not true)", set: port(func(c *Config) *int { return &c.UpdateHTTPPort })},
	{flag: "region-pass-timeouts", envs: []string{"REGION_PASS_TIMEOUTS"}, def: formatDurations(smt.DefaultPassTimeouts), help: "request timeout of each pass over the region servers", set: durations(func(c *Config) *[]time.Duration { return &c.RegionPassTimeouts })},
	{flag: "region-pass-pauses", envs: []string{"REGION_PASS_PAUSES"}, def: formatDurations(smt.DefaultPassPauses), help: "pause before the second, third, … pass", set: durations(func(c *Config) *[]time.Duration { return &c.RegionPassPauses })},
	{flag: "update-server-domains", envs: []string{"UPDATE_SERVER_DOMAINS"}, def: strings.Join(smt.DefaultDomains, ","), help: "domains an update server's name must be under, comma-separated (never the cluster domain)", set: hostnames(func(c *Config) *[]string { return &c.UpdateServerDomains })},
	{flag: "update-server-allow-loopback", envs: []string{"UPDATE_SERVER_ALLOW_LOOPBACK"}, def: "false", boolean: true, help: "TESTS AND THE FAKE CLOUD ONLY: accept update servers at loopback addresses (logged as a warning on every run)", set: boolean(func(c *Config) *bool { return &c.UpdateServerAllowLoopback })},

	{group: "Kubernetes storage"},
	{flag: "registration-code", envs: []string{"REGISTRATION_CODE", "REG_CODE", "REGCODE"}, secret: true, help: "SUSE/Rancher registration code (the first non-empty variable wins)", set: func(c *Config, v string) error { c.RegCode = Secret(v); return nil }},
	{flag: "secret-name", envs: []string{"REGISTRATION_SECRET_NAME"}, def: kube.SecretName, help: "Secret read by rancher/scc-operator", set: str(func(c *Config) *string { return &c.SecretName })},
	{flag: "secret-namespace", envs: []string{"REGISTRATION_SECRET_NAMESPACE"}, def: kube.Namespace, help: "namespace of the Secret and the Lease", set: str(func(c *Config) *string { return &c.SecretNamespace })},
	{flag: "kubeconfig", envs: []string{"KUBECONFIG"}, help: "kubeconfig for a run from a workstation (default: in-cluster)", set: str(func(c *Config) *string { return &c.Kubeconfig })},
	{flag: "kubernetes-service-host", envs: []string{"KUBERNETES_SERVICE_HOST"}, help: "API server host (injected by Kubernetes)", set: str(func(c *Config) *string { return &c.KubeHost })},
	{flag: "kubernetes-service-port", envs: []string{"KUBERNETES_SERVICE_PORT"}, help: "API server port (injected by Kubernetes)", set: str(func(c *Config) *string { return &c.KubePort })},
	{flag: "kubernetes-token", envs: []string{"KUBERNETES_TOKEN"}, def: kube.DefaultTokenFile, help: "bearer token file for the API server", set: str(func(c *Config) *string { return &c.KubeToken })},
	{flag: "kubernetes-ca-cert", envs: []string{"KUBERNETES_CA_CERT"}, def: kube.DefaultCAFile, help: `API server CA file, or "False" to skip verification (insecure)`, set: str(func(c *Config) *string { return &c.KubeCACert })},
	{flag: "k8s-retry-max", envs: []string{"K8S_RETRY_MAX"}, def: strconv.Itoa(kube.DefaultRetryMax), help: "attempts for Kubernetes reads and writes", set: integer(1, func(c *Config) *int { return &c.K8sRetryMax })},
	{flag: "k8s-retry-backoff", envs: []string{"K8S_RETRY_BACKOFF"}, def: formatFloat(kube.DefaultRetryBackoff), help: "backoff multiplier between Kubernetes attempts (first pause 1s)", set: float(1, func(c *Config) *float64 { return &c.K8sRetryBackoff })},
	{flag: "lease-name", envs: []string{"LEASE_NAME"}, def: kube.LeaseName, help: "Lease that keeps two runs apart", set: str(func(c *Config) *string { return &c.LeaseName })},
	{flag: "pod-name", envs: []string{"POD_NAME"}, help: "holder written into the Lease (downward API; default the host name)", set: str(func(c *Config) *string { return &c.PodName })},
	{flag: "job-name", envs: []string{"JOB_NAME"}, help: "name of the Job running us (downward API label batch.kubernetes.io/job-name)", set: str(func(c *Config) *string { return &c.JobName })},
	{flag: "cronjob-name", envs: []string{"CRONJOB_NAME"}, def: kube.CronJobName, help: "name of the CronJob; its scheduled Jobs take the startup sleep", set: str(func(c *Config) *string { return &c.CronJobName })},
	{flag: "job-uid", envs: []string{"JOB_UID"}, help: "UID of the Job running us (downward API label batch.kubernetes.io/controller-uid); with JOB_NAME it names the Job the run's Events are about", set: str(func(c *Config) *string { return &c.JobUID })},
	{flag: "in-cluster-dns", envs: []string{"IN_CLUSTER_DNS"}, def: "true", boolean: true, help: "in-cluster DNS: make the update server's name resolve in the cluster through CoreDNS", set: boolean(func(c *Config) *bool { return &c.InClusterDNS })},

	{group: "Handover to rancher/scc-operator"},
	{flag: "handover-settle", envs: []string{"HANDOVER_SETTLE"}, def: formatDuration(handover.DefaultSettle), help: "how long every check of the handover wait must keep passing before the Secret is written, so that every CoreDNS replica serves the name, not only the first to reload (0 hands over at the first pass)", set: duration(func(c *Config) *time.Duration { return &c.HandoverSettle })},
	{flag: "handover-timeout", envs: []string{"HANDOVER_TIMEOUT"}, def: formatDuration(handover.DefaultTimeout), help: "before writing the Secret, wait up to this long until the update server's name resolves through the cluster's DNS to the address the run mapped and answers TLS there with the pinned certificate (within the run deadline; 0 disables the wait, for tests only)", set: duration(func(c *Config) *time.Duration { return &c.HandoverTimeout })},
	{flag: "handover-dns-server", envs: []string{"HANDOVER_DNS_SERVER"}, help: "ip:port of the DNS server the handover wait asks instead of the pod's resolver (tests only)", set: addrPort(func(c *Config) *string { return &c.HandoverDNSServer })},
	{flag: "operator-wait", envs: []string{"OPERATOR_WAIT"}, def: formatDuration(DefaultOperatorWait), help: "after writing the Secret, wait up to this long for rancher/scc-operator's Registration to become active or fail (within the run deadline; 0 reads it once)", set: duration(func(c *Config) *time.Duration { return &c.OperatorWait })},

	{group: "The run"},
	{flag: "run-deadline", envs: []string{"RUN_DEADLINE"}, def: formatDuration(DefaultRunDeadline), help: "time a run may take after the startup sleep", set: duration(func(c *Config) *time.Duration { return &c.RunDeadline })},
	{flag: "startup-sleep-max", envs: []string{"STARTUP_SLEEP_MAX"}, def: formatDuration(DefaultStartupSleepMax), help: "upper bound of the random sleep before a scheduled run (0 disables)", set: duration(func(c *Config) *time.Duration { return &c.StartupSleepMax })},
	{flag: "dry-run", envs: []string{"DRY_RUN"}, boolean: true, def: "false", help: "run every phase, print the Secret (secrets redacted), write nothing", set: boolean(func(c *Config) *bool { return &c.DryRun })},
	{flag: "output", envs: []string{"OUTPUT_FILE"}, help: "write the Secret manifest to this file (mode 0600) instead of the cluster", set: str(func(c *Config) *string { return &c.Output })},
	{flag: "log-level", envs: []string{"REGISTRATION_ENGINE_LOG_LEVEL", "LOG_LEVEL"}, def: "INFO", help: "DEBUG, INFO, WARNING, ERROR or CRITICAL", set: logLevel},
	{flag: "log-format", envs: []string{"LOG_FORMAT"}, def: "json", help: "json, or text for people", set: func(c *Config, v string) error {
		if v != "json" && v != "text" {
			return errors.New("want json or text")
		}
		c.LogFormat = v
		return nil
	}},
}

// LoadConfig fills a Config from args (flags win), then getenv, then the
// defaults, validates it, and reads the region servers' file
// (REGIONSRV_CONFIG). Every problem, the file's included, is reported at once
// in one permanent error before anything is contacted; a bad value names the
// flag or variable and what it got.
func LoadConfig(args []string, getenv func(string) string) (*Config, error) {
	c := &Config{}
	fs := flag.NewFlagSet("registration-engine", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	values := make(map[string]*string, len(settings))
	for _, s := range settings {
		if s.flag == "" {
			continue
		}
		v := new(string)
		values[s.flag] = v
		if s.boolean {
			fs.Func(s.flag, s.help, func(x string) error { *v = x; return nil })
			boolFlag(fs, s.flag)
		} else {
			fs.StringVar(v, s.flag, "", s.help)
		}
	}
	fs.BoolVar(&c.ShowHelp, "help", false, "show this help")
	fs.BoolVar(&c.ShowVersion, "version", false, "print the version")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.ShowHelp = true
			return c, nil
		}
		return nil, failure.Permanent(fmt.Errorf("config: %w (see --help)", err))
	}
	if fs.NArg() > 0 {
		return nil, failure.Permanent(fmt.Errorf("config: unexpected argument %q (see --help)", fs.Arg(0)))
	}
	if c.ShowHelp || c.ShowVersion {
		return c, nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c.given, c.rejected = map[string]bool{}, map[string]bool{}

	var problems []error
	for _, s := range settings {
		if s.flag == "" {
			continue
		}
		val, from := s.def, "default"
		if set[s.flag] {
			val, from = *values[s.flag], "--"+s.flag
		} else {
			for _, e := range s.envs {
				if v := getenv(e); v != "" {
					val, from = v, e
					break
				}
			}
		}
		if val == "" && s.def == "" {
			continue
		}
		c.given[s.flag] = from != "default"
		var problem error
		if isPlaceholder(val) {
			problem = placeholderProblem(from)
		} else if err := s.set(c, val); err != nil {
			shown := val
			if s.secret {
				shown = Secret(val).String()
			}
			problem = fmt.Errorf("%s=%q: %w", from, shown, err)
		}
		if problem != nil {
			problems = append(problems, problem)
			c.rejected[s.flag] = true
			if s.def != "" {
				_ = s.set(c, s.def) // so Validate does not report the same setting twice
			}
		}
	}
	if err := c.Validate(); err != nil {
		problems = append(problems, err)
	}
	// The region servers' file is configuration too: a broken one must stop
	// the run here, with the other problems, not after phase 2 has called
	// IMDS, Entra and ARM.
	if settings, err := regionconfig.Load(c.RegionConfigPath); err != nil {
		problems = append(problems, fmt.Errorf("REGIONSRV_CONFIG: %w", err))
	} else {
		c.RegionSettings = settings
	}
	if len(problems) > 0 {
		return nil, failure.Permanent(fmt.Errorf("config: %w", errors.Join(problems...)))
	}
	return c, nil
}

// boolFlag lets `--dry-run` stand alone like a flag.Bool.
func boolFlag(fs *flag.FlagSet, name string) {
	f := fs.Lookup(name)
	f.Value = boolValue{f.Value}
}

type boolValue struct{ flag.Value }

func (boolValue) IsBoolFlag() bool { return true }

// Validate checks what single values cannot: relations between settings.
// Presence of the Azure settings is checked when Azure is detected (phase
// 2), so that a run on another cloud reports the cloud, not a missing
// variable.
func (c *Config) Validate() error {
	var problems []error
	if c.SecretName == "" || c.SecretNamespace == "" {
		problems = append(problems, errors.New("REGISTRATION_SECRET_NAME and REGISTRATION_SECRET_NAMESPACE must not be empty"))
	}
	if c.RunDeadline <= 0 {
		problems = append(problems, errors.New("RUN_DEADLINE must be positive"))
	}
	if len(c.RegionPassTimeouts) == 0 {
		problems = append(problems, errors.New("REGION_PASS_TIMEOUTS needs at least one duration"))
	}
	if len(c.RegionPassPauses) > 0 && len(c.RegionPassPauses) < len(c.RegionPassTimeouts)-1 {
		problems = append(problems, fmt.Errorf("REGION_PASS_PAUSES has %d pauses for %d passes; give %d", len(c.RegionPassPauses), len(c.RegionPassTimeouts), len(c.RegionPassTimeouts)-1))
	}
	// A mode set explicitly (the chart and the overlay always set it) says
	// this is an Azure deployment: its identity settings are checked now.
	// Defaulted, they are checked when Azure is detected, so that a run
	// elsewhere reports the cloud. A rejected value was already reported.
	if c.given["azure-credential-mode"] && !c.rejected["azure-credential-mode"] && !c.rejected["azure-client-id"] &&
		!c.rejected["azure-tenant-id"] && !c.rejected["azure-federated-token-file"] {
		problems = append(problems, azure.CheckCredential(azure.Config{
			CredentialMode: c.AzureCredentialMode, ClientID: c.AzureClientID, TenantID: c.AzureTenantID, TokenFile: c.AzureTokenFile,
		})...)
	}
	// The handover needs every check to pass for HANDOVER_SETTLE within
	// HANDOVER_TIMEOUT: a settle as long as the timeout fails every run
	// after CoreDNS was edited, however healthy the cluster.
	if c.InClusterDNS && c.HandoverTimeout > 0 && c.HandoverSettle >= c.HandoverTimeout {
		problems = append(problems, fmt.Errorf("HANDOVER_SETTLE=%s is not shorter than HANDOVER_TIMEOUT=%s: the handover wait would always time out; raise HANDOVER_TIMEOUT or lower HANDOVER_SETTLE",
			c.HandoverSettle, c.HandoverTimeout))
	}
	if c.DryRun && c.Output != "" {
		problems = append(problems, errors.New("--dry-run and --output exclude each other: a dry run writes nothing"))
	}
	for _, f := range []struct{ name, path string }{{"ATTESTATION_ROOTS_FILE", c.AttestationRoots}, {"SSL_CERT_FILE", c.CAFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", f.name, err))
		}
	}
	return errors.Join(problems...)
}

// LogValue logs the effective configuration once, secrets redacted.
func (c *Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("extensionResourceId", c.ExtensionResourceID),
		slog.String("plan", c.PublisherID+":"+c.OfferID+":"+c.PlanID),
		slog.String("azureCredentialMode", string(c.AzureCredentialMode)),
		slog.String("azureClientId", c.AzureClientID),
		slog.String("azureTenantId", c.AzureTenantID),
		slog.String("armEndpoint", c.ARMEndpoint),
		slog.String("azureImdsEndpoint", c.AzureIMDSEndpoint),
		slog.String("dmiDir", c.DMIDir),
		slog.String("regionConfig", c.RegionConfigPath),
		slog.Any("regCode", c.RegCode),
		slog.Bool("regCodeSet", c.RegCode != ""),
		slog.String("secret", c.SecretNamespace+"/"+c.SecretName),
		slog.String("lease", c.LeaseName),
		slog.String("jobName", c.JobName),
		slog.String("runDeadline", c.RunDeadline.String()),
		slog.String("startupSleepMax", c.StartupSleepMax.String()),
		slog.Bool("dryRun", c.DryRun),
		slog.String("output", c.Output),
		slog.Bool("inClusterDns", c.InClusterDNS),
		slog.String("handoverTimeout", c.HandoverTimeout.String()),
		slog.String("handoverSettle", c.HandoverSettle.String()),
		slog.String("handoverDnsServer", c.HandoverDNSServer),
		slog.String("operatorWait", c.OperatorWait.String()),
		slog.String("jobUid", c.JobUID),
	)
}

// WriteHelp documents every flag with its environment variables and default.
func WriteHelp(w io.Writer) {
	fmt.Fprint(w, `registration-engine registers a Rancher / SUSE Pay-As-You-Go deployment from the
Azure Marketplace with SUSE's update infrastructure and writes the Secret that
rancher/scc-operator reads. It runs once and exits; a CronJob runs it.

Usage:
  registration-engine [flags]
  registration-engine status [--kubeconfig FILE] [--context NAME] [-n NAMESPACE] [-o text|json]
  registration-engine attestation inspect [--at RFC3339] [--roots PEM] [--intermediates PEM] [--offline] FILE|-

Every flag can also be set by the environment variable(s) beside it; a flag
wins over the environment, the environment over the default.
`)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, s := range settings {
		if s.flag == "" {
			fmt.Fprintf(tw, "\n%s:\n", s.group)
			continue
		}
		def := ""
		if s.def != "" {
			def = " (default " + s.def + ")"
		}
		fmt.Fprintf(tw, "  --%s\t%s\t%s%s\n", s.flag, strings.Join(s.envs, " | "), s.help, def)
	}
	fmt.Fprintf(tw, "\n  --help\t\tshow this help\n  --version\t\tprint the version\n")
	_ = tw.Flush()
	fmt.Fprintf(w, "\nExit codes: %d registered or rightly skipped, %d transient failure (the Job retries),\n%d permanent failure, or a Registration rancher/scc-operator marked Failed (the Job fails at once),\n%d run deadline exceeded, %d terminated.\n",
		ExitOK, ExitTransient, ExitPermanent, ExitDeadline, ExitTerminated)
}
