package azure

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Production endpoints and the API versions the engine pins.
const (
	DefaultARMEndpoint = "https://management.azure.com"
	// DefaultRetryMax and DefaultRetryBackoff are VERIFY_RETRY_MAX's and
	// VERIFY_RETRY_BACKOFF's defaults; Min… and Max… their bounds, which
	// keep a run inside its deadline (Validate is the one place that
	// checks them; WantRetryMax and WantRetryBackoff say them).
	DefaultRetryMax     = 5
	MinRetryMax         = 1
	MaxRetryMax         = 20
	DefaultRetryBackoff = 2.0
	MinRetryBackoff     = 1.0
	MaxRetryBackoff     = 60.0
	// ExtensionAPIVersion is the ARM api-version of the extension GET (the
	// one the reference engine uses; top-level plan is present in it).
	ExtensionAPIVersion = "2023-05-01"
	// ManagedClusterAPIVersion is the ARM api-version of the managed
	// cluster GET: a stable (not preview) Microsoft.ContainerService
	// version; properties.nodeResourceGroup, the one field read, is in
	// every version.
	ManagedClusterAPIVersion = "2024-05-01"
	// IMDSAPIVersion is ≥ 2020-09-01, so the signed content carries
	// subscriptionId, sku and licenseType.
	IMDSAPIVersion = "2021-02-01"
	// armScope is the token scope for ARM.
	armScope = "https://management.azure.com/.default"
	// wiHint says how workload identity reaches a pod; every missing WI
	// variable points there.
	wiHint = `the workload identity webhook injects it only into pods labelled azure.workload.identity/use: "true" ` +
		`whose service account carries the annotation azure.workload.identity/client-id`
)

// What a bad VERIFY_RETRY_MAX or VERIFY_RETRY_BACKOFF is told: the whole
// range, whatever was wrong with it (package job's settings table says it
// of a value that is not a number at all).
var (
	WantRetryMax     = fmt.Sprintf("want a whole number from %d to %d", MinRetryMax, MaxRetryMax)
	WantRetryBackoff = fmt.Sprintf("want a number from %g to %g", MinRetryBackoff, MaxRetryBackoff)
)

// CredentialMode is how the engine gets its ARM token (AZURE_CREDENTIAL_MODE).
// There is no "auto": a pod that was meant to use one identity must never
// fall back to another one the node happens to have (what
// DefaultAzureCredential does), so the caller always names a mode.
type CredentialMode string

const (
	// WorkloadIdentity exchanges the ServiceAccount token the Workload
	// Identity webhook projects (AZURE_CLIENT_ID, AZURE_TENANT_ID,
	// AZURE_FEDERATED_TOKEN_FILE) at Entra ID. It needs a federated
	// identity credential, which a Marketplace ARM template cannot create.
	WorkloadIdentity CredentialMode = "workload-identity"
	// ManagedIdentity asks IMDS on the node for a token of the user-assigned
	// identity AZURE_CLIENT_ID: the cluster extension's identity, which the
	// Marketplace passes as global.azure.identity.clientId. No setup.
	ManagedIdentity CredentialMode = "managed-identity"
)

// CredentialModes lists the modes, for help texts and errors.
var CredentialModes = []CredentialMode{WorkloadIdentity, ManagedIdentity}

// wantMode is what every error about an unknown mode asks for.
const wantMode = "want " + string(WorkloadIdentity) + " or " + string(ManagedIdentity)

// ParseCredentialMode accepts exactly the names of CredentialModes; any
// other is ErrConfig (errors.Is).
func ParseCredentialMode(s string) (CredentialMode, error) {
	for _, m := range CredentialModes {
		if s == string(m) {
			return m, nil
		}
	}
	return "", configError{errors.New(wantMode)}
}

