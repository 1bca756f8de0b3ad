package azure

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/AzureAD/microsoft-authentication-library-for-go/apps/managedidentity"

	"github.com/rancher/registration-engine/internal/failure"
)

const (
	// miHint says where AZURE_CLIENT_ID comes from in managed-identity mode.
	miHint = "in managed-identity mode it is the client ID of the cluster extension's managed identity, " +
		"which the Azure Marketplace passes to the chart as global.azure.identity.clientId"
	// imdsIdentityHost and identityTokenPath are where azidentity (MSAL)
	// sends a managed identity's token request on a VM: hard-coded there,
	// so the transport below redirects them to the configured IMDS.
	imdsIdentityHost  = "169.254.169.254"
	identityTokenPath = "/metadata/identity/oauth2/token"
)

// CheckCredential reports every setting cfg.CredentialMode needs and lacks,
// each naming its variable and where it comes from; each is ErrConfig
// (errors.Is). job calls it at config load; New calls it again for callers
// that build a Config themselves.
func CheckCredential(cfg Config) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, configError{fmt.Errorf(format, a...)}) }
	switch cfg.CredentialMode {
	case WorkloadIdentity:
		// Without the token file nothing injected the identity at all:
		// one verdict for the three variables, about the injection. The
		// webhook adds AZURE_CLIENT_ID and AZURE_TENANT_ID only when it
		// knows them, so with the token present a missing one is the
		// ServiceAccount's annotation.
		if strings.TrimSpace(cfg.TokenFile) == "" {
			bad("%s", noInjection(cfg))
			break
		}
		for _, v := range []struct{ name, value string }{
			{"AZURE_CLIENT_ID", cfg.ClientID}, {"AZURE_TENANT_ID", cfg.TenantID},
		} {
			if strings.TrimSpace(v.value) == "" {
				bad("%s is not set: %s", v.name, wiHint)
			}
		}
		if cfg.TokenFile != "" {
			if f, err := os.Open(cfg.TokenFile); err != nil {
				bad("AZURE_FEDERATED_TOKEN_FILE: cannot read the service account token: %w; %s", err, wiHint)
			} else {
				_ = f.Close()
			}
		}
	case ManagedIdentity:
		if strings.TrimSpace(cfg.ClientID) == "" {
			bad("AZURE_CLIENT_ID is not set: %s (the engine never falls back to the node's own identity)", miHint)
		}
	default:
		bad("AZURE_CREDENTIAL_MODE %q: %s", cfg.CredentialMode, wantMode)
	}
	return errs
}

// noInjection is the verdict for a workload-identity pod that nothing
// injected into: the webhook's variables absent, the label doing nothing.
func noInjection(cfg Config) string {
	also := []string{}
	for _, v := range []struct{ name, value string }{{"AZURE_CLIENT_ID", cfg.ClientID}, {"AZURE_TENANT_ID", cfg.TenantID}} {
		if strings.TrimSpace(v.value) == "" {
			also = append(also, v.name)
		}
	}
	nor := ""
	if len(also) > 0 {
		nor = " (nor " + strings.Join(also, ", ") + ")"
	}
	return "workload-identity mode, but nothing injected AZURE_FEDERATED_TOKEN_FILE" + nor + ": " +
		`is the Azure Workload Identity webhook installed? It injects the token, AZURE_CLIENT_ID and AZURE_TENANT_ID into pods labelled azure.workload.identity/use: "true" ` +
		"(the chart labels the engine's pods); without the webhook the label does nothing " +
		"(AKS: az aks update --enable-oidc-issuer --enable-workload-identity; or install managed-identity mode)"
}

// describeIdentity names the identity a token belongs to, for errors.
func (cfg Config) describeIdentity() string {
	if cfg.CredentialMode == ManagedIdentity {
		return "managed identity AZURE_CLIENT_ID=" + cfg.ClientID
	}
	return "workload identity AZURE_CLIENT_ID=" + cfg.ClientID
}

