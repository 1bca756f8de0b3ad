package fakecloud

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// AzurePlan is the Marketplace plan the fake ARM reports on the extension:
// Product is the offer ID, Name the plan ID.
type AzurePlan struct {
	Publisher string `json:"publisher"`
	Product   string `json:"product"`
	Name      string `json:"name"`
}

// AzureConfig is what the fake Azure knows about "this" deployment. Empty
// fields get the defaults of DefaultAzureConfig.
type AzureConfig struct {
	TenantID string
	// ClientID is the Workload Identity's client ID (Entra).
	ClientID string
	// ManagedIdentityClientID is the one user-assigned managed identity the
	// IMDS token endpoint knows (the cluster extension's identity, which the
	// Marketplace passes as global.azure.identity.clientId); any other
	// client_id gets 400 Identity not found.
	ManagedIdentityClientID string
	// FederatedToken is the service-account token the Entra fake expects as
	// client_assertion: write the same bytes to the file AZURE_FEDERATED_TOKEN_FILE names.
	FederatedToken string
	// AccessToken is what the Entra fake issues and the ARM fake requires as
	// bearer token.
	AccessToken string

	SubscriptionID string
	ResourceGroup  string
	VMID           string
	// Location is the IMDS compute.location, e.g. "westeurope".
	Location string
	// ExtensionResourceID is the extension ARM serves; default: an AKS
	// cluster extension in SubscriptionID. ARM also serves its parent, the
	// managed cluster.
	ExtensionResourceID string
	// NodeResourceGroup is the managed cluster's properties.nodeResourceGroup
	// and the node's IMDS compute.resourceGroupName (the cluster's nodes
	// live there); default MC_<ResourceGroup>_<cluster>_<Location>, as AKS
	// names it.
	NodeResourceGroup string
	Plan              AzurePlan
}

// DefaultAzureConfig is a consistent deployment: the plan matches the test
// vectors of the registration engine (suse / sles-15-sp7 / premium).
func DefaultAzureConfig() AzureConfig {
	return AzureConfig{
		TenantID:                "72f988bf-86f1-41af-91ab-2d7cd011db47",
		ClientID:                "5e2a1a4c-0000-4000-8000-00000000c11e",
		ManagedIdentityClientID: "9b2f3c1d-0000-4000-8000-00000000e0e1",
		FederatedToken:          "eyJhbGciOiJSUzI1NiJ9.fake-service-account-token.sig",
		SubscriptionID:          "ce73a2b0-d2e7-4ff6-b987-b32d6908de4e",
		ResourceGroup:           "rg-fake",
		VMID:                    "e01fcd50-213b-4559-8fdf-d98c0086cde4",
		Location:                "westeurope",
		Plan:                    AzurePlan{Publisher: "suse", Product: "sles-15-sp7", Name: "premium"},
	}
}

// ExtensionAPIVersion and ManagedClusterAPIVersion are the only
// api-versions the ARM fake accepts for the extension and the managed
// cluster, the ones the engine pins.
const (
	ExtensionAPIVersion      = "2023-05-01"
	ManagedClusterAPIVersion = "2024-05-01"
)

// imdsVersions are the api-versions the IMDS fake accepts, newest first in
// error bodies as real IMDS does.
var imdsVersions = []string{"2025-04-07", "2023-07-01", "2021-12-13", "2021-02-01", "2020-09-01", "2019-08-15", "2019-04-30", "2018-10-01", "2017-08-01"}

