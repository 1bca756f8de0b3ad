package job

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/incluster/handover"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/regionconfig"
	"github.com/rancher/registration-engine/job/remedy"
	"github.com/rancher/registration-engine/job/retry"
	"github.com/rancher/registration-engine/job/smt"
	"github.com/rancher/registration-engine/providers"
	"github.com/rancher/registration-engine/providers/azure"
	"github.com/rancher/registration-engine/providers/dmi"
)

// The settings: each one's flag, variables, default, help and parser, in
// the order --help lists them.

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

// regCodeVars are the variables that may hold the registration code, the
// first non-empty one winning: the one list the setting, the messages that
// name them and the redaction of a run that cannot start read.
var regCodeVars = []string{"REGISTRATION_CODE", "REG_CODE", "REGCODE"}

// regCodeVarsText is regCodeVars as messages name them.
var regCodeVarsText = regCodeVars[0] + " (or " + strings.Join(regCodeVars[1:], " or ") + ")"

// updateServerDomains reads UPDATE_SERVER_DOMAINS: host names (hostnames),
// none of them the cluster domain or under or above it (smt.CheckDomain).
func updateServerDomains(c *Config, v string) error {
	if err := hostnames(func(c *Config) *[]string { return &c.SMT.Domains })(c, v); err != nil {
		return err
	}
	var errs []error
	for _, d := range c.SMT.Domains {
		errs = append(errs, smt.CheckDomain(d))
	}
	return errors.Join(errs...)
}