// newCredential builds the token credential of cfg.CredentialMode. Entra
// traffic (workload identity) goes through copts' transport; IMDS traffic
// (managed identity) through imds, the prover's own IMDS client (never a
// proxy, and one connection pool for every IMDS call of the run).
// instanceDiscovery is false for an authority host that is not one of
// Entra's own. Every token error it returns is classified (ErrToken,
// permanent or not), and the first token is logged with the mode that
// produced it.
func newCredential(cfg Config, copts azcore.ClientOptions, instanceDiscovery bool, imds *http.Client) (azcore.TokenCredential, error) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &classifiedCredential{mode: cfg.CredentialMode, clientID: cfg.ClientID, imds: cfg.IMDSEndpoint, tokenFile: cfg.TokenFile,
		log: log.With("cloud", "azure", "phase", "prove")}
	switch cfg.CredentialMode {
	case WorkloadIdentity:
		cred, err := azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
			ClientOptions:            copts,
			ClientID:                 cfg.ClientID,
			TenantID:                 cfg.TenantID,
			TokenFilePath:            cfg.TokenFile,
			DisableInstanceDiscovery: !instanceDiscovery,
		})
		if err != nil {
			return nil, failure.Permanent(fmt.Errorf("azure: %w: workload identity credential: %w; %s", ErrConfig, err, wiHint))
		}
		c.inner = cred
	case ManagedIdentity:
		// azidentity picks its managed identity source from the
		// environment (IDENTITY_ENDPOINT, MSI_ENDPOINT, …, which App
		// Service, Arc or Cloud Shell set); this engine only speaks to IMDS.
		src, err := managedidentity.GetSource()
		if err != nil {
			return nil, failure.Permanent(fmt.Errorf("azure: %w: managed identity source: %w", ErrConfig, err))
		}
		if src != managedidentity.DefaultToIMDS {
			return nil, failure.Permanent(fmt.Errorf("azure: %w: managed-identity mode reaches IMDS only, but the environment "+
				"selects the managed identity source %q: unset IDENTITY_ENDPOINT, MSI_ENDPOINT and IMDS_ENDPOINT in the engine's pod",
				ErrConfig, src))
		}
		base, _ := url.Parse(cfg.IMDSEndpoint) // validated in New
		ro := policy.RetryOptions{
			MaxRetries:    int32(cfg.RetryMax - 1),
			RetryDelay:    time.Duration(cfg.RetryBackoff * float64(cfg.RetryUnit)),
			MaxRetryDelay: maxIMDSDelay,
			// nil StatusCodes: azidentity's IMDS set, 404 410 429 5xx.
		}
		if ro.MaxRetries == 0 {
			ro.MaxRetries = -1 // azcore reads 0 as its default; one attempt means no retry
		}
		cred, err := azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{
			ClientOptions: azcore.ClientOptions{
				Transport: imdsTokenTransport{base: base, client: imds},
				Retry:     ro,
			},
			ID: azidentity.ClientID(cfg.ClientID),
		})
		if err != nil {
			return nil, failure.Permanent(fmt.Errorf("azure: %w: managed identity credential: %w", ErrConfig, err))
		}
		c.inner = cred
	default: // New has refused it already (CheckCredential)
		return nil, failure.Permanent(fmt.Errorf("azure: %w: AZURE_CREDENTIAL_MODE %q: %s", ErrConfig, cfg.CredentialMode, wantMode))
	}
	return c, nil
}

// imdsTokenTransport carries the managed identity credential's token
// requests: the request azidentity addresses to 169.254.169.254 goes to the
// configured IMDS endpoint (the same override as every other IMDS call)
// through the IMDS client, which never uses a proxy. Any other destination
// is refused, so a token request can never leave the node.
type imdsTokenTransport struct {
	base   *url.URL
	client *http.Client
}

// Do implements policy.Transporter.
func (t imdsTokenTransport) Do(req *http.Request) (*http.Response, error) {
	if req.URL.Host != imdsIdentityHost || req.URL.Path != identityTokenPath {
		return nil, fmt.Errorf("managed identity: refusing a token request to %s%s: only IMDS %s is allowed",
			req.URL.Host, req.URL.Path, identityTokenPath)
	}
	out := req.Clone(req.Context())
	out.URL.Scheme, out.URL.Host = t.base.Scheme, t.base.Host
	out.URL.Path = strings.TrimRight(t.base.Path, "/") + identityTokenPath
	out.Host = ""
	return limitedTransport{client: t.client, max: maxIMDSBytes}.Do(out)
}

// classifiedCredential is the mode's credential with errors the run can act
// on: ErrToken, permanent when the identity itself is wrong, transient when
// its token service could not be reached; and one log line, with the mode,
// the first time a token is issued.
type classifiedCredential struct {
	inner    azcore.TokenCredential
	mode     CredentialMode
	clientID string
	imds     string
	// tokenFile is the federated token's file (workload identity), read
	// again only to name its issuer and subject when Entra refuses it.
	tokenFile string
	log       *slog.Logger
	logged    bool
}