// Azure fakes the three Azure peers of phase 2: Entra ID (token endpoint and
// the OpenID configuration azidentity reads first), ARM (one cluster
// extension with its Marketplace plan, and the managed cluster it belongs
// to) and IMDS (instance metadata and
// attested documents signed by a generated root → intermediate → leaf chain
// shaped like Azure's, the intermediate served at the leaf's AIA URL).
//
// Serve EntraHandler and ARMHandler over TLS (the real peers are https-only
// and azidentity refuses anything else) and IMDSHandler over plain HTTP.
//
// The exported atomics are fault switches and counters; flip them at any
// time, also while requests are in flight.
type Azure struct {
	// NoPlan makes ARM return the extension without a plan, as for an
	// extension not deployed through the Marketplace.
	NoPlan atomic.Bool
	// ARMStatus, when non-zero, makes every ARM GET fail with this status and
	// an ARM error body (403 AuthorizationFailed, 404 ResourceNotFound, …).
	ARMStatus atomic.Int32
	// ManagedClusterStatus is ARMStatus for the managed cluster's GET alone
	// (an identity that may read the extension but not the cluster).
	ManagedClusterStatus atomic.Int32
	// OtherCluster makes the managed cluster report another node resource
	// group than the node's IMDS: what ARM says when EXTENSION_RESOURCE_ID
	// names the extension of another cluster.
	OtherCluster atomic.Bool
	// ARM429 and ARM5xx are the number of 429 (with Retry-After) and 503
	// responses ARM sends before it answers normally.
	ARM429 atomic.Int32
	ARM5xx atomic.Int32
	// RetryAfterSeconds is the Retry-After value sent with 429s; 0 means 1.
	RetryAfterSeconds atomic.Int32

	// IMDS429, IMDS410 and IMDS500 are the number of such responses the IMDS
	// sends (on any path) before it answers normally.
	IMDS429 atomic.Int32
	IMDS410 atomic.Int32
	IMDS500 atomic.Int32
	// IdentityToken429 is the number of 429 responses the managed identity
	// token endpoint sends before it issues a token.
	IdentityToken429 atomic.Int32
	// IdentityNotFound makes the token endpoint answer every request 400
	// Identity not found, as IMDS does for a client_id that is not assigned
	// to the machine.
	IdentityNotFound atomic.Bool
	// TamperDocument changes one byte of the signed content of every
	// attested document after signing.
	TamperDocument atomic.Bool
	// CachedNonce is the number of attested documents served with another
	// nonce than the one requested, as IMDS does when another caller primed
	// its cache.
	CachedNonce atomic.Int32
	// UnknownRoot signs documents with a leaf that chains to a root nobody
	// trusts (its intermediate is still served at the AIA URL).
	UnknownRoot atomic.Bool
	// WrongSigner signs documents with a leaf of the trusted chain whose name
	// is not under metadata.azure.com.
	WrongSigner atomic.Bool
	// ExpiredLeaf signs documents, dated two days ago, with a leaf that
	// expired yesterday: fine at that time, expired now.
	ExpiredLeaf atomic.Bool
	// Slow delays every response by this many nanoseconds (a time.Duration).
	Slow atomic.Int64
	// Forge, when set, makes every attested document the forgery it
	// describes.
	Forge atomic.Pointer[Forgery]

	// Counters of requests that reached each fake.
	TokenRequests atomic.Int32
	// ARMRequests counts every ARM request, ManagedClusterRequests those
	// for the managed cluster among them.
	ARMRequests            atomic.Int32
	ManagedClusterRequests atomic.Int32
	IMDSRequests           atomic.Int32
	AttestedRequests       atomic.Int32
	AIARequests            atomic.Int32
	IdentityTokenRequests  atomic.Int32

	cfg AzureConfig
	pki *azurePKI

	mu   sync.Mutex
	plan AzurePlan
	// issued remembers when a document for a nonce was first signed: real
	// IMDS serves the same document for a while, so two runs minutes apart
	// send identical instance data (and the Secret is not rewritten).
	issued map[string]time.Time
}

