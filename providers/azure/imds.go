package azure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/avast/retry-go/v4"
)

const (
	// maxIMDSBytes bounds IMDS bodies (compute JSON with many tags stays
	// far below).
	maxIMDSBytes = 1 << 20
	// imdsTimeout bounds one IMDS attempt; IMDS is on the host, so anything
	// slower is a blocked route (AKS IMDS restriction) rather than load.
	imdsTimeout = 5 * time.Second
	// maxIMDSDelay caps one backoff delay: IMDS documents 410 as "retry for
	// at most 70 seconds".
	maxIMDSDelay = 70 * time.Second
)

// imdsClient talks to the Azure Instance Metadata Service: always the
// Metadata header, never a proxy, bounded backoff on 410/429/500.
type imdsClient struct {
	base   string
	client *http.Client
	max    int
	factor float64
	sleep  func(context.Context, time.Duration) error
	log    *slog.Logger
}

func newIMDSClient(cfg Config, log *slog.Logger) *imdsClient {
	c := cfg.IMDSClient
	if c == nil {
		dial := cfg.IMDSDialContext
		if dial == nil {
			dial = (&net.Dialer{Timeout: 2 * time.Second}).DialContext
		}
		c = &http.Client{
			Transport: &http.Transport{
				// IMDS "is not intended to be used behind a proxy": never
				// consult HTTP_PROXY, which Go applies to 169.254.169.254.
				Proxy:                 nil,
				DialContext:           dial,
				ResponseHeaderTimeout: imdsTimeout,
				MaxIdleConns:          2,
				IdleConnTimeout:       30 * time.Second,
			},
			Timeout: 2 * imdsTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse // IMDS does not redirect; a redirect is not IMDS
			},
		}
	}
	return &imdsClient{base: cfg.IMDSEndpoint, client: c, max: cfg.RetryMax, factor: cfg.RetryBackoff, sleep: cfg.Sleep, log: log}
}

// imdsStatusError is a non-200 answer from IMDS.
type imdsStatusError struct {
	status     int
	retryAfter time.Duration
	message    string
}

func (e *imdsStatusError) Error() string {
	return fmt.Sprintf("status %d: %s", e.status, e.message)
}

// retryable: IMDS asks callers to back off on 410, 429 and 500.
func (e *imdsStatusError) retryable() bool {
	switch e.status {
	case http.StatusGone, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// get performs one GET and returns the body of a 200.
func (c *imdsClient) get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, imdsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Metadata", "true")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIMDSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxIMDSBytes {
		return nil, fmt.Errorf("response larger than %d bytes", maxIMDSBytes)
	}
	if resp.StatusCode != http.StatusOK {
		e := &imdsStatusError{status: resp.StatusCode}
		var msg struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Error != "" {
			e.message = msg.Error
		} else {
			e.message = http.StatusText(resp.StatusCode)
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			e.retryAfter = time.Duration(s) * time.Second
		}
		return nil, e
	}
	return body, nil
}

// retryIMDS runs op up to max times. It retries what IMDS says to retry
// (410/429/5xx), network errors, and whatever extra accepts; the delay is
// 1 s × factor^n (at least the Retry-After IMDS sent, at most 70 s) and
// waits through the injected sleep.
func (c *imdsClient) retryIMDS(ctx context.Context, step string, op func() error, extra func(error) bool) error {
	return retry.Do(op,
		retry.Context(ctx),
		retry.Attempts(uint(c.max)),
		retry.LastErrorOnly(true),
		retry.WithTimer(sleepTimer{ctx: ctx, sleep: c.sleep}),
		retry.RetryIf(func(err error) bool {
			if ctx.Err() != nil || !retry.IsRecoverable(err) {
				return false
			}
			var se *imdsStatusError
			if errors.As(err, &se) {
				return se.retryable()
			}
			if extra != nil && extra(err) {
				return true
			}
			return isTransport(err)
		}),
		retry.DelayType(func(n uint, err error, _ *retry.Config) time.Duration {
			d := time.Duration(float64(time.Second) * pow(c.factor, int(n)-1))
			var se *imdsStatusError
			if errors.As(err, &se) && se.retryAfter > d {
				d = se.retryAfter
			}
			return min(d, maxIMDSDelay)
		}),
		retry.OnRetry(func(n uint, err error) {
			c.log.Warn("imds request failed, retrying", "phase", "prove", "step", step, "attempt", n+1, "error", err.Error())
		}),
	)
}

func pow(f float64, n int) float64 {
	r := 1.0
	for range n {
		r *= f
		if r > maxIMDSDelay.Seconds() {
			break
		}
	}
	return r
}

