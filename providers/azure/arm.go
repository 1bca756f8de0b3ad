package azure

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/rancher/registration-engine/internal/failure"
)

const (
	// maxARMBytes bounds the extension and managed cluster resources and
	// ARM error bodies.
	maxARMBytes = 1 << 20
	// armTryTimeout bounds one ARM attempt (the reference engine: 10 s).
	armTryTimeout = 10 * time.Second
	moduleName    = "registration-engine"
	moduleVersion = "v1"
)

// entraHosts are the Entra authorities MSAL knows; only for these is
// instance discovery left on (MSAL then answers it from built-in metadata).
var entraHosts = map[string]bool{
	"login.microsoftonline.com": true, "login.microsoftonline.us": true, "login.chinacloudapi.cn": true,
	"login.partner.microsoftonline.cn": true, "login.microsoftonline.de": true, "login.microsoft.com": true,
	"login.windows.net": true, "sts.windows.net": true, "login.usgovcloudapi.net": true,
}

// armClient reads the cluster extension and its managed cluster with the
// credential mode's token through azcore's pipeline (bearer-token and retry
// policies).
type armClient struct {
	pipeline   runtime.Pipeline
	url        string // the extension
	clusterURL string // its managed cluster
	// grant is the command that gives the identity both reads, with the
	// real client ID and cluster, for the 403's message.
	grant string
}

// grantCommand is the az command that gives the identity clientID (a
// placeholder when it is not known, as under Workload Identity before the
// webhook) Reader on the extension's cluster: both reads the engine needs.
// The values are single-quoted; neither a GUID nor an ARM name parsed by
// ParseExtensionID holds a quote.
func grantCommand(clientID string, id ExtensionID) string {
	assignee := "<the identity's client ID>"
	if clientID != "" && !strings.ContainsAny(clientID, "'\n") {
		assignee = "'" + clientID + "'"
	}
	scope := "/subscriptions/" + id.SubscriptionID + "/resourceGroups/" + id.ResourceGroup + "/providers/" + id.ClusterProvider + "/" + id.ClusterType + "/" + id.ClusterName
	return "az role assignment create --assignee " + assignee + " --role Reader --scope '" + scope + "' (a 403 in the first 30 minutes after an assignment can be Azure's propagation)"
}

// newARMClient builds the client that reads the extension id names and its
// managed cluster. Their URLs are built from the parsed, escaped segments
// and the pinned api-versions, never from the raw setting, so nothing in
// EXTENSION_RESOURCE_ID can change the path or the query. imds is the prover's IMDS client, which carries a
// managed identity's token requests.
func newARMClient(cfg Config, id ExtensionID, imds *http.Client) (*armClient, error) {
	authority := cfg.AuthorityHost
	if authority == "" {
		authority = cloud.AzurePublic.ActiveDirectoryAuthorityHost
	}
	if !strings.HasSuffix(authority, "/") {
		authority += "/"
	}
	u, _ := url.Parse(authority) // validated in New
	// Entra's and ARM's answers are read by the SDK; the transport caps
	// every body so that a broken or hostile peer cannot fill memory.
	inner := cfg.HTTPClient
	if inner == nil {
		inner = &http.Client{Transport: defaultTransport()}
	}
	transport := limitedTransport{client: inner, max: maxARMBytes}
	copts := azcore.ClientOptions{Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: authority}, Transport: transport}
	cred, err := newCredential(cfg, copts, entraHosts[strings.ToLower(u.Hostname())], imds)
	if err != nil {
		return nil, err
	}
	popts := policy.ClientOptions{
		Retry: policy.RetryOptions{
			MaxRetries:    int32(cfg.RetryMax - 1),
			TryTimeout:    armTryTimeout,
			RetryDelay:    time.Duration(cfg.RetryBackoff * float64(cfg.RetryUnit)),
			MaxRetryDelay: 60 * time.Second,
			// nil StatusCodes: azcore's set, 408 429 500 502 503 504.
		},
	}
	if popts.Retry.MaxRetries == 0 {
		popts.Retry.MaxRetries = -1 // azcore reads 0 as "default 3"; one attempt means no retry
	}
	popts.Transport = transport
	bearer := runtime.NewBearerTokenPolicy(cred, []string{armScope}, nil)
	pl := runtime.NewPipeline(moduleName, moduleVersion, runtime.PipelineOptions{PerRetry: []policy.Policy{bearer}}, &popts)
	return &armClient{
		pipeline:   pl,
		url:        cfg.ARMEndpoint + id.Path() + "?" + url.Values{"api-version": {ExtensionAPIVersion}}.Encode(),
		clusterURL: cfg.ARMEndpoint + id.ClusterPath() + "?" + url.Values{"api-version": {ManagedClusterAPIVersion}}.Encode(),
		grant:      grantCommand(cfg.ClientID, id),
	}, nil
}

// extensionPlan is the ARM common-types Plan at the top level of the
// extension resource (a sibling of properties).
type extensionPlan struct {
	Name      string `json:"name"`
	Publisher string `json:"publisher"`
	Product   string `json:"product"`
}