// NewAzure generates the fake's PKI and applies DefaultAzureConfig to the
// empty fields of cfg.
func NewAzure(cfg AzureConfig) (*Azure, error) {
	def := DefaultAzureConfig()
	for _, f := range []struct {
		dst *string
		def string
	}{
		{&cfg.TenantID, def.TenantID}, {&cfg.ClientID, def.ClientID}, {&cfg.ManagedIdentityClientID, def.ManagedIdentityClientID},
		{&cfg.FederatedToken, def.FederatedToken},
		{&cfg.SubscriptionID, def.SubscriptionID}, {&cfg.ResourceGroup, def.ResourceGroup},
		{&cfg.VMID, def.VMID}, {&cfg.Location, def.Location},
	} {
		if *f.dst == "" {
			*f.dst = f.def
		}
	}
	if cfg.Plan == (AzurePlan{}) {
		cfg.Plan = def.Plan
	}
	if cfg.AccessToken == "" {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		cfg.AccessToken = "fake-arm-token-" + hex.EncodeToString(b)
	}
	if cfg.ExtensionResourceID == "" {
		cfg.ExtensionResourceID = "/subscriptions/" + cfg.SubscriptionID + "/resourceGroups/" + cfg.ResourceGroup +
			"/providers/Microsoft.ContainerService/managedClusters/aks-fake/providers/Microsoft.KubernetesConfiguration/extensions/suse-registration"
	}
	if cfg.NodeResourceGroup == "" {
		cfg.NodeResourceGroup = "MC_" + cfg.ResourceGroup + "_" + clusterName(cfg.ExtensionResourceID) + "_" + cfg.Location
	}
	pki, err := newAzurePKI()
	if err != nil {
		return nil, fmt.Errorf("fakecloud: azure pki: %w", err)
	}
	return &Azure{cfg: cfg, pki: pki, plan: cfg.Plan}, nil
}

// Config returns the deployment the fake describes (with the current plan).
func (a *Azure) Config() AzureConfig {
	c := a.cfg
	c.Plan = a.Plan()
	return c
}

// SetPlan changes the plan ARM reports from now on.
func (a *Azure) SetPlan(p AzurePlan) {
	a.mu.Lock()
	a.plan = p
	a.mu.Unlock()
}

// Plan is the plan ARM currently reports.
func (a *Azure) Plan() AzurePlan {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.plan
}

// Root is the trust anchor of the fake's attested documents; inject it as
// the verifier's only root.
func (a *Azure) Root() *x509.Certificate { return a.pki.trusted.root }

// RootPEM is Root in PEM form (for --roots).
func (a *Azure) RootPEM() []byte { return derToPEM(a.pki.trusted.root) }

// Intermediate is the issuing CA of the fake's leaves, also served at the
// leaf's AIA URL.
func (a *Azure) Intermediate() *x509.Certificate { return a.pki.trusted.inter }

// IntermediatePEM is Intermediate in PEM form (for --intermediates).
func (a *Azure) IntermediatePEM() []byte { return derToPEM(a.pki.trusted.inter) }

