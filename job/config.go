package job

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

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

	// Region and update servers.
	RegionConfigPath   string
	CAFile             string
	RegionServerPort   int
	UpdateHTTPSPort    int
	UpdateHTTPPort     int
	RegionPassTimeouts []time.Duration
	RegionPassPauses   []time.Duration

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
	set     func(c *Config, v string) error
}

func str(dst func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *dst(c) = v; return nil }
}

func integer(min int, dst func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < min {
			return fmt.Errorf("want a whole number ≥ %d", min)
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
	return func(c *Config, v string) error {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < min {
			return fmt.Errorf("want a number ≥ %g", min)
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

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
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

// The production endpoints. Tests, the demo and the e2e override them.
const (
	DefaultAzureIMDS   = "http://169.254.169.254"
	DefaultARM         = "https://management.azure.com"
	DefaultRegionCfg   = "/etc/regionserverclnt.cfg"
	DefaultDMIDir      = "/sys/class/dmi/id"
	defaultGCPMetadata = "http://metadata.google.internal.,http://169.254.169.254,http://[fd20:ce::254]"
	defaultAWSIMDS     = "http://169.254.169.254,http://[fd00:ec2::254]"
)

var settings = []setting{
	{group: "Marketplace and Azure Workload Identity"},
	{flag: "extension-resource-id", envs: []string{"EXTENSION_RESOURCE_ID"}, help: "ARM resource ID of the cluster extension whose Marketplace plan is verified", set: str(func(c *Config) *string { return &c.ExtensionResourceID })},
	{flag: "publisher-id", envs: []string{"MARKETPLACE_PUBLISHER_ID"}, help: "expected plan publisher", set: str(func(c *Config) *string { return &c.PublisherID })},
	{flag: "offer-id", envs: []string{"MARKETPLACE_OFFER_ID"}, help: "expected plan product (offer ID)", set: str(func(c *Config) *string { return &c.OfferID })},
	{flag: "plan-id", envs: []string{"MARKETPLACE_PLAN_ID"}, help: "expected plan name (plan ID)", set: str(func(c *Config) *string { return &c.PlanID })},
	{flag: "azure-client-id", envs: []string{"AZURE_CLIENT_ID"}, help: "Workload Identity client ID (injected by the webhook)", set: str(func(c *Config) *string { return &c.AzureClientID })},
	{flag: "azure-tenant-id", envs: []string{"AZURE_TENANT_ID"}, help: "Entra tenant ID (injected by the webhook)", set: str(func(c *Config) *string { return &c.AzureTenantID })},
	{flag: "azure-federated-token-file", envs: []string{"AZURE_FEDERATED_TOKEN_FILE"}, help: "projected ServiceAccount token file (injected by the webhook)", set: str(func(c *Config) *string { return &c.AzureTokenFile })},
	{flag: "azure-authority-host", envs: []string{"AZURE_AUTHORITY_HOST"}, help: "Entra authority host, https (injected by the webhook; default public cloud)", set: endpoint(true, func(c *Config) *string { return &c.AzureAuthorityHost })},
	{flag: "arm-endpoint", envs: []string{"ARM_ENDPOINT"}, def: DefaultARM, help: "Azure Resource Manager endpoint, https", set: endpoint(true, func(c *Config) *string { return &c.ARMEndpoint })},
	{flag: "attestation-roots", envs: []string{"ATTESTATION_ROOTS_FILE"}, help: "PEM trust anchors for IMDS attested documents instead of the pinned Azure roots (tests and the fake cloud only)", set: str(func(c *Config) *string { return &c.AttestationRoots })},
	{flag: "aia-allowed-hosts", envs: []string{"AIA_ALLOWED_HOSTS"}, help: "hosts the attested document's intermediate may be fetched from, comma-separated (default Microsoft's and DigiCert's)", set: func(c *Config, v string) error { c.AIAAllowedHosts = splitList(v); return nil }},
	{flag: "verify-retry-max", envs: []string{"VERIFY_RETRY_MAX"}, def: "5", help: "attempts for ARM and IMDS calls", set: integer(1, func(c *Config) *int { return &c.VerifyRetryMax })},
	{flag: "verify-retry-backoff", envs: []string{"VERIFY_RETRY_BACKOFF"}, def: "2.0", help: "backoff factor: IMDS waits 1s × factor^n between attempts; ARM starts at factor seconds and doubles (Retry-After wins)", set: float(1, func(c *Config) *float64 { return &c.VerifyRetryBackoff })},

	{group: "Cloud detection"},
	{flag: "azure-imds-endpoint", envs: []string{"AZURE_IMDS_ENDPOINT"}, def: DefaultAzureIMDS, help: "Azure IMDS base URL", set: endpoint(false, func(c *Config) *string { return &c.AzureIMDSEndpoint })},
	{flag: "gcp-metadata-endpoints", envs: []string{"GCP_METADATA_ENDPOINTS"}, def: defaultGCPMetadata, help: "GCP metadata base URLs, comma-separated", set: endpoints(func(c *Config) *[]string { return &c.GCPMetadataEndpoints })},
	{flag: "aws-imds-endpoints", envs: []string{"AWS_IMDS_ENDPOINTS"}, def: defaultAWSIMDS, help: "AWS IMDS base URLs, comma-separated", set: endpoints(func(c *Config) *[]string { return &c.AWSIMDSEndpoints })},
	{flag: "detect-budget", envs: []string{"DETECT_BUDGET"}, def: "2s", help: "time for all metadata probes together", set: duration(func(c *Config) *time.Duration { return &c.DetectBudget })},
	{flag: "dmi-dir", envs: []string{"DMI_DIR_PATH"}, def: DefaultDMIDir, help: "directory of the DMI files sys_vendor, product_name, chassis_asset_tag", set: str(func(c *Config) *string { return &c.DMIDir })},

	{group: "Region and update servers"},
	{flag: "config", envs: []string{"REGIONSRV_CONFIG"}, def: DefaultRegionCfg, help: "regionserverclnt.cfg to read", set: str(func(c *Config) *string { return &c.RegionConfigPath })},
	{flag: "ca-file", envs: []string{"SSL_CERT_FILE"}, help: "PEM bundle trusted for Entra and ARM: --ca-file adds it to the system roots; SSL_CERT_FILE, which Go reads itself, replaces them", set: str(func(c *Config) *string { return &c.CAFile })},
	{flag: "region-server-port", envs: []string{"REGION_SERVER_PORT"}, def: "443", help: "TCP port of the region servers", set: port(func(c *Config) *int { return &c.RegionServerPort })},
	{flag: "update-server-https-port", envs: []string{"UPDATE_SERVER_HTTPS_PORT"}, def: "443", help: "HTTPS port of the update servers (health, certificate, address race)", set: port(func(c *Config) *int { return &c.UpdateHTTPSPort })},
	{flag: "update-server-http-port", envs: []string{"UPDATE_SERVER_HTTP_PORT"}, def: "80", help: "HTTP port of the update servers (certificate when httpsOnly is not true)", set: port(func(c *Config) *int { return &c.UpdateHTTPPort })},
	{flag: "region-pass-timeouts", envs: []string{"REGION_PASS_TIMEOUTS"}, def: "15s,7.5s,5s", help: "request timeout of each pass over the region servers", set: durations(func(c *Config) *[]time.Duration { return &c.RegionPassTimeouts })},
	{flag: "region-pass-pauses", envs: []string{"REGION_PASS_PAUSES"}, def: "20s,10s", help: "pause before the second, third, … pass", set: durations(func(c *Config) *[]time.Duration { return &c.RegionPassPauses })},

	{group: "Kubernetes storage"},
	{flag: "registration-code", envs: []string{"REGISTRATION_CODE", "REG_CODE", "REGCODE"}, help: "SUSE/Rancher registration code (the first non-empty variable wins)", set: func(c *Config, v string) error { c.RegCode = Secret(v); return nil }},
	{flag: "secret-name", envs: []string{"REGISTRATION_SECRET_NAME"}, def: "scc-registration", help: "Secret read by rancher/scc-operator", set: str(func(c *Config) *string { return &c.SecretName })},
	{flag: "secret-namespace", envs: []string{"REGISTRATION_SECRET_NAMESPACE"}, def: "cattle-scc-system", help: "namespace of the Secret and the Lease", set: str(func(c *Config) *string { return &c.SecretNamespace })},
	{flag: "kubeconfig", envs: []string{"KUBECONFIG"}, help: "kubeconfig for a run from a workstation (default: in-cluster)", set: str(func(c *Config) *string { return &c.Kubeconfig })},
	{flag: "kubernetes-service-host", envs: []string{"KUBERNETES_SERVICE_HOST"}, help: "API server host (injected by Kubernetes)", set: str(func(c *Config) *string { return &c.KubeHost })},
	{flag: "kubernetes-service-port", envs: []string{"KUBERNETES_SERVICE_PORT"}, help: "API server port (injected by Kubernetes)", set: str(func(c *Config) *string { return &c.KubePort })},
	{flag: "kubernetes-token", envs: []string{"KUBERNETES_TOKEN"}, def: "/var/run/secrets/kubernetes.io/serviceaccount/token", help: "bearer token file for the API server", set: str(func(c *Config) *string { return &c.KubeToken })},
	{flag: "kubernetes-ca-cert", envs: []string{"KUBERNETES_CA_CERT"}, def: "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", help: `API server CA file, or "False" to skip verification (insecure)`, set: str(func(c *Config) *string { return &c.KubeCACert })},
	{flag: "k8s-retry-max", envs: []string{"K8S_RETRY_MAX"}, def: "5", help: "attempts for Kubernetes reads and writes", set: integer(1, func(c *Config) *int { return &c.K8sRetryMax })},
	{flag: "k8s-retry-backoff", envs: []string{"K8S_RETRY_BACKOFF"}, def: "2.0", help: "backoff multiplier between Kubernetes attempts (first pause 1s)", set: float(1, func(c *Config) *float64 { return &c.K8sRetryBackoff })},
	{flag: "lease-name", envs: []string{"LEASE_NAME"}, def: "registration-engine", help: "Lease that keeps two runs apart", set: str(func(c *Config) *string { return &c.LeaseName })},
	{flag: "pod-name", envs: []string{"POD_NAME"}, help: "holder written into the Lease (downward API; default the host name)", set: str(func(c *Config) *string { return &c.PodName })},
	{flag: "job-name", envs: []string{"JOB_NAME"}, help: "name of the Job running us (downward API label batch.kubernetes.io/job-name)", set: str(func(c *Config) *string { return &c.JobName })},
	{flag: "cronjob-name", envs: []string{"CRONJOB_NAME"}, def: "registration-engine", help: "name of the CronJob; its scheduled Jobs take the startup sleep", set: str(func(c *Config) *string { return &c.CronJobName })},
	{flag: "job-uid", envs: []string{"JOB_UID"}, help: "UID of the Job running us (downward API label batch.kubernetes.io/controller-uid); with JOB_NAME it names the Job the run's Events are about", set: str(func(c *Config) *string { return &c.JobUID })},
	{flag: "in-cluster-dns", envs: []string{"IN_CLUSTER_DNS"}, def: "true", boolean: true, help: "in-cluster DNS: make the update server's name resolve in the cluster through CoreDNS", set: boolean(func(c *Config) *bool { return &c.InClusterDNS })},

	{group: "Handover to rancher/scc-operator"},
	{flag: "handover-timeout", envs: []string{"HANDOVER_TIMEOUT"}, def: "3m", help: "before writing the Secret, wait up to this long until the update server's name resolves through the cluster's DNS to the address the run mapped and answers TLS there with the pinned certificate (within the run deadline; 0 disables the wait, for tests only)", set: duration(func(c *Config) *time.Duration { return &c.HandoverTimeout })},
	{flag: "handover-dns-server", envs: []string{"HANDOVER_DNS_SERVER"}, help: "ip:port of the DNS server the handover wait asks instead of the pod's resolver (tests only)", set: addrPort(func(c *Config) *string { return &c.HandoverDNSServer })},
	{flag: "operator-wait", envs: []string{"OPERATOR_WAIT"}, def: "2m", help: "after writing the Secret, wait up to this long for rancher/scc-operator's Registration to become active or fail (within the run deadline; 0 reads it once)", set: duration(func(c *Config) *time.Duration { return &c.OperatorWait })},

	{group: "The run"},
	{flag: "run-deadline", envs: []string{"RUN_DEADLINE"}, def: "10m", help: "time a run may take after the startup sleep", set: duration(func(c *Config) *time.Duration { return &c.RunDeadline })},
	{flag: "startup-sleep-max", envs: []string{"STARTUP_SLEEP_MAX"}, def: "1h", help: "upper bound of the random sleep before a scheduled run (0 disables)", set: duration(func(c *Config) *time.Duration { return &c.StartupSleepMax })},
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
// defaults, and validates it. Every problem is reported at once in one
// permanent error; a bad value names the flag or variable and what it got.
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
		if err := s.set(c, val); err != nil {
			shown := val
			if s.flag == "registration-code" {
				shown = "REDACTED"
			}
			problems = append(problems, fmt.Errorf("%s=%q: %w", from, shown, err))
			if s.def != "" {
				_ = s.set(c, s.def) // so Validate does not report the same setting twice
			}
		}
	}
	if err := c.Validate(); err != nil {
		problems = append(problems, err)
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