type extensionResource struct {
	ID   string         `json:"id"`
	Type string         `json:"type"`
	Plan *extensionPlan `json:"plan"`
}

// parseExtension decodes the extension resource; a body that is not a JSON
// object is an error, a missing plan is not (the caller decides).
func parseExtension(b []byte) (*extensionResource, error) {
	var r extensionResource
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("extension resource is not JSON: %w", err)
	}
	return &r, nil
}

// managedCluster is the part of the managed cluster resource the binding
// reads.
type managedCluster struct {
	Properties struct {
		NodeResourceGroup string `json:"nodeResourceGroup"`
	} `json:"properties"`
}

// armResource names one resource the client reads, for its errors: what
// it is and the hint for ARM's 403 and 404.
type armResource struct {
	what, forbidden, notFound string
}

var (
	extensionRead = armResource{
		what: "extension",
		forbidden: "the identity may not read the extension: give it a role assignment with " +
			"Microsoft.KubernetesConfiguration/extensions/read and Microsoft.ContainerService/managedClusters/read on the cluster (Reader on the cluster grants both)",
		notFound: "extension not found: EXTENSION_RESOURCE_ID is wrong or the extension was removed",
	}
	clusterRead = armResource{
		what: "managed cluster",
		forbidden: "the identity may read the extension but not its managed cluster: give it a role assignment with " +
			"Microsoft.ContainerService/managedClusters/read on the cluster (Reader on the cluster grants both reads)",
		notFound: "the managed cluster EXTENSION_RESOURCE_ID names was not found: EXTENSION_RESOURCE_ID is wrong",
	}
)

// getExtension reads the extension.
func (c *armClient) getExtension(ctx context.Context) (*extensionResource, error) {
	body, err := c.get(ctx, c.url, extensionRead)
	if err != nil {
		return nil, err
	}
	r, err := parseExtension(body)
	if err != nil {
		return nil, failure.Permanent(fmt.Errorf("%w: %w", ErrARM, err))
	}
	return r, nil
}

// getManagedCluster reads the managed cluster the extension belongs to.
func (c *armClient) getManagedCluster(ctx context.Context) (*managedCluster, error) {
	body, err := c.get(ctx, c.clusterURL, clusterRead)
	if err != nil {
		return nil, err
	}
	var mc managedCluster
	if err := json.Unmarshal(body, &mc); err != nil {
		return nil, failure.Permanent(fmt.Errorf("%w: managed cluster resource is not JSON: %w", ErrARM, err))
	}
	// Without it there is nothing to bind: a body the engine does not
	// understand, not another cluster's extension.
	if strings.TrimSpace(mc.Properties.NodeResourceGroup) == "" {
		return nil, failure.Permanent(fmt.Errorf("%w: managed cluster resource %s has no properties.nodeResourceGroup: nothing to bind this node to", ErrARM, c.clusterURL))
	}
	return &mc, nil
}

// get reads one resource and returns the body of a 200. Errors are
// classified: a token Entra refused and ARM's 401/403 are settling (a new
// identity or role assignment propagates for minutes), 404 permanent, each
// with a hint at the likely cause; throttling, 5xx and network trouble
// (after azcore's retries) are transient.
func (c *armClient) get(ctx context.Context, u string, res armResource) ([]byte, error) {
	req, err := runtime.NewRequest(ctx, http.MethodGet, u)
	if err != nil {
		return nil, failure.Permanent(fmt.Errorf("%w: %w", ErrARM, err))
	}
	req.Raw().Header.Set("Accept", "application/json")
	// azcore would otherwise read the whole body into memory before we
	// see it; an endless body must meet our size limit instead.
	runtime.SkipBodyDownload(req)
	resp, err := c.pipeline.Do(req)
	if err != nil {
		return nil, classifyTokenError(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxARMBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %w", ErrARM, res.what, err)
	}
	if len(body) > maxARMBytes {
		return nil, fmt.Errorf("%w: %s response larger than %d bytes", ErrARM, res.what, maxARMBytes)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body = io.NopCloser(bytes.NewReader(body))
		rerr := runtime.NewResponseError(resp)
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			return nil, failure.Settling(fmt.Errorf("%w: ARM refused the identity's token (check that the identity belongs "+
				"to the tenant of the extension's subscription): %w", ErrARM, rerr))
		case http.StatusForbidden:
			return nil, failure.Settling(fmt.Errorf("%w: %s: %s: %w", ErrARM, res.forbidden, c.grant, rerr))
		case http.StatusNotFound:
			return nil, failure.Permanent(fmt.Errorf("%w: %s: %w", ErrARM, res.notFound, rerr))
		default:
			return nil, fmt.Errorf("%w: %s: %w", ErrARM, res.what, rerr)
		}
	}
	return body, nil
}

// classifyTokenError sorts a pipeline error: a token error was already
// classified by the credential (newCredential); anything else is network
// trouble that outlived the retries.
func classifyTokenError(err error) error {
	if errors.Is(err, ErrToken) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrARM, err)
}