// Config is everything the Azure prover needs. The caller reads the
// environment; this package never does.
type Config struct {
	// CredentialMode is AZURE_CREDENTIAL_MODE: which identity's token reads
	// the extension from ARM. Required; see CheckCredential for what each
	// mode needs.
	CredentialMode CredentialMode
	// ClientID, TenantID and TokenFile come from AZURE_CLIENT_ID,
	// AZURE_TENANT_ID and AZURE_FEDERATED_TOKEN_FILE, which the workload
	// identity webhook injects. In managed-identity mode ClientID alone
	// names the extension's identity, and the other two are unused.
	ClientID, TenantID, TokenFile string
	// AuthorityHost is AZURE_AUTHORITY_HOST; "" means the public cloud's
	// https://login.microsoftonline.com/. Must be https. For a host that is
	// not a known Entra host (a test fake) instance discovery is turned off,
	// so nothing is ever sent to login.microsoftonline.com on its behalf.
	AuthorityHost string
	// ARMEndpoint defaults to DefaultARMEndpoint. Must be https: the bearer
	// token is never sent in clear text.
	ARMEndpoint string
	// IMDSEndpoint defaults to providers.DefaultAzureIMDS.
	IMDSEndpoint string
	// ExtensionResourceID is EXTENSION_RESOURCE_ID, the full ARM ID of the
	// cluster extension (…/providers/Microsoft.KubernetesConfiguration/extensions/<name>).
	ExtensionResourceID string
	// Publisher, Offer and Plan are MARKETPLACE_PUBLISHER_ID, _OFFER_ID and
	// _PLAN_ID; compared exactly (case-sensitive) with the extension's plan.
	Publisher, Offer, Plan string
	// RetryMax is VERIFY_RETRY_MAX: attempts per ARM call (azcore retry
	// policy) and per IMDS call (retry-go); 0 means DefaultRetryMax.
	RetryMax int
	// RetryBackoff is VERIFY_RETRY_BACKOFF (0 means DefaultRetryBackoff):
	// for IMDS the delays are 1 s × RetryBackoff^n; for ARM (and, in
	// managed-identity mode, IMDS's token endpoint) it is azcore's base
	// delay in RetryUnits (azcore grows it as (2^n−1)·base, Retry-After
	// wins).
	RetryBackoff float64
	// RetryUnit is the unit of azcore's base delay; 0 means one second.
	// azcore sleeps for real, so tests shorten it; IMDS's own waits go
	// through Sleep.
	RetryUnit time.Duration
	// HTTPClient carries Entra and ARM traffic (TLS); nil uses azcore's
	// default transport. Tests pass a client that trusts their fake CA.
	HTTPClient *http.Client
	// IMDSClient carries IMDS traffic. nil builds one that never uses a
	// proxy (Go's default transport would send 169.254.169.254 to
	// HTTP_PROXY) and dials with IMDSDialContext.
	IMDSClient *http.Client
	// IMDSDialContext dials for the default IMDS client; nil is a plain
	// net.Dialer. Tests use it to reach a loopback fake at the real address.
	IMDSDialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Roots are the trust anchors of attested documents; nil means the
	// pinned production roots (roots.go). Never the system pool.
	Roots *x509.CertPool
	// AIAClient fetches issuing CAs from the leaf's AIA URL; nil builds one
	// with short timeouts. AIAAllowedHosts limits where it may go; nil means
	// DefaultAIAAllowedHosts. "host:port" entries allow that exact port.
	AIAClient       *http.Client
	AIAAllowedHosts []string
	// Clock tells the time for the expiry check and the chain; nil is time.Now.
	Clock func() time.Time
	// Sleep waits between IMDS attempts; nil sleeps for real, returning
	// early with ctx's error. Tests inject a recorder.
	Sleep func(ctx context.Context, d time.Duration) error
	// Log receives one line per step; nil discards. Tokens and documents are
	// never logged.
	Log *slog.Logger
	// HostNetworkRemedy is the customer's command that turns the chart value
	// hostNetwork on for the release they have (az k8s-extension update on a
	// Marketplace install, helm upgrade on their own release); "" names the
	// chart value alone.
	HostNetworkRemedy string
}

// Validate checks the values cfg holds against this package's rules, each
// problem naming its variable and the value: the endpoints' schemes, the
// extension ID's grammar (when set), the retry bounds (MinRetryMax to
// MaxRetryMax, MinRetryBackoff to MaxRetryBackoff). It does not check
// presence: package job calls it at load, where a run on another cloud
// needs none of the Azure settings, and New adds the presence checks when
// Azure is detected. Every problem is ErrConfig (errors.Is). Zero retry
// settings are refused: New fills them with the defaults first.
func (cfg Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, configError{fmt.Errorf(format, a...)}) }
	if cfg.AuthorityHost != "" {
		if u, err := url.Parse(cfg.AuthorityHost); err != nil || u.Scheme != "https" || u.Host == "" {
			bad("AZURE_AUTHORITY_HOST=%q: %s", cfg.AuthorityHost, wantHTTPS)
		}
	}
	if u, err := url.Parse(cfg.ARMEndpoint); err != nil || u.Scheme != "https" || u.Host == "" {
		bad("ARM_ENDPOINT=%q: %s", cfg.ARMEndpoint, wantHTTPS)
	}
	if u, err := url.Parse(cfg.IMDSEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("AZURE_IMDS_ENDPOINT=%q: want an http(s) URL such as http://169.254.169.254", cfg.IMDSEndpoint)
	}
	if id := strings.TrimSpace(cfg.ExtensionResourceID); id != "" {
		if _, err := ParseExtensionID(id); err != nil {
			bad("EXTENSION_RESOURCE_ID=%q: %w", cfg.ExtensionResourceID, err)
		}
	}
	if cfg.RetryMax < MinRetryMax || cfg.RetryMax > MaxRetryMax {
		bad("VERIFY_RETRY_MAX=\"%d\": %s", cfg.RetryMax, WantRetryMax)
	}
	if !(cfg.RetryBackoff >= MinRetryBackoff && cfg.RetryBackoff <= MaxRetryBackoff) {
		bad("VERIFY_RETRY_BACKOFF=\"%g\": %s", cfg.RetryBackoff, WantRetryBackoff)
	}
	return errors.Join(errs...)
}

// wantHTTPS is the rule of the endpoints that receive a bearer token.
const wantHTTPS = "want an https URL (Entra and ARM are only spoken to over TLS)"