// take decrements a fault counter and reports whether a fault is due.
func take(c *atomic.Int32) bool {
	for {
		n := c.Load()
		if n <= 0 {
			return false
		}
		if c.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

func (a *Azure) slow(r *http.Request) bool {
	return smtWait(r, time.Duration(a.Slow.Load()))
}

func (a *Azure) retryAfter() string {
	n := a.RetryAfterSeconds.Load()
	if n <= 0 {
		n = 1
	}
	return strconv.Itoa(int(n))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ---------------------------------------------------------------- Entra ID

// EntraHandler serves /{tenant}/v2.0/.well-known/openid-configuration (the
// issuer's host is the request's host, as MSAL requires) and
// /{tenant}/oauth2/v2.0/token for the client-assertion grant. The token
// request must carry the configured client ID and, as client_assertion, the
// configured federated token; otherwise it fails like Entra (AADSTS codes).
func (a *Azure) EntraHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.slow(r) {
			return
		}
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		if len(parts) < 3 {
			http.NotFound(w, r)
			return
		}
		tenant := parts[0]
		if tenant != a.cfg.TenantID {
			writeJSON(w, http.StatusBadRequest, entraError("invalid_request", 90002,
				fmt.Sprintf("Tenant '%s' not found.", tenant)))
			return
		}
		base := "https://" + r.Host + "/" + tenant
		switch rest := strings.Join(parts[1:], "/"); rest {
		case "v2.0/.well-known/openid-configuration":
			writeJSON(w, http.StatusOK, map[string]any{
				"issuer":                   base + "/v2.0",
				"authorization_endpoint":   base + "/oauth2/v2.0/authorize",
				"token_endpoint":           base + "/oauth2/v2.0/token",
				"jwks_uri":                 "https://" + r.Host + "/" + tenant + "/discovery/v2.0/keys",
				"response_types_supported": []string{"code", "id_token", "code id_token", "id_token token"},
			})
		case "oauth2/v2.0/token":
			a.token(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

func entraError(code string, aadsts int, msg string) map[string]any {
	return map[string]any{
		"error":             code,
		"error_description": fmt.Sprintf("AADSTS%d: %s", aadsts, msg),
		"error_codes":       []int{aadsts},
		"correlation_id":    "00000000-0000-0000-0000-000000000000",
	}
}

func (a *Azure) token(w http.ResponseWriter, r *http.Request) {
	a.TokenRequests.Add(1)
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, entraError("invalid_request", 900144, "The request body must be a form."))
		return
	}
	f := r.PostForm
	switch {
	case f.Get("grant_type") != "client_credentials":
		writeJSON(w, http.StatusBadRequest, entraError("unsupported_grant_type", 70003, "The app requested an unsupported grant type."))
	case f.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
		writeJSON(w, http.StatusBadRequest, entraError("invalid_request", 50027, "Invalid client_assertion_type."))
	case f.Get("client_id") != a.cfg.ClientID:
		writeJSON(w, http.StatusBadRequest, entraError("unauthorized_client", 700016,
			fmt.Sprintf("Application with identifier '%s' was not found in the directory.", f.Get("client_id"))))
	case subtle.ConstantTimeCompare([]byte(f.Get("client_assertion")), []byte(a.cfg.FederatedToken)) != 1:
		writeJSON(w, http.StatusBadRequest, entraError("invalid_client", 70021,
			"No matching federated identity record found for presented assertion."))
	case !strings.Contains(f.Get("scope"), "https://management.azure.com/.default"):
		writeJSON(w, http.StatusBadRequest, entraError("invalid_scope", 70011, "The provided value for scope is not valid."))
	default:
		writeJSON(w, http.StatusOK, map[string]any{
			"token_type":     "Bearer",
			"expires_in":     3599,
			"ext_expires_in": 3599,
			"access_token":   a.cfg.AccessToken,
		})
	}
}

// --------------------------------------------------------------------- ARM

// ARMHandler serves, with a bearer-token check, GET {ExtensionResourceID}?api-version=2023-05-01
// (the configured plan at the top level, a sibling of properties, as ARM
// returns it) and GET of its parent managed cluster with
// api-version=2024-05-01 (properties.nodeResourceGroup the node's resource
// group), and the fault switches NoPlan, ARMStatus, ManagedClusterStatus,
// OtherCluster, ARM429 and ARM5xx.
func (a *Azure) ARMHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.ARMRequests.Add(1)
		cluster := strings.EqualFold(r.URL.Path, a.clusterID())
		if cluster {
			a.ManagedClusterRequests.Add(1)
		}
		if !a.slow(r) {
			return
		}
		w.Header().Set("x-ms-request-id", "00000000-0000-0000-0000-00000000a2a1")
		if r.Header.Get("Authorization") != "Bearer "+a.cfg.AccessToken {
			armError(w, http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token is invalid.")
			return
		}
		if take(&a.ARM429) {
			w.Header().Set("Retry-After", a.retryAfter())
			armError(w, http.StatusTooManyRequests, "TooManyRequests", "The request is being throttled.")
			return
		}
		if take(&a.ARM5xx) {
			armError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "The service is temporarily unavailable.")
			return
		}
		action, scope, version := "Microsoft.KubernetesConfiguration/extensions/read", a.cfg.ExtensionResourceID, ExtensionAPIVersion
		status := int(a.ARMStatus.Load())
		if cluster {
			action, scope, version = "Microsoft.ContainerService/managedClusters/read", a.clusterID(), ManagedClusterAPIVersion
			if s := int(a.ManagedClusterStatus.Load()); s != 0 {
				status = s
			}
		}
		switch status {
		case 0:
		case http.StatusForbidden:
			armError(w, status, "AuthorizationFailed", fmt.Sprintf("The client '%s' does not have authorization to perform action "+
				"'%s' over scope '%s' or the scope is invalid.", a.cfg.ClientID, action, scope))
			return
		case http.StatusNotFound:
			armError(w, status, "ResourceNotFound", "The Resource was not found.")
			return
		default:
			armError(w, status, "InternalServerError", http.StatusText(status))
			return
		}
		if r.Method != http.MethodGet {
			armError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "Only GET is faked.")
			return
		}
		if !cluster && !strings.EqualFold(r.URL.Path, a.cfg.ExtensionResourceID) {
			armError(w, http.StatusNotFound, "ResourceNotFound", "The Resource was not found.")
			return
		}
		if v := r.URL.Query().Get("api-version"); v != version {
			armError(w, http.StatusBadRequest, "InvalidApiVersionParameter", fmt.Sprintf("The api-version '%s' is invalid.", v))
			return
		}
		if cluster {
			writeJSON(w, http.StatusOK, a.managedCluster())
			return
		}
		body := map[string]any{
			"id":   a.cfg.ExtensionResourceID,
			"name": a.cfg.ExtensionResourceID[strings.LastIndex(a.cfg.ExtensionResourceID, "/")+1:],
			"type": "Microsoft.KubernetesConfiguration/extensions",
			"properties": map[string]any{
				"extensionType":           "suse.registration",
				"autoUpgradeMinorVersion": true,
				"version":                 "1.0.0",
				"provisioningState":       "Succeeded",
			},
		}
		if !a.NoPlan.Load() {
			body["plan"] = a.Plan()
		}
		writeJSON(w, http.StatusOK, body)
	})
}