// sleepTimer adapts the injected sleep to retry-go's Timer.
type sleepTimer struct {
	ctx   context.Context
	sleep func(context.Context, time.Duration) error
}

func (t sleepTimer) After(d time.Duration) <-chan time.Time {
	if err := t.sleep(t.ctx, d); err != nil {
		return nil // never fires; retry-go sees ctx.Done instead
	}
	ch := make(chan time.Time, 1)
	ch <- time.Now()
	return ch
}

// compute is the part of /metadata/instance/compute the engine uses.
type compute struct {
	SubscriptionID string `json:"subscriptionId"`
	// ResourceGroupName is the node VM's resource group: on AKS the
	// cluster's node resource group (MC_…), which binds the extension's
	// managed cluster to this node.
	ResourceGroupName string `json:"resourceGroupName"`
	Location          string `json:"location"`
	VMID              string `json:"vmId"`
	AzEnvironment     string `json:"azEnvironment"`
}

// parseCompute decodes compute JSON and insists on a subscription and a
// resource group (which binds the extension's cluster to this node), so
// that a compute without them stops phase 2 before any ARM request.
func parseCompute(b []byte) (*compute, error) {
	var c compute
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("compute metadata is not JSON: %w", err)
	}
	if c.SubscriptionID == "" {
		return nil, errors.New("compute metadata has no subscriptionId")
	}
	if strings.TrimSpace(c.ResourceGroupName) == "" {
		return nil, errors.New("compute metadata has no resourceGroupName")
	}
	return &c, nil
}

// instanceCompute reads /metadata/instance/compute.
func (c *imdsClient) instanceCompute(ctx context.Context) (*compute, error) {
	var out *compute
	err := c.retryIMDS(ctx, "compute", func() error {
		b, err := c.get(ctx, "/metadata/instance/compute", url.Values{"api-version": {IMDSAPIVersion}})
		if err != nil {
			return err
		}
		out, err = parseCompute(b)
		return err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("instance compute: %w: %w", ErrIMDS, err)
	}
	return out, nil
}

// attestedResponse is the IMDS answer for /metadata/attested/document.
type attestedResponse struct {
	Encoding  string `json:"encoding"`
	Signature string `json:"signature"`
}

// attested reads one attested document for nonce (no retry of its own).
func (c *imdsClient) attested(ctx context.Context, nonce string) (*attestedResponse, error) {
	b, err := c.get(ctx, "/metadata/attested/document", url.Values{"api-version": {IMDSAPIVersion}, "nonce": {nonce}})
	if err != nil {
		return nil, err
	}
	var r attestedResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("attested document is not JSON: %w", err)
	}
	switch {
	case r.Encoding != "pkcs7":
		return nil, fmt.Errorf("encoding %q, want pkcs7", r.Encoding)
	case r.Signature == "":
		return nil, fmt.Errorf("no signature (encoding %q)", r.Encoding)
	}
	return &r, nil
}

// noConnection reports that the last IMDS attempt got no TCP connection at
// all: the connect timed out or was refused. A 4xx/5xx, a reset after the
// connect or a slow answer are IMDS speaking, not a blocked route.
func noConnection(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// imdsRestrictionHint is the verdict's text when IMDS accepted no
// connection: what happened, the likely cause and the exact fix. It names
// the chart value and the customer's command for their release
// (fix, Config.HostNetworkRemedy), since the operator who reads it
// installed the chart, not this binary. Lifting the restriction instead
// takes effect only on reimaged nodes (aks-docs imds-restriction.md:
// enabling and disabling apply after az aks upgrade --node-image-only).
func imdsRestrictionHint(c *imdsClient, fix string, err error) string {
	if fix == "" {
		fix = "set the chart value hostNetwork=true"
	}
	return fmt.Sprintf("no connection to IMDS at %s from this pod in %d attempts (last: %v), although this is an Azure VM; "+
		"the likely cause is AKS's IMDS restriction (az aks update --enable-imds-restriction), which drops IMDS traffic from every pod "+
		"that is not on the node's network; fix: turn the chart value hostNetwork on (%s), which runs the engine's pod on the node's network "+
		"with dnsPolicy ClusterFirstWithHostNet, or lift the restriction (az aks update --disable-imds-restriction, "+
		"then az aks upgrade --node-image-only: AKS applies it only to reimaged nodes)",
		c.base, max(c.max, 1), unwrapURL(err), fix)
}

// unwrapURL drops the "Get <url>:" prefix of a url.Error, which repeats the
// endpoint the hint already names.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// isTransport reports network trouble: refused, reset, timed out.
func isTransport(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue)
}
