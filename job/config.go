package job

import (
	"errors"
	"fmt"
	"github.com/rancher/registration-engine/job/retry"
	"log/slog"
	"os"
	"time"

	"github.com/rancher/registration-engine/job/incluster"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/regionconfig"
	"github.com/rancher/registration-engine/job/smt"
	"github.com/rancher/registration-engine/providers/azure"
)

// Config is every setting of a run, filled once by LoadConfig from flags,
// then the environment, then defaults. Nothing reads the environment after
// it is built (the AZURE_* variables included: they are read here and handed
// to azidentity explicitly).
type Config struct {
	// Azure is phase 2's Marketplace plan, identity, endpoints (its
	// IMDSEndpoint is also the one phase 1 probes) and retry bounds, as
	// the settings fill them; its rules are azure.Config.Validate's and,
	// for the identity, azure.CheckCredential's. New adds what is not a
	// setting (the HTTP client, the trust anchors, the logger).
	Azure azure.Config
	// AttestationRoots is the PEM file New reads into Azure.Roots.
	AttestationRoots string

	// Metadata endpoints of the other clouds (overridable for tests and
	// the demo only).
	GCPMetadataEndpoints []string
	AWSIMDSEndpoints     []string
	DetectBudget         time.Duration
	DMIDir               string

	// Region and update servers. RegionSettings is the file at
	// RegionConfigPath, read and checked by LoadConfig with everything else.
	RegionConfigPath string
	RegionSettings   regionconfig.Settings
	CAFile           string
	// SMT is phase 4's ports, passes and update-server domains; its rules
	// are smt.Config.Validate's.
	SMT smt.Config

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
	// ReleaseManager and ReleaseName are RELEASE_MANAGER and RELEASE_NAME:
	// who owns the release, so that a remedy gives the customer's own
	// command (Remedies).
	ReleaseManager string
	ReleaseName    string
	// RetryCronJobName is the retry CronJob a run suspends and resumes
	// (RETRY_CRONJOB_NAME); empty: none.
	RetryCronJobName string

	// InCluster is phase 6's in-cluster half: the CoreDNS mapping and the
	// handover wait (IN_CLUSTER_DNS, CLUSTER_ADDRESS_RANGES, HANDOVER_*); its
	// own rules are incluster.Config.Validate's.
	InCluster incluster.Config
	// Handover to rancher/scc-operator.
	OperatorWait time.Duration
	// Recovery decides whether a run recovers a Registration the operator
	// failed for a passing cause (OPERATOR_RECOVERY, OPERATOR_LEASE); its
	// own rules are operator.Config.Validate's.
	Recovery operator.Config

	// The run.
	RunDeadline     time.Duration
	StartupSleepMax time.Duration
	// RetryInterval is the retry CronJob's period, FirstContact how long a
	// never-registered cluster waits out Azure's propagation, OnlyWhenDue
	// marks the retry CronJob's runs (job/retry.go).
	RetryInterval time.Duration
	FirstContact  time.Duration
	OnlyWhenDue   bool
	DryRun        bool
	Output        string
	LogLevel      slog.Level
	LogFormat     string

	ShowHelp    bool
	ShowVersion bool

	// given holds the flags of the settings set by a flag or a variable
	// (not defaulted); rejected those whose value was already reported
	// (Placeholder, or not parseable).
	given, rejected map[string]bool
}

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
	if c.RetryInterval <= 0 {
		problems = append(problems, errors.New("RETRY_INTERVAL must be positive: it is the retry CronJob's period"))
	}
	if c.FirstContact > retry.MaxFirstContact {
		problems = append(problems, fmt.Errorf("PROPAGATION_WINDOW %s is longer than its cap of %s (twelve times the 30 minutes Azure documents for a role assignment to take effect, and the schedule's shorter gap): set it to at most %s", formatDuration(c.FirstContact), formatDuration(retry.MaxFirstContact), formatDuration(retry.MaxFirstContact)))
	}
	if c.OnlyWhenDue && (c.DryRun || c.Output != "") {
		problems = append(problems, errors.New("ONLY_WHEN_DUE reads the last run from the engine's Lease: it excludes --dry-run and --output"))
	}
	if err := c.SMT.Validate(); err != nil {
		problems = append(problems, err)
	}
	if err := c.Azure.Validate(); err != nil {
		problems = append(problems, err)
	}
	// A mode set explicitly (the chart and the overlay always set it) says
	// this is an Azure deployment: its identity settings are checked now.
	// Defaulted, they are checked when Azure is detected, so that a run
	// elsewhere reports the cloud. A rejected value was already reported.
	if c.given["azure-credential-mode"] && !c.rejected["azure-credential-mode"] && !c.rejected["azure-client-id"] &&
		!c.rejected["azure-tenant-id"] && !c.rejected["azure-federated-token-file"] {
		problems = append(problems, azure.CheckCredential(c.Azure)...)
	}
	if err := c.InCluster.Validate(); err != nil {
		problems = append(problems, err)
	}
	if err := c.Recovery.Validate(); err != nil {
		problems = append(problems, err)
	}
	if c.Output != "" && c.RegCode == "" && !c.rejected["registration-code"] {
		// In a cluster a run with no code waits for one, keeping the
		// Secret's; a file has no Secret to keep, and a manifest with an
		// empty regCode, applied, is one the operator refuses.
		problems = append(problems, fmt.Errorf("%w: none is set, and --output (OUTPUT_FILE) writes the Secret for a cluster, which rancher/scc-operator refuses without one: set --registration-code or %s", ErrRegCode, regCodeVarsText))
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
		slog.String("extensionResourceId", c.Azure.ExtensionResourceID),
		slog.String("plan", c.Azure.Publisher+":"+c.Azure.Offer+":"+c.Azure.Plan),
		slog.String("azureCredentialMode", string(c.Azure.CredentialMode)),
		slog.String("azureClientId", c.Azure.ClientID),
		slog.String("azureTenantId", c.Azure.TenantID),
		slog.String("armEndpoint", c.Azure.ARMEndpoint),
		slog.String("azureImdsEndpoint", c.Azure.IMDSEndpoint),
		slog.String("dmiDir", c.DMIDir),
		slog.String("regionConfig", c.RegionConfigPath),
		slog.Any("regCode", c.RegCode),
		slog.Bool("regCodeSet", c.RegCode != ""),
		slog.String("secret", c.SecretNamespace+"/"+c.SecretName),
		slog.String("lease", c.LeaseName),
		slog.String("jobName", c.JobName),
		slog.String("runDeadline", c.RunDeadline.String()),
		slog.String("startupSleepMax", c.StartupSleepMax.String()),
		slog.String("retryInterval", c.RetryInterval.String()),
		slog.String("propagationWindow", c.FirstContact.String()),
		slog.Bool("onlyWhenDue", c.OnlyWhenDue),
		slog.String("retryCronJob", c.RetryCronJobName),
		slog.Bool("dryRun", c.DryRun),
		slog.String("output", c.Output),
		slog.Bool("inClusterDns", c.InCluster.Map),
		slog.String("clusterAddressRanges", formatPrefixes(c.InCluster.ClusterRanges)),
		slog.String("handoverTimeout", c.InCluster.Timeout.String()),
		slog.String("handoverSettle", c.InCluster.Settle.String()),
		slog.String("handoverDnsServer", c.InCluster.DNSServer),
		slog.String("operatorWait", c.OperatorWait.String()),
		slog.Bool("operatorRecovery", c.Recovery.Enabled),
		slog.String("operatorLease", c.Recovery.OperatorLease),
		slog.String("jobUid", c.JobUID),
	)
}