// clusterID is the managed cluster's ARM ID: ExtensionResourceID without
// its /providers/Microsoft.KubernetesConfiguration/extensions/<name> tail.
func (a *Azure) clusterID() string {
	id := a.cfg.ExtensionResourceID
	if i := strings.LastIndex(strings.ToLower(id), "/providers/microsoft.kubernetesconfiguration/"); i > 0 {
		return id[:i]
	}
	return id
}

// clusterName is the cluster segment of an extension's ID, "aks-fake" when
// the ID has none.
func clusterName(extensionID string) string {
	seg := strings.Split(strings.Trim(extensionID, "/"), "/")
	if len(seg) >= 8 && seg[7] != "" {
		return seg[7]
	}
	return "aks-fake"
}

// managedCluster is the managed cluster as ARM returns it, with the fields
// an AKS GET always carries around the one the engine reads.
func (a *Azure) managedCluster() map[string]any {
	nrg := a.cfg.NodeResourceGroup
	if a.OtherCluster.Load() {
		nrg = "MC_" + a.cfg.ResourceGroup + "_aks-other_" + a.cfg.Location
	}
	name := clusterName(a.cfg.ExtensionResourceID)
	return map[string]any{
		"id":       a.clusterID(),
		"name":     name,
		"type":     "Microsoft.ContainerService/ManagedClusters",
		"location": a.cfg.Location,
		"sku":      map[string]string{"name": "Base", "tier": "Free"},
		"properties": map[string]any{
			"provisioningState": "Succeeded",
			"powerState":        map[string]string{"code": "Running"},
			"kubernetesVersion": "1.33.2",
			"dnsPrefix":         name + "-dns",
			"fqdn":              name + "-dns-00000000.hcp." + a.cfg.Location + ".azmk8s.io",
			"agentPoolProfiles": []any{map[string]any{"name": "nodepool1", "count": 1, "vmSize": "Standard_D4s_v5", "mode": "System"}},
			"nodeResourceGroup": nrg,
			"enableRBAC":        true,
			"oidcIssuerProfile": map[string]any{"enabled": true},
		},
	}
}

