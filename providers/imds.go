package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// Paths and headers of the three metadata services' proofs (reference:
// clouds.md §4). Each proof needs an answer only that cloud's metadata
// server gives, so a random web server on 169.254.169.254 (or an OpenStack
// EC2 emulation) is not mistaken for a cloud.
const (
	azureInstancePath = "/metadata/instance?api-version=2021-02-01"
	gcpProbePath      = "/computeMetadata/v1/"
	awsTokenPath      = "/latest/api/token"
	awsIdentityPath   = "/latest/dynamic/instance-identity/document"

	// Limits on what a probe reads. A real Azure instance document is a few
	// KiB (it grows with tags and NICs), an AWS identity document about
	// 500 bytes, an IMDSv2 token 56 bytes.
	maxAzureInstance = 512 << 10
	maxAWSToken      = 4 << 10
	maxAWSIdentity   = 64 << 10
)

// A probe proves one cloud at one base URL. It returns a short description
// of the proof for Detection.Detail, or why the answer was not proof.
type probe struct {
	cloud    Cloud
	endpoint string
	run      func(ctx context.Context, c *http.Client, base string) (string, error)
}

// newMetadataClient is the client used when Detector.HTTP is nil. Its
// transport has Proxy: nil: http.ProxyFromEnvironment sends 169.254.169.254,
// fd00:ec2::254 and metadata.google.internal to HTTP_PROXY (only loopback is
// exempt), and IMDS is unsupported behind a proxy; a proxy would also answer
// for a cloud we are not on. Redirects are not followed: no metadata service
// redirects these paths, and following one could leave the link-local
// network. dial replaces the dialer in tests only.
func newMetadataClient(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext // the detection budget bounds every dial
	}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            dial,
			MaxResponseHeaderBytes: 64 << 10,
			MaxIdleConnsPerHost:    2,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// probeAzure asks for the instance document with Metadata: true. Only Azure
// IMDS answers that path with a compute.vmId.
func probeAzure(ctx context.Context, c *http.Client, base string) (string, error) {
	body, err := get(ctx, c, http.MethodGet, base+azureInstancePath, map[string]string{"Metadata": "true"}, maxAzureInstance)
	if err != nil {
		return "", err
	}
	inst, err := parseAzureInstance(body)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("azEnvironment=%s location=%s", inst.Compute.AzEnvironment, inst.Compute.Location), nil
}

// azureInstance is the part of Azure's instance document detection reads.
type azureInstance struct {
	Compute struct {
		VMID          string `json:"vmId"`
		AzEnvironment string `json:"azEnvironment"`
		Location      string `json:"location"`
	} `json:"compute"`
}

// parseAzureInstance accepts an instance document only with a non-empty
// compute.vmId; anything else, including a 200 from some other web server,
// is not proof.
func parseAzureInstance(body []byte) (azureInstance, error) {
	var inst azureInstance
	if !utf8.Valid(body) {
		return inst, errNotUTF8
	}
	if err := json.Unmarshal(body, &inst); err != nil {
		return inst, fmt.Errorf("%w: instance document: %w", errNotProven, err)
	}
	if strings.TrimSpace(inst.Compute.VMID) == "" {
		return inst, fmt.Errorf("%w: instance document has no compute.vmId", errNotProven)
	}
	return inst, nil
}

// probeGCP relies on the response header Metadata-Flavor: Google, which only
// Google's metadata servers (GCE and GKE's gke-metadata-server) set, and which
// Google's own client library uses as its proof. The body is not read.
func probeGCP(ctx context.Context, c *http.Client, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+gcpProbePath, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Metadata-Flavor", "Google")
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if got := resp.Header.Get("Metadata-Flavor"); got != "Google" {
		return "", fmt.Errorf("%w: HTTP %d without Metadata-Flavor: Google", errNotProven, resp.StatusCode)
	}
	return "Metadata-Flavor: Google", nil
}

// probeAWS fetches the instance-identity document, with an IMDSv2 session
// token when it can get one and without (IMDSv1) otherwise. The token PUT
// gets half of what is left of the budget: on EKS with hop limit 1 the PUT
// is silently dropped, and the IMDSv1 attempt must still get its turn.
func probeAWS(ctx context.Context, c *http.Client, base string) (string, error) {
	version := "IMDSv2"
	headers := map[string]string{}
	token, tokenErr := awsToken(ctx, c, base)
	if tokenErr == nil {
		headers["X-aws-ec2-metadata-token"] = token
	} else {
		version = "IMDSv1"
	}
	body, err := get(ctx, c, http.MethodGet, base+awsIdentityPath, headers, maxAWSIdentity)
	if err != nil {
		if tokenErr != nil {
			return "", fmt.Errorf("token: %w; identity document: %w", tokenErr, err)
		}
		return "", err
	}
	id, err := parseAWSIdentity(body)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s region=%s", version, id.Region), nil
}

func awsToken(ctx context.Context, c *http.Client, base string) (string, error) {
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Until(deadline)/2)
		defer cancel()
	}
	body, err := get(ctx, c, http.MethodPut, base+awsTokenPath,
		map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": "60"}, maxAWSToken)
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(body))
	if token == "" || strings.ContainsFunc(token, func(r rune) bool { return r < '!' || r > '~' }) {
		return "", fmt.Errorf("%w: unusable token", errNotProven) // would not fit in a header
	}
	return token, nil
}

// awsIdentity is the part of the instance-identity document detection reads.
type awsIdentity struct {
	InstanceID string `json:"instanceId"`
	AccountID  string `json:"accountId"`
	Region     string `json:"region"`
}

// parseAWSIdentity accepts an identity document with an instanceId "i-…",
// and a non-empty accountId and region. A bare 200 is not proof: OpenStack
// and others emulate EC2's metadata paths.
func parseAWSIdentity(body []byte) (awsIdentity, error) {
	var id awsIdentity
	if !utf8.Valid(body) {
		return id, errNotUTF8
	}
	if err := json.Unmarshal(body, &id); err != nil {
		return id, fmt.Errorf("%w: identity document: %w", errNotProven, err)
	}
	if !strings.HasPrefix(id.InstanceID, "i-") || len(id.InstanceID) < 3 {
		return id, fmt.Errorf("%w: identity document has no instanceId i-…", errNotProven)
	}
	if strings.TrimSpace(id.AccountID) == "" || strings.TrimSpace(id.Region) == "" {
		return id, fmt.Errorf("%w: identity document lacks accountId or region", errNotProven)
	}
	return id, nil
}

// get sends one request and returns the body of a 200 answer, read up to
// limit bytes; a longer body is an error, not a truncated document.
func get(ctx context.Context, c *http.Client, method, u string, headers map[string]string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: HTTP %d", errNotProven, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("%w (%d bytes)", errTooLarge, limit)
	}
	return body, nil
}

// CheckEndpoint reports whether s is usable as a metadata base URL:
// http(s)://host[:port], no path, query or credentials. Configuration
// validation calls it so that a typo in an override is reported at start,
// not as "no cloud detected".
func CheckEndpoint(s string) error {
	_, err := normalizeEndpoint(s)
	return err
}

func normalizeEndpoint(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%w %q: %w", ErrInvalidEndpoint, s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%w %q: want http://host[:port]", ErrInvalidEndpoint, s)
	}
	return u.Scheme + "://" + u.Host, nil
}

// describe turns a probe error into the few words the ErrNoCloud message
// shows for it: the cause without the repeated URL.
func describe(err error) string {
	if errors.Is(err, errUnavailable) {
		return err.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}