// GetToken implements azcore.TokenCredential.
func (c *classifiedCredential) GetToken(ctx context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	start := time.Now()
	tok, err := c.inner.GetToken(ctx, opts)
	if err != nil {
		if c.mode == ManagedIdentity {
			return tok, c.managedIdentityError(err)
		}
		return tok, c.workloadIdentityError(err)
	}
	if !c.logged {
		// The bearer policy serializes GetToken, so no lock is needed.
		c.logged = true
		c.log.Info("azure token acquired", "credentialMode", string(c.mode), "clientId", c.clientID,
			"durationMs", time.Since(start).Milliseconds())
	}
	return tok, nil
}

// workloadIdentityError: Entra refusing the federated token is settling (a
// federated credential created minutes ago is refused until it has
// propagated; after the run's first-contact window, permanent), and the
// verdict names the issuer, subject and audience of this pod's token, the
// values a federated identity credential must name exactly (Entra's
// AADSTS70021 when none does, e.g. one made for another ServiceAccount or
// namespace); Entra unreachable is transient.
func (c *classifiedCredential) workloadIdentityError(err error) error {
	var afe *azidentity.AuthenticationFailedError
	if errors.As(err, &afe) && afe.RawResponse != nil && permanentStatus(afe.RawResponse.StatusCode) {
		want := "issuer = the cluster's OIDC issuer, subject = system:serviceaccount:<namespace>:<name>, audience api://AzureADTokenExchange"
		if iss, sub, aud, ok := tokenClaims(c.tokenFile); ok {
			want = fmt.Sprintf("it must name exactly issuer %q, subject %q and audience %q, those of this pod's token", iss, sub, aud)
		}
		return failure.Settling(fmt.Errorf("%w: Entra ID refused the service account token: check the federated identity "+
			"credential of AZURE_CLIENT_ID (%s): %w", ErrToken, want, err))
	}
	return fmt.Errorf("%w: workload identity: %w", ErrToken, err)
}

// tokenClaims reads the issuer, subject and audiences of the JWT in file,
// without verifying it (it only names them in a verdict); ok is false when
// the file is not a readable JWT.
func tokenClaims(file string) (iss, sub, aud string, ok bool) {
	f, err := os.Open(file)
	if err != nil {
		return "", "", "", false
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return "", "", "", false
	}
	parts := strings.Split(strings.TrimSpace(string(b)), ".")
	if len(parts) != 3 {
		return "", "", "", false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", "", "", false
	}
	var claims struct {
		Iss string          `json:"iss"`
		Sub string          `json:"sub"`
		Aud json.RawMessage `json:"aud"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Sub == "" {
		return "", "", "", false
	}
	var auds []string
	if json.Unmarshal(claims.Aud, &auds) != nil {
		var one string
		_ = json.Unmarshal(claims.Aud, &one)
		auds = []string{one}
	}
	return claims.Iss, claims.Sub, strings.Join(auds, ","), true
}

// managedIdentityError: IMDS refusing the identity (400 Identity not found)
// is settling (Azure attaches the extension's identity to the node pool
// while it installs the extension) and names AZURE_CLIENT_ID; IMDS
// unreachable or throttling after azcore's retries is transient.
func (c *classifiedCredential) managedIdentityError(err error) error {
	var afe *azidentity.AuthenticationFailedError
	if errors.As(err, &afe) && afe.RawResponse != nil && permanentStatus(afe.RawResponse.StatusCode) {
		return failure.Settling(fmt.Errorf("%w: IMDS has no managed identity AZURE_CLIENT_ID=%s on this node (HTTP %d): "+
			"%s; Azure assigns that identity to the cluster's nodes when it installs the extension: %w",
			ErrToken, c.clientID, afe.RawResponse.StatusCode, miHint, err))
	}
	return fmt.Errorf("%w: managed identity: IMDS %s did not issue a token (a pod blocked from IMDS, e.g. by the AKS IMDS "+
		"restriction, cannot use managed-identity mode): %w", ErrToken, c.imds, err)
}

// permanentStatus: a 4xx other than throttling and timeouts will be
// answered the same way next time.
func permanentStatus(code int) bool {
	return code >= 400 && code < 500 && code != http.StatusTooManyRequests && code != http.StatusRequestTimeout
}