func armError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("x-ms-failure-cause", "gateway")
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": code, "message": msg}})
}

// -------------------------------------------------------------------- IMDS

// IMDSHandler serves the Azure Instance Metadata Service paths the engine
// uses: /metadata/versions, /metadata/instance, /metadata/instance/compute,
// /metadata/instance/compute/location (format=text), /metadata/attested/document,
// the managed identity token endpoint /metadata/identity/oauth2/token, and
// the intermediates at /aia/…. Like IMDS it rejects requests without
// "Metadata: true" or with X-Forwarded-For, and a missing or unknown
// api-version (400 with newest-versions).
func (a *Azure) IMDSHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/aia/") {
			a.aia(w, r)
			return
		}
		a.IMDSRequests.Add(1)
		if !a.slow(r) {
			return
		}
		w.Header().Set("Server", "IMDS/150.870.65.1544")
		if r.URL.Path == IdentityTokenPath {
			a.identityToken(w, r)
			return
		}
		if r.Header.Get("Metadata") != "true" || r.Header.Get("X-Forwarded-For") != "" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "Bad request. Required metadata header not specified"})
			return
		}
		if r.Method != http.MethodGet {
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "Method not allowed"})
			return
		}
		switch {
		case take(&a.IMDS429):
			writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": "Too many requests"})
			return
		case take(&a.IMDS410):
			writeJSON(w, http.StatusGone, map[string]any{"error": "Gone"})
			return
		case take(&a.IMDS500):
			writeJSON(w, http.StatusInternalServerError, map[string]any{"error": "Internal server error"})
			return
		}
		if r.URL.Path == "/metadata/versions" {
			writeJSON(w, http.StatusOK, map[string]any{"apiVersions": imdsVersions})
			return
		}
		q := r.URL.Query()
		if !validIMDSVersion(q["api-version"]) {
			writeJSON(w, http.StatusBadRequest, map[string]any{
				"error":           "Bad request. api-version is invalid or was not specified in the request. For more information refer to aka.ms/azureimds",
				"newest-versions": imdsVersions[:3],
			})
			return
		}
		switch r.URL.Path {
		case "/metadata/instance":
			writeJSON(w, http.StatusOK, map[string]any{"compute": a.compute(), "network": map[string]any{"interface": []any{}}})
		case "/metadata/instance/compute":
			writeJSON(w, http.StatusOK, a.compute())
		case "/metadata/instance/compute/location":
			if q.Get("format") != "text" {
				writeJSON(w, http.StatusBadRequest, map[string]any{"error": "Bad request. Leaf node queries require format=text."})
				return
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = fmt.Fprint(w, a.cfg.Location)
		case "/metadata/attested/document":
			a.attested(w, r)
		default:
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "Not found"})
		}
	})
}

// IdentityTokenPath is IMDS's managed identity token endpoint.
const IdentityTokenPath = "/metadata/identity/oauth2/token"

// identityVersions are the api-versions the token endpoint accepts
// (azidentity sends 2018-02-01).
var identityVersions = []string{"2018-02-01", "2019-08-01"}

// identityError writes the OAuth-shaped error body of IMDS's token
// endpoint, e.g. 400 {"error":"invalid_request","error_description":"Identity not found"}.
func identityError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