var settings = []setting{
	{group: "Marketplace and Azure identity"},
	{flag: "extension-resource-id", envs: []string{"EXTENSION_RESOURCE_ID"}, help: "ARM resource ID of the cluster extension whose Marketplace plan is verified", set: str(func(c *Config) *string { return &c.Azure.ExtensionResourceID })},
	{flag: "publisher-id", envs: []string{"MARKETPLACE_PUBLISHER_ID"}, help: "expected plan publisher", set: str(func(c *Config) *string { return &c.Azure.Publisher })},
	{flag: "offer-id", envs: []string{"MARKETPLACE_OFFER_ID"}, help: "expected plan product (offer ID)", set: str(func(c *Config) *string { return &c.Azure.Offer })},
	{flag: "plan-id", envs: []string{"MARKETPLACE_PLAN_ID"}, help: "expected plan name (plan ID)", set: str(func(c *Config) *string { return &c.Azure.Plan })},
	{flag: "azure-credential-mode", envs: []string{"AZURE_CREDENTIAL_MODE"}, def: string(azure.WorkloadIdentity), help: "how ARM is reached: workload-identity (the webhook's federated token) or managed-identity (AZURE_CLIENT_ID through IMDS); set explicitly, its identity settings are checked at load", set: func(c *Config, v string) error {
		m, err := azure.ParseCredentialMode(strings.TrimSpace(v))
		c.Azure.CredentialMode = m
		return err
	}},
	{flag: "azure-client-id", envs: []string{"AZURE_CLIENT_ID"}, help: "workload-identity: the client ID the webhook injects; managed-identity: the extension's managed identity (the chart's global.azure.identity.clientId)", set: str(func(c *Config) *string { return &c.Azure.ClientID })},
	{flag: "azure-tenant-id", envs: []string{"AZURE_TENANT_ID"}, help: "Entra tenant ID (injected by the webhook)", set: str(func(c *Config) *string { return &c.Azure.TenantID })},
	{flag: "azure-federated-token-file", envs: []string{"AZURE_FEDERATED_TOKEN_FILE"}, help: "projected ServiceAccount token file (injected by the webhook)", set: str(func(c *Config) *string { return &c.Azure.TokenFile })},
	{flag: "azure-authority-host", envs: []string{"AZURE_AUTHORITY_HOST"}, help: "Entra authority host, https (injected by the webhook; default public cloud)", set: endpoint(func(c *Config) *string { return &c.Azure.AuthorityHost })},
	{flag: "arm-endpoint", envs: []string{"ARM_ENDPOINT"}, def: azure.DefaultARMEndpoint, help: "Azure Resource Manager endpoint, https", set: endpoint(func(c *Config) *string { return &c.Azure.ARMEndpoint })},
	{flag: "attestation-roots", envs: []string{"ATTESTATION_ROOTS_FILE"}, help: "PEM trust anchors for IMDS attested documents instead of the pinned Azure roots (tests and the fake cloud only)", set: str(func(c *Config) *string { return &c.AttestationRoots })},
	{flag: "aia-allowed-hosts", envs: []string{"AIA_ALLOWED_HOSTS"}, def: strings.Join(azure.DefaultAIAAllowedHosts, ","), help: "hosts the attested document's intermediate may be fetched from, comma-separated", set: func(c *Config, v string) error { c.Azure.AIAAllowedHosts = splitList(v); return nil }},
	{flag: "verify-retry-max", envs: []string{"VERIFY_RETRY_MAX"}, def: strconv.Itoa(azure.DefaultRetryMax), help: "attempts for ARM and IMDS calls", set: wholeNumber(azure.WantRetryMax, func(c *Config) *int { return &c.Azure.RetryMax })},
	{flag: "verify-retry-backoff", envs: []string{"VERIFY_RETRY_BACKOFF"}, def: formatFloat(azure.DefaultRetryBackoff), help: "backoff factor: IMDS waits 1s × factor^n between attempts; ARM starts at factor seconds and doubles (Retry-After wins)", set: number(azure.WantRetryBackoff, func(c *Config) *float64 { return &c.Azure.RetryBackoff })},

	{group: "Cloud detection"},
	{flag: "azure-imds-endpoint", envs: []string{"AZURE_IMDS_ENDPOINT"}, def: providers.DefaultAzureIMDS, help: "Azure IMDS base URL", set: metadataEndpoint(func(c *Config) *string { return &c.Azure.IMDSEndpoint })},
	{flag: "gcp-metadata-endpoints", envs: []string{"GCP_METADATA_ENDPOINTS"}, def: strings.Join(providers.DefaultGCPEndpoints, ","), help: "GCP metadata base URLs, comma-separated", set: metadataEndpoints(func(c *Config) *[]string { return &c.GCPMetadataEndpoints })},
	{flag: "aws-imds-endpoints", envs: []string{"AWS_IMDS_ENDPOINTS"}, def: strings.Join(providers.DefaultAWSEndpoints, ","), help: "AWS IMDS base URLs, comma-separated", set: metadataEndpoints(func(c *Config) *[]string { return &c.AWSIMDSEndpoints })},
	{flag: "detect-budget", envs: []string{"DETECT_BUDGET"}, def: formatDuration(providers.DefaultBudget), help: "time for all metadata probes together", set: duration(func(c *Config) *time.Duration { return &c.DetectBudget })},
	{flag: "dmi-dir", envs: []string{"DMI_DIR_PATH"}, def: dmi.DefaultDir, help: "directory of the DMI files sys_vendor, product_name, chassis_asset_tag", set: str(func(c *Config) *string { return &c.DMIDir })},

	{group: "Region and update servers"},
	{flag: "config", envs: []string{"REGIONSRV_CONFIG"}, def: regionconfig.DefaultPath, help: "regionserverclnt.cfg to read", set: str(func(c *Config) *string { return &c.RegionConfigPath })},
	{flag: "ca-file", envs: []string{"SSL_CERT_FILE"}, help: "PEM bundle trusted for Entra and ARM: --ca-file adds it to the system roots; SSL_CERT_FILE, which Go reads itself, replaces them", set: str(func(c *Config) *string { return &c.CAFile })},
	{flag: "region-server-port", envs: []string{"REGION_SERVER_PORT"}, def: strconv.Itoa(smt.DefaultPort), help: "TCP port of the region servers", set: port(func(c *Config) *int { return &c.SMT.RegionPort })},
	{flag: "update-server-https-port", envs: []string{"UPDATE_SERVER_HTTPS_PORT"}, def: strconv.Itoa(smt.DefaultPort), help: "HTTPS port of the update servers (health, certificate, address race)", set: port(func(c *Config) *int { return &c.SMT.HTTPSPort })},
	{flag: "update-server-http-port", envs: []string{"UPDATE_SERVER_HTTP_PORT"}, def: strconv.Itoa(smt.DefaultHTTPPort), help: "HTTP port of the update servers (certificate when httpsOnly is not true)", set: port(func(c *Config) *int { return &c.SMT.HTTPPort })},
	{flag: "region-pass-timeouts", envs: []string{"REGION_PASS_TIMEOUTS"}, def: formatDurations(smt.DefaultPassTimeouts), help: "request timeout of each pass over the region servers", set: durations(func(c *Config) *[]time.Duration { return &c.SMT.PassTimeouts })},
	{flag: "region-pass-pauses", envs: []string{"REGION_PASS_PAUSES"}, def: formatDurations(smt.DefaultPassPauses), help: "pause before the second, third, … pass", set: durations(func(c *Config) *[]time.Duration { return &c.SMT.PassPauses })},
	{flag: "update-server-domains", envs: []string{"UPDATE_SERVER_DOMAINS"}, def: strings.Join(smt.DefaultDomains, ","), help: "domains an update server's name must be under, comma-separated (never the cluster domain)", set: updateServerDomains},
	{flag: "update-server-allow-loopback", envs: []string{"UPDATE_SERVER_ALLOW_LOOPBACK"}, def: "false", boolean: true, help: "TESTS AND THE FAKE CLOUD ONLY: accept update servers at loopback addresses (logged as a warning on every run)", set: boolean(func(c *Config) *bool { return &c.SMT.AllowLoopback })},

	{group: "Kubernetes storage"},
	{flag: "registration-code", envs: regCodeVars, secret: true, help: "SUSE/Rancher registration code (the first non-empty variable wins; white space around it is dropped; blank, white space inside or a placeholder is refused; none: the run ends waiting for one)", set: func(c *Config, v string) error {
		code, err := regCode(v)
		c.RegCode = Secret(code)
		return err
	}},
	{flag: "secret-name", envs: []string{"REGISTRATION_SECRET_NAME"}, def: operator.SecretName, help: "Secret read by rancher/scc-operator", set: str(func(c *Config) *string { return &c.SecretName })},
	{flag: "secret-namespace", envs: []string{"REGISTRATION_SECRET_NAMESPACE"}, def: operator.Namespace, help: "namespace of the Secret and the Lease", set: str(func(c *Config) *string { return &c.SecretNamespace })},
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
	{flag: "release-manager", envs: []string{"RELEASE_MANAGER"}, help: "who owns the release, for the commands a remedy gives: azure-extension (the Marketplace bundle: az k8s-extension update) or helm (helm upgrade); unset: both", set: func(c *Config, v string) error {
		c.ReleaseManager = strings.TrimSpace(v)
		if !slices.Contains(remedy.Managers, c.ReleaseManager) {
			return fmt.Errorf("want %s or %s", remedy.AzureExtension, remedy.Helm)
		}
		return nil
	}},
	{flag: "release-name", envs: []string{"RELEASE_NAME"}, help: "the Helm release (on the Marketplace, the extension's name), for the commands a remedy gives", set: str(func(c *Config) *string { return &c.ReleaseName })},
	{flag: "retry-cronjob-name", envs: []string{"RETRY_CRONJOB_NAME"}, help: "the retry CronJob, which a run suspends when no attempt is scheduled (it succeeded, or failed for good) and resumes when one is, so that a registered cluster runs no retry pod (the chart sets it to <name>-retry); empty: none to switch", set: str(func(c *Config) *string { return &c.RetryCronJobName })},
	{flag: "job-uid", envs: []string{"JOB_UID"}, help: "UID of the Job running us (downward API label batch.kubernetes.io/controller-uid); with JOB_NAME it names the Job the run's Events are about", set: str(func(c *Config) *string { return &c.JobUID })},
	{flag: "in-cluster-dns", envs: []string{"IN_CLUSTER_DNS"}, def: "true", boolean: true, help: "in-cluster DNS: make the update server's name resolve in the cluster through CoreDNS", set: boolean(func(c *Config) *bool { return &c.InCluster.Map })},
	{flag: "cluster-address-ranges", envs: []string{"CLUSTER_ADDRESS_RANGES"}, def: formatPrefixes(coredns.DefaultClusterRanges), help: "the cluster's own address ranges, comma-separated CIDRs (the chart's clusterAddressRanges, which the CoreDNS admission policy reads too): no entry for an address in them goes into a CoreDNS hosts block that answers reverse (PTR) queries", set: prefixes(func(c *Config) *[]netip.Prefix { return &c.InCluster.ClusterRanges })},

	{group: "Handover to rancher/scc-operator"},
	{flag: "handover-settle", envs: []string{"HANDOVER_SETTLE"}, def: formatDuration(handover.DefaultSettle), help: "how long every check of the handover wait must keep passing before the Secret is written, so that every CoreDNS replica serves the name, not only the first to reload (0 hands over at the first pass)", set: duration(func(c *Config) *time.Duration { return &c.InCluster.Settle })},
	{flag: "handover-timeout", envs: []string{"HANDOVER_TIMEOUT"}, def: formatDuration(handover.DefaultTimeout), help: "before writing the Secret, wait up to this long until the update server's name resolves through the cluster's DNS to the address the run mapped and answers TLS there with the pinned certificate (within the run deadline; 0 disables the wait, for tests only)", set: duration(func(c *Config) *time.Duration { return &c.InCluster.Timeout })},
	{flag: "handover-dns-server", envs: []string{"HANDOVER_DNS_SERVER"}, help: "ip:port of the DNS server the handover wait asks instead of the pod's resolver (tests only)", set: addrPort(func(c *Config) *string { return &c.InCluster.DNSServer })},
	{flag: "operator-wait", envs: []string{"OPERATOR_WAIT"}, def: formatDuration(DefaultOperatorWait), help: "after writing the Secret, wait up to this long for rancher/scc-operator's Registration to become active or fail (within the run deadline; 0 reads it once)", set: duration(func(c *Config) *time.Duration { return &c.OperatorWait })},
	{flag: "operator-recovery", envs: []string{"OPERATOR_RECOVERY"}, def: "true", boolean: true, help: "when rancher/scc-operator failed the Registration for a cause a retry can fix (" + operator.RecoverableCauses + ") and this run proved the update server reachable, delete scc-registration and write it afresh, " + operator.RecoveryLimit + " (false: only report it)", set: boolean(func(c *Config) *bool { return &c.Recovery.Enabled })},
	{flag: "operator-lease", envs: []string{"OPERATOR_LEASE"}, def: operator.LeaseNamespace + "/" + operator.LeaseName, help: "namespace/name of rancher/scc-operator's leader-election Lease: a recovery deletes nothing unless it is " + operator.LivenessRule, set: str(func(c *Config) *string { return &c.Recovery.OperatorLease })},

	{group: "The run"},
	{flag: "run-deadline", envs: []string{"RUN_DEADLINE"}, def: formatDuration(DefaultRunDeadline), help: "time a run may take after the startup sleep", set: duration(func(c *Config) *time.Duration { return &c.RunDeadline })},
	{flag: "startup-sleep-max", envs: []string{"STARTUP_SLEEP_MAX"}, def: formatDuration(DefaultStartupSleepMax), help: "upper bound of the random sleep before a scheduled run (0 disables)", set: duration(func(c *Config) *time.Duration { return &c.StartupSleepMax })},
	{flag: "retry-interval", envs: []string{"RETRY_INTERVAL"}, def: formatDuration(retry.DefaultTick), help: "how often the retry CronJob looks for a due attempt (its schedule's period); a failed run's next attempt is due after a quarter of the time it has been failing, less this, at most 6 h, so a cluster is registered within max(this, a quarter of the outage) after it ends; a registered cluster's failed refresh: twice the time it has been failing, at least 1 h, less this, at most 12 h (docs/RELIABILITY.md, \"Retries\")", set: duration(func(c *Config) *time.Duration { return &c.RetryInterval })},
	{flag: "propagation-window", envs: []string{"PROPAGATION_WINDOW"}, def: formatDuration(retry.DefaultFirstContact), help: "until the cluster's first success, and for this long after the engine's first run (its Lease's creation), at most 6h, Azure refusing the identity (ARM 401/403, Entra refusing the federated token, IMDS identity not found) is retried as Azure propagating it; after that it is permanent", set: duration(func(c *Config) *time.Duration { return &c.FirstContact })},
	{flag: "only-when-due", envs: []string{"ONLY_WHEN_DUE"}, def: "false", boolean: true, help: "the retry CronJob's runs: read the last run's record on the Lease and run only when its next attempt is due, else exit 0 at once", set: boolean(func(c *Config) *bool { return &c.OnlyWhenDue })},
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