// identityToken serves GET /metadata/identity/oauth2/token as IMDS does for
// a machine with one user-assigned identity: "Metadata: true", an
// api-version, resource (ARM only) and client_id are required, and the
// token is the one the ARM fake accepts. Faults: IdentityToken429,
// IdentityNotFound.
func (a *Azure) identityToken(w http.ResponseWriter, r *http.Request) {
	a.IdentityTokenRequests.Add(1)
	if r.Header.Get("Metadata") != "true" || r.Header.Get("X-Forwarded-For") != "" {
		identityError(w, http.StatusBadRequest, "invalid_request", "Required metadata header not specified")
		return
	}
	if r.Method != http.MethodGet {
		identityError(w, http.StatusMethodNotAllowed, "invalid_request", "Method not allowed")
		return
	}
	if take(&a.IdentityToken429) {
		identityError(w, http.StatusTooManyRequests, "too_many_requests", "Too many requests")
		return
	}
	q := r.URL.Query()
	if v := q["api-version"]; len(v) != 1 || !slices.Contains(identityVersions, v[0]) {
		identityError(w, http.StatusBadRequest, "invalid_request", "Required query variable 'api-version' is missing or invalid")
		return
	}
	resource := q.Get("resource")
	if resource == "" {
		identityError(w, http.StatusBadRequest, "invalid_request", "Required audience parameter not specified")
		return
	}
	// Only a user-assigned identity exists, so a request without client_id
	// (the system-assigned identity) finds none either.
	if a.IdentityNotFound.Load() || q.Get("client_id") != a.cfg.ManagedIdentityClientID {
		identityError(w, http.StatusBadRequest, "invalid_request", "Identity not found")
		return
	}
	if strings.TrimSuffix(resource, "/") != "https://management.azure.com" {
		identityError(w, http.StatusBadRequest, "invalid_resource",
			fmt.Sprintf("AADSTS500011: The resource principal named %s was not found in the tenant.", resource))
		return
	}
	now := time.Now()
	// IMDS writes the numbers as strings.
	writeJSON(w, http.StatusOK, map[string]string{
		"access_token":   a.cfg.AccessToken,
		"client_id":      a.cfg.ManagedIdentityClientID,
		"expires_in":     "86399",
		"expires_on":     strconv.FormatInt(now.Add(86399*time.Second).Unix(), 10),
		"ext_expires_in": "86399",
		"not_before":     strconv.FormatInt(now.Unix(), 10),
		"resource":       resource,
		"token_type":     "Bearer",
	})
}

func validIMDSVersion(v []string) bool {
	if len(v) != 1 {
		return false // missing, or a duplicate query parameter
	}
	for _, s := range imdsVersions {
		if s == v[0] {
			return true
		}
	}
	return false
}

func (a *Azure) compute() map[string]any {
	return map[string]any{
		"azEnvironment":     "AzurePublicCloud",
		"location":          a.cfg.Location,
		"name":              "aks-nodepool1-00000000-vmss_0",
		"offer":             "",
		"osType":            "Linux",
		"plan":              map[string]string{"name": "", "product": "", "publisher": ""},
		"publisher":         "",
		"resourceGroupName": a.cfg.NodeResourceGroup,
		"resourceId": "/subscriptions/" + a.cfg.SubscriptionID + "/resourceGroups/" + a.cfg.NodeResourceGroup +
			"/providers/Microsoft.Compute/virtualMachineScaleSets/aks-nodepool1-00000000-vmss/virtualMachines/0",
		"sku":            "",
		"subscriptionId": a.cfg.SubscriptionID,
		"tagsList":       []any{},
		"vmId":           a.cfg.VMID,
		"vmSize":         "Standard_D4s_v5",
		"version":        "",
	}
}

// attestedContent is the signed JSON, field order as Azure writes it.
type attestedContent struct {
	LicenseType string `json:"licenseType"`
	Nonce       string `json:"nonce"`
	Plan        struct {
		Name      string `json:"name"`
		Product   string `json:"product"`
		Publisher string `json:"publisher"`
	} `json:"plan"` // empty on AKS: node images are not Marketplace-plan images
	SKU            string `json:"sku"`
	SubscriptionID string `json:"subscriptionId"`
	TimeStamp      struct {
		CreatedOn string `json:"createdOn"`
		ExpiresOn string `json:"expiresOn"`
	} `json:"timeStamp"`
	VMID string `json:"vmId"`
}

// azureTime formats t as attested documents do: "02/21/20 14:53:22 -0000".
func azureTime(t time.Time) string {
	return strings.Replace(t.UTC().Format("01/02/06 15:04:05 -0700"), "+0000", "-0000", 1)
}

// documentCache is how long the fake serves the same document for a nonce.
const documentCache = 10 * time.Minute

func (a *Azure) issuedAt(nonce string, now time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.issued == nil {
		a.issued = map[string]time.Time{}
	}
	if t, ok := a.issued[nonce]; ok && now.Sub(t) < documentCache {
		return t
	}
	a.issued[nonce] = now
	return now
}

func (a *Azure) attested(w http.ResponseWriter, r *http.Request) {
	a.AttestedRequests.Add(1)
	nonce := r.URL.Query().Get("nonce")
	if len(nonce) > 32 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "Bad request. Nonce is invalid."})
		return
	}
	now := time.Now()
	if nonce == "" {
		nonce = now.UTC().Format("20060102-150405")
	}
	if take(&a.CachedNonce) {
		nonce = "cachedcachedcachedcachedcached00"
	}
	now = a.issuedAt(nonce, now)
	kind := leafGood
	switch {
	case a.ExpiredLeaf.Load():
		kind = leafExpired
		now = now.Add(-2 * 24 * time.Hour)
	case a.UnknownRoot.Load():
		kind = leafUnknownRoot
	case a.WrongSigner.Load():
		kind = leafWrongSigner
	}
	forged := a.Forge.Load()
	forge := Forgery{}
	if forged != nil {
		forge = *forged
	}
	now = now.Add(forge.CreatedAhead)
	c := attestedContent{Nonce: nonce, SKU: "", SubscriptionID: a.cfg.SubscriptionID, VMID: a.cfg.VMID}
	c.TimeStamp.CreatedOn = azureTime(now)
	c.TimeStamp.ExpiresOn = azureTime(now.Add(6 * time.Hour))
	content, err := json.Marshal(c)
	if err == nil && len(forge.Omit) > 0 {
		content, err = omitKeys(content, forge.Omit)
	}
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": err.Error()})
		return
	}
	var leaf *x509.Certificate
	if forged == nil {
		leaf, err = a.pki.leaf(r.Host, a.cfg.Location, kind)
	} else {
		leaf, err = a.pki.forgedLeaf(r.Host, a.cfg.Location, forge)
	}
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": err.Error()})
		return
	}
	der, err := a.pki.signWith(content, leaf, forge.SHA1)
	if err == nil && a.TamperDocument.Load() {
		der, err = tamper(der, content)
	}
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"encoding": "pkcs7", "signature": base64.StdEncoding.EncodeToString(der)})
}

// omitKeys removes keys from the JSON object content (key order becomes
// alphabetical, as Azure's already is).
func omitKeys(content []byte, keys []string) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(content, &m); err != nil {
		return nil, err
	}
	for _, k := range keys {
		delete(m, k)
	}
	return json.Marshal(m)
}

// Document returns an attested document as the IMDS would serve it for
// nonce right now (honouring the signer faults), for tests of offline tools
// that have no IMDS to ask. host is the address the leaf's AIA URL names.
func (a *Azure) Document(ctx context.Context, host, nonce string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/metadata/attested/document?api-version=2021-02-01&nonce="+nonce, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Metadata", "true")
	rec := httptest.NewRecorder()
	a.attested(rec, req)
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("fakecloud: attested document: status %d: %s", rec.Code, rec.Body.String())
	}
	return rec.Body.Bytes(), nil
}

func (a *Azure) aia(w http.ResponseWriter, r *http.Request) {
	a.AIARequests.Add(1)
	var c *x509.Certificate
	switch r.URL.Path {
	case aiaPath:
		c = a.pki.trusted.inter
	case aiaUntrustedPath:
		c = a.pki.untrusted.inter
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/pkix-cert")
	_, _ = w.Write(c.Raw)
}
