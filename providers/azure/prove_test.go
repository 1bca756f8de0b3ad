package azure_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallstep/pkcs7"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/providers"
	"github.com/rancher/registration-engine/providers/azure"
)

// signedNonce digs the signed nonce out of instanceData, as the update
// server does.
func signedNonce(t *testing.T, instanceData string) (nonce, offer string) {
	t.Helper()
	require.True(t, strings.HasPrefix(instanceData, "<document>") && strings.HasSuffix(instanceData, "</document>"))
	var v struct {
		SubscriptionID string `json:"subscriptionId"`
		AttestedData   struct {
			Signature string `json:"signature"`
		} `json:"attestedData"`
		Offer string `json:"offer"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(instanceData, "<document>"), "</document>")), &v))
	der, err := base64.StdEncoding.DecodeString(v.AttestedData.Signature)
	require.NoError(t, err)
	p7, err := pkcs7.Parse(der)
	require.NoError(t, err)
	var c struct {
		Nonce string `json:"nonce"`
	}
	require.NoError(t, json.Unmarshal(p7.Content, &c))
	return c.Nonce, v.Offer
}

func TestProve(t *testing.T) {
	tests := map[string]struct {
		setup func(t *testing.T, e *env)
		// wantErr nil means success.
		wantErr   error
		permanent bool
		// settling: not permanent by itself; the run retries it within its
		// first-contact window (failure.Settling).
		settling bool
		check    func(t *testing.T, e *env, ev *providers.Evidence, err error)
	}{
		"success": {
			check: func(t *testing.T, e *env, ev *providers.Evidence, _ error) {
				assert.Equal(t, providers.Azure, ev.Cloud)
				assert.Equal(t, "westeurope", ev.RegionHint)
				nonce, offer := signedNonce(t, ev.InstanceData)
				assert.Equal(t, "suse:sles-15-sp7:premium", offer)
				assert.Equal(t, "2jejosSbpvfywfLc2RcplWnHyDyAxWS_", nonce, "the signed nonce is the hash of the verified plan")
				assert.Contains(t, ev.InstanceData, `{"subscriptionId": "`+e.fake.Config().SubscriptionID+`", "attestedData": {"signature": "`)
				assert.Equal(t, int32(1), e.fake.TokenRequests.Load(), "one token per run")
				assert.Equal(t, int32(1), e.fake.AIARequests.Load(), "the intermediate is fetched from the leaf's AIA URL")
			},
		},
		"plan publisher mismatch": {
			setup:   func(t *testing.T, e *env) { p := e.fake.Plan(); p.Publisher = "evil"; e.fake.SetPlan(p) },
			wantErr: azure.ErrPlanMismatch, permanent: true,
			check: func(t *testing.T, e *env, _ *providers.Evidence, err error) {
				assert.Zero(t, e.fake.AttestedRequests.Load(), "no document is requested for a wrong plan")
			},
		},
		"plan offer mismatch": {
			setup:   func(t *testing.T, e *env) { p := e.fake.Plan(); p.Product = "sles-15-sp6"; e.fake.SetPlan(p) },
			wantErr: azure.ErrPlanMismatch, permanent: true,
		},
		// The comparison is case-sensitive.
		"plan name mismatch": {
			setup:   func(t *testing.T, e *env) { p := e.fake.Plan(); p.Name = "Premium"; e.fake.SetPlan(p) },
			wantErr: azure.ErrPlanMismatch, permanent: true,
		},
		"missing plan": {
			setup:   func(t *testing.T, e *env) { e.fake.NoPlan.Store(true) },
			wantErr: azure.ErrPlanMismatch, permanent: true,
		},
		"429 then success honours Retry-After": {
			setup: func(t *testing.T, e *env) { e.fake.ARM429.Store(1) },
			check: func(t *testing.T, e *env, _ *providers.Evidence, _ error) {
				times := e.armRequestTimes()
				require.Len(t, times, 3, "the extension twice, then its managed cluster")
				// The base delay is 1 ms; only Retry-After: 1 explains a 1 s gap.
				assert.GreaterOrEqual(t, times[1].Sub(times[0]), 900*time.Millisecond)
			},
		},
		"503 retried then success": {
			setup: func(t *testing.T, e *env) { e.fake.ARM5xx.Store(2) },
			check: func(t *testing.T, e *env, _ *providers.Evidence, _ error) {
				assert.Equal(t, int32(4), e.fake.ARMRequests.Load(), "the extension three times, then its managed cluster")
				assert.Equal(t, int32(1), e.fake.ManagedClusterRequests.Load())
			},
		},
		"503 beyond VERIFY_RETRY_MAX is transient": {
			setup:   func(t *testing.T, e *env) { e.fake.ARM5xx.Store(100) },
			wantErr: azure.ErrARM,
			check: func(t *testing.T, e *env, _ *providers.Evidence, _ error) {
				assert.Equal(t, int32(3), e.fake.ARMRequests.Load(), "RetryMax attempts, no more")
			},
		},
		"403 fails at once, settling (a role assignment may still propagate), and names the role assignment": {
			setup:   func(t *testing.T, e *env) { e.fake.ARMStatus.Store(http.StatusForbidden) },
			wantErr: azure.ErrARM, settling: true,
			check: func(t *testing.T, e *env, _ *providers.Evidence, err error) {
				assert.Equal(t, int32(1), e.fake.ARMRequests.Load(), "no retry")
			},
		},
		"404 fails at once and names the resource ID": {
			setup:   func(t *testing.T, e *env) { e.fake.ARMStatus.Store(http.StatusNotFound) },
			wantErr: azure.ErrARM, permanent: true,
			check: func(t *testing.T, e *env, _ *providers.Evidence, err error) {
				assert.Equal(t, int32(1), e.fake.ARMRequests.Load())
			},
		},
		"extension of another cluster in the same subscription: permanent, names both resource groups": {
			setup:   func(t *testing.T, e *env) { e.fake.OtherCluster.Store(true) },
			wantErr: azure.ErrClusterMismatch, permanent: true,
			check: func(t *testing.T, e *env, _ *providers.Evidence, err error) {
				assert.Equal(t, int32(1), e.fake.ManagedClusterRequests.Load())
				assert.Zero(t, e.fake.AttestedRequests.Load(), "no document is requested for another cluster's extension")
			},
		},
		"managed cluster read with the extension's token": {
			check: func(t *testing.T, e *env, _ *providers.Evidence, _ error) {
				assert.Equal(t, int32(1), e.fake.ManagedClusterRequests.Load(), "the binding reads the cluster once")
				assert.Equal(t, int32(1), e.fake.TokenRequests.Load(), "with the token the extension was read with")
			},
		},
		"node resource group in another case: bound": {
			setup: func(t *testing.T, e *env) {
				e.withIMDS(t, rewrite("/metadata/instance/compute", func(b []byte) []byte {
					return []byte(strings.Replace(string(b), `"MC_rg-fake_aks-fake_westeurope"`, `"mc_RG-FAKE_aks-fake_westeurope"`, 1))
				}))
			},
			check: func(t *testing.T, e *env, _ *providers.Evidence, _ error) {
				assert.Contains(t, e.logged(), "nodeResourceGroup=mc_RG-FAKE_aks-fake_westeurope", "IMDS did say another case")
			},
		},
		"identity may read the extension but not its cluster: settling, names the role": {
			setup:   func(t *testing.T, e *env) { e.fake.ManagedClusterStatus.Store(http.StatusForbidden) },
			wantErr: azure.ErrARM, settling: true,
			check: func(t *testing.T, e *env, _ *providers.Evidence, _ error) {
				assert.Equal(t, int32(1), e.fake.ManagedClusterRequests.Load(), "no retry")
				assert.Zero(t, e.fake.AttestedRequests.Load())
			},
		},
		"managed cluster not found: permanent, names EXTENSION_RESOURCE_ID": {
			setup:   func(t *testing.T, e *env) { e.fake.ManagedClusterStatus.Store(http.StatusNotFound) },
			wantErr: azure.ErrARM, permanent: true,
		},
		"federated token refused by Entra: settling": {
			setup: func(t *testing.T, e *env) {
				require.NoError(t, os.WriteFile(e.cfg.TokenFile, []byte("someone-elses-token"), 0o600))
			},
			wantErr: azure.ErrToken, settling: true,
			check: func(t *testing.T, e *env, _ *providers.Evidence, err error) {
				assert.Zero(t, e.fake.ARMRequests.Load())
			},
		},
		// A federated identity credential made for another ServiceAccount:
		// the verdict names the issuer, subject and audience of the pod's
		// own token, the values the credential must carry.
		"federated credential of another subject: settling, the verdict names this token's": {
			setup: func(t *testing.T, e *env) {
				payload := base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"https://oidc.example/cluster","sub":"system:serviceaccount:cattle-scc-system:registration-engine","aud":["api://AzureADTokenExchange"],"exp":4102444800}`))
				require.NoError(t, os.WriteFile(e.cfg.TokenFile, []byte("eyJhbGciOiJSUzI1NiJ9."+payload+".c2ln"), 0o600))
			},
			wantErr: azure.ErrToken, settling: true,
			check: func(t *testing.T, e *env, _ *providers.Evidence, err error) {
				assert.Contains(t, err.Error(), `issuer "https://oidc.example/cluster", subject "system:serviceaccount:cattle-scc-system:registration-engine" and audience "api://AzureADTokenExchange"`)
				assert.Zero(t, e.fake.ARMRequests.Load())
			},
		},
		"extension in another subscription": {
			setup: func(t *testing.T, e *env) {
				e.cfg.ExtensionResourceID = strings.Replace(e.cfg.ExtensionResourceID, e.fake.Config().SubscriptionID,
					"00000000-0000-0000-0000-000000000bad", 1)
			},
			wantErr: azure.ErrSubscriptionMismatch, permanent: true,
			check: func(t *testing.T, e *env, _ *providers.Evidence, _ error) {
				assert.Zero(t, e.fake.ARMRequests.Load())
			},
		},
		"tampered document": {
			setup:   func(t *testing.T, e *env) { e.fake.TamperDocument.Store(true) },
			wantErr: azure.ErrAttestation, permanent: true,
		},
		"chain to an unknown root": {
			setup:   func(t *testing.T, e *env) { e.fake.UnknownRoot.Store(true) },
			wantErr: azure.ErrAttestation, permanent: true,
		},
		"wrong signer name": {
			setup:   func(t *testing.T, e *env) { e.fake.WrongSigner.Store(true) },
			wantErr: azure.ErrAttestation, permanent: true,
		},
		"expired signer certificate": {
			setup:   func(t *testing.T, e *env) { e.fake.ExpiredLeaf.Store(true) },
			wantErr: azure.ErrAttestation, permanent: true,
		},
		"signed content without subscriptionId: permanent, names the field": {
			setup:   forge(fakecloud.Forgery{Omit: []string{"subscriptionId"}}),
			wantErr: azure.ErrAttestation, permanent: true,
		},
		"signed content without vmId: permanent, names the field": {
			setup:   forge(fakecloud.Forgery{Omit: []string{"vmId"}}),
			wantErr: azure.ErrAttestation, permanent: true,
		},
		"self-signed signer with another nonce is a forgery, not a cached document": {
			setup: func(t *testing.T, e *env) {
				forge(fakecloud.Forgery{SelfSigned: true})(t, e)
				e.fake.CachedNonce.Store(100)
			},
			wantErr: azure.ErrAttestation, permanent: true,
			check: func(t *testing.T, e *env, _ *providers.Evidence, err error) {
				assert.NotErrorIs(t, err, azure.ErrNonceMismatch)
				assert.Equal(t, int32(1), e.fake.AttestedRequests.Load(), "a forgery is not asked for again")
			},
		},
		"forged signer whose AIA URL is allowed but names another issuer: permanent": {
			setup:   forge(fakecloud.Forgery{ForeignIssuer: true}),
			wantErr: azure.ErrAttestation, permanent: true,
			check: func(t *testing.T, e *env, _ *providers.Evidence, err error) {
				assert.NotErrorIs(t, err, azure.ErrIntermediateUnavailable)
				assert.Equal(t, int32(1), e.fake.AIARequests.Load())
			},
		},
		"at most two AIA URLs are tried": {
			setup: forge(fakecloud.Forgery{AIAPaths: []string{"/aia/a.crt", "/aia/b.crt", "/aia/c.crt", "/aia/d.crt", "/aia/e.crt"}}),
			// 404s say nothing about the document: unavailable, transient.
			wantErr: azure.ErrIntermediateUnavailable,
			check: func(t *testing.T, e *env, _ *providers.Evidence, _ error) {
				assert.Equal(t, int32(2), e.fake.AIARequests.Load())
				assert.Equal(t, int32(1), e.fake.AttestedRequests.Load(), "an unavailable intermediate is not IMDS's failure")
			},
		},
		"signer is a CA": {
			setup:   forge(fakecloud.Forgery{SignerIsCA: true}),
			wantErr: azure.ErrAttestation, permanent: true,
		},
		"signer without key usage or serverAuth": {
			setup:   forge(fakecloud.Forgery{NoUsage: true}),
			wantErr: azure.ErrAttestation, permanent: true,
		},
		"signer named metadata.azure.com in its CN but another name in its SAN": {
			setup:   forge(fakecloud.Forgery{SAN: []string{"login.attacker.example"}}),
			wantErr: azure.ErrAttestation, permanent: true,
		},
		"content signed with SHA-1": {
			setup:   forge(fakecloud.Forgery{SHA1: true}),
			wantErr: azure.ErrAttestation, permanent: true,
		},
		"createdOn a year ahead: a clock far behind, transient": {
			setup:   forge(fakecloud.Forgery{CreatedAhead: 365 * 24 * time.Hour}),
			wantErr: azure.ErrDocumentNotYetValid, permanent: false,
		},
		// The two directions of a wrong node clock fail alike: transient
		// (exit 1, the Job retries), never ErrAttestation, and the document
		// is not asked for again within the run.
		"node clock 10 minutes behind: transient, names the clock": {
			setup: func(t *testing.T, e *env) {
				e.cfg.Clock = func() time.Time { return time.Now().Add(-10 * time.Minute) }
			},
			wantErr: azure.ErrDocumentNotYetValid, permanent: false,
			check: func(t *testing.T, e *env, _ *providers.Evidence, err error) {
				assert.NotErrorIs(t, err, azure.ErrAttestation)
				assert.Equal(t, int32(1), e.fake.AttestedRequests.Load())
				// What transient is for: the retry, once the clock is
				// right, proves the same deployment.
				e.cfg.Clock = time.Now
				ev, _ := e.prove(t, nil, false)
				assert.Equal(t, "westeurope", ev.RegionHint)
			},
		},
		"node clock 7 hours ahead: the document has expired, transient": {
			setup:   func(t *testing.T, e *env) { e.cfg.Clock = func() time.Time { return time.Now().Add(7 * time.Hour) } },
			wantErr: azure.ErrDocumentExpired, permanent: false,
			check: func(t *testing.T, e *env, _ *providers.Evidence, err error) {
				assert.NotErrorIs(t, err, azure.ErrAttestation)
				assert.Equal(t, int32(1), e.fake.AttestedRequests.Load())
			},
		},
		"node clock 4 minutes behind: within the tolerance, accepted": {
			setup: func(t *testing.T, e *env) { e.cfg.Clock = func() time.Time { return time.Now().Add(-4 * time.Minute) } },
		},
		"a forgery on a node whose clock is behind is still a forgery": {
			setup: func(t *testing.T, e *env) {
				e.fake.TamperDocument.Store(true)
				e.cfg.Clock = func() time.Time { return time.Now().Add(-10 * time.Minute) }
			},
			wantErr: azure.ErrAttestation, permanent: true,
		},
		"createdOn a minute ahead: clocks drift, accepted": {
			setup: forge(fakecloud.Forgery{CreatedAhead: time.Minute}),
		},
		"cached nonce retried then success": {
			setup: func(t *testing.T, e *env) { e.fake.CachedNonce.Store(1) },
			check: func(t *testing.T, e *env, _ *providers.Evidence, _ error) {
				assert.Equal(t, int32(2), e.fake.AttestedRequests.Load())
				assert.Equal(t, []time.Duration{time.Second}, e.sleeps.All())
			},
		},
		"replayed nonce retried then rejected": {
			setup:   func(t *testing.T, e *env) { e.fake.CachedNonce.Store(100) },
			wantErr: azure.ErrNonceMismatch, permanent: false,
			check: func(t *testing.T, e *env, _ *providers.Evidence, _ error) {
				assert.Equal(t, int32(3), e.fake.AttestedRequests.Load(), "bounded by RetryMax")
				assert.Len(t, e.sleeps.All(), 2)
			},
		},
		"IMDS 429, 410 and 500 are backed off": {
			setup: func(t *testing.T, e *env) { e.fake.IMDS429.Store(1); e.fake.IMDS410.Store(1) },
			check: func(t *testing.T, e *env, _ *providers.Evidence, _ error) {
				// compute: 429, 410, 200 → two waits growing by VERIFY_RETRY_BACKOFF
				s := e.sleeps.All()
				require.Len(t, s, 2)
				assert.Equal(t, time.Second, s[0])
				assert.Equal(t, time.Duration(float64(time.Second)*e.cfg.RetryBackoff), s[1])
			},
		},
		"IMDS unavailable is transient": {
			setup:   func(t *testing.T, e *env) { e.fake.IMDS500.Store(100) },
			wantErr: azure.ErrIMDS,
			check: func(t *testing.T, e *env, _ *providers.Evidence, _ error) {
				assert.Equal(t, int32(3), e.fake.IMDSRequests.Load())
			},
		},
		// AKS's IMDS restriction drops a pod's packets to IMDS; a refused
		// connect is the same verdict (an iptables REJECT rather than DROP).
		// TestEngineIMDSRestricted (e2e) plays the real drop.
		"IMDS accepts no connection: permanent, names the IMDS restriction and hostNetwork": {
			setup: func(t *testing.T, e *env) {
				closed := httptest.NewServer(http.NotFoundHandler())
				closed.Close() // a port nobody listens on: every connect is refused
				e.cfg.IMDSEndpoint = closed.URL
				e.cfg.IMDSClient = nil
			},
			wantErr: azure.ErrIMDSUnreachable, permanent: true,
			check: func(t *testing.T, e *env, _ *providers.Evidence, err error) {
				assert.Len(t, e.sleeps.All(), 2, "RetryMax attempts before the verdict")
				assert.Zero(t, e.fake.ARMRequests.Load(), "nothing else is asked")
			},
		},
		// On a Marketplace install the customer's command is Azure's (the
		// package job builds it): the verdict carries it as given.
		"IMDS accepts no connection on a Marketplace install: Azure's command, the reimage step": {
			setup: func(t *testing.T, e *env) {
				closed := httptest.NewServer(http.NotFoundHandler())
				closed.Close()
				e.cfg.IMDSEndpoint = closed.URL
				e.cfg.IMDSClient = nil
				e.cfg.HostNetworkRemedy = "az k8s-extension update --resource-group rg --cluster-name c --cluster-type managedClusters --name e --configuration-settings hostNetwork=true --yes"
			},
			wantErr: azure.ErrIMDSUnreachable, permanent: true,
			check: func(t *testing.T, e *env, _ *providers.Evidence, err error) {
				assert.Contains(t, err.Error(), "(az k8s-extension update --resource-group rg --cluster-name c --cluster-type managedClusters --name e --configuration-settings hostNetwork=true --yes)")
				assert.Contains(t, err.Error(), "then az aks upgrade --node-image-only")
				assert.NotContains(t, err.Error(), "helm upgrade")
			},
		},
		"IMDS answering 500 is not the IMDS restriction": {
			setup:   func(t *testing.T, e *env) { e.fake.IMDS500.Store(100) },
			wantErr: azure.ErrIMDS,
			check: func(t *testing.T, _ *env, _ *providers.Evidence, err error) {
				assert.NotErrorIs(t, err, azure.ErrIMDSUnreachable)
				assert.False(t, failure.IsPermanent(err), "IMDS answered: a retry may succeed")
			},
		},
		"intermediate host not on the allow-list": {
			setup:   func(t *testing.T, e *env) { e.cfg.AIAAllowedHosts = nil },
			wantErr: azure.ErrAttestation, permanent: true,
			check: func(t *testing.T, e *env, _ *providers.Evidence, _ error) {
				assert.Zero(t, e.fake.AIARequests.Load(), "nothing is fetched from a host off the list")
			},
		},
		"intermediate unreachable is transient": {
			setup: func(t *testing.T, e *env) {
				e.cfg.AIAClient = &http.Client{Transport: &http.Transport{
					DialContext: func(context.Context, string, string) (net.Conn, error) {
						return nil, errors.New("network unreachable")
					},
				}}
			},
			wantErr: azure.ErrIntermediateUnavailable,
		},
	}
	// What each refusal says, for an operator to act: expected and got, the
	// role assignment, the setting and its chart value, the clock's
	// direction, the IMDS restriction and hostNetwork.
	msgs := testkit.NewMessages(t)
	msgs.Varying = true
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			ev, err := e.prove(t, tc.wantErr, tc.permanent)
			if err != nil {
				msgs.Add(name, err)
				assert.Equal(t, tc.settling, failure.IsSettling(err), "settling: %v", err)
			}
			if tc.check != nil {
				tc.check(t, e, ev, err)
			}
		})
	}
}

// forge makes the fake IMDS sign every document as f describes.
func forge(f fakecloud.Forgery) func(t *testing.T, e *env) {
	return func(_ *testing.T, e *env) { e.fake.Forge.Store(&f) }
}

func TestProveRegionHintLowerCase(t *testing.T) {
	e := newEnv(t)
	fake, err := fakecloud.NewAzure(fakecloud.AzureConfig{Location: "WestEurope"})
	require.NoError(t, err)
	imds := httptest.NewServer(fake.IMDSHandler())
	t.Cleanup(imds.Close)
	e.cfg.IMDSEndpoint = imds.URL
	e.cfg.Roots.AddCert(fake.Root())
	e.cfg.AIAAllowedHosts = []string{strings.TrimPrefix(imds.URL, "http://")}
	p, err := azure.New(e.cfg)
	require.NoError(t, err)
	ev, err := p.Prove(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "westeurope", ev.RegionHint)
}

// TestIMDSNeverUsesProxy points HTTP_PROXY at a trap and IMDS at its real
// address; the default IMDS client must dial 169.254.169.254 itself (the
// dial is redirected to the loopback fake) and never the proxy. In
// managed-identity mode the token request takes the same way.
func TestIMDSNeverUsesProxy(t *testing.T) {
	for _, mode := range azure.CredentialModes {
		t.Run(string(mode), func(t *testing.T) { imdsNeverUsesProxy(t, mode) })
	}
}

func imdsNeverUsesProxy(t *testing.T, mode azure.CredentialMode) {
	var trapHits atomic.Int32
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		trapHits.Add(1)
		w.WriteHeader(http.StatusBadGateway)
	}))
	t.Cleanup(trap.Close)
	t.Setenv("HTTP_PROXY", trap.URL)
	t.Setenv("http_proxy", trap.URL)
	t.Setenv("HTTPS_PROXY", trap.URL)
	t.Setenv("NO_PROXY", "")

	e := newEnv(t)
	if mode == azure.ManagedIdentity {
		e.useManagedIdentity()
	}
	var imdsDials atomic.Int32
	// Redirect the real IMDS address to the fake; anything else must be
	// loopback (the trap), so a proxied request would reach the trap.
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if host == "169.254.169.254" {
			imdsDials.Add(1)
			addr = e.imdsHost
		} else if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return nil, errors.New("test refuses to dial a non-loopback address")
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	e.cfg.IMDSEndpoint = "http://169.254.169.254"
	e.cfg.IMDSClient = nil
	e.cfg.IMDSDialContext = dial
	// The leaf's AIA URL now names 169.254.169.254 too.
	e.cfg.AIAAllowedHosts = []string{"169.254.169.254"}
	e.cfg.AIAClient = &http.Client{Transport: &http.Transport{DialContext: dial, Proxy: nil}}

	p, err := azure.New(e.cfg)
	require.NoError(t, err)
	_, err = p.Prove(context.Background())
	require.NoError(t, err)
	assert.Zero(t, trapHits.Load(), "IMDS traffic went through HTTP_PROXY")
	assert.GreaterOrEqual(t, imdsDials.Load(), int32(1), "IMDS was dialled directly")
	if mode == azure.ManagedIdentity {
		assert.Equal(t, int32(1), e.fake.IdentityTokenRequests.Load(), "the token came from IMDS")
	}
}

func TestNewReportsMissingSettings(t *testing.T) {
	tests := map[string]struct {
		mutate func(c *azure.Config)
	}{
		"AZURE_CLIENT_ID": {
			mutate: func(c *azure.Config) { c.ClientID = "" },
		},
		"AZURE_TENANT_ID": {
			mutate: func(c *azure.Config) { c.TenantID = "" },
		},
		"AZURE_FEDERATED_TOKEN_FILE": {
			mutate: func(c *azure.Config) { c.TokenFile = "" },
		},
		"unreadable token file": {
			mutate: func(c *azure.Config) { c.TokenFile = filepath.Join(os.TempDir(), "does-not-exist", "token") },
		},
		"all three at once": {
			mutate: func(c *azure.Config) { c.ClientID, c.TenantID, c.TokenFile = "", "", "" },
		},
		"EXTENSION_RESOURCE_ID": {
			mutate: func(c *azure.Config) { c.ExtensionResourceID = "" },
		},
		"EXTENSION_RESOURCE_ID of the wrong type": {
			mutate: func(c *azure.Config) {
				c.ExtensionResourceID = "/subscriptions/ce73a2b0-d2e7-4ff6-b987-b32d6908de4e/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm"
			},
		},
		"Marketplace IDs": {
			mutate: func(c *azure.Config) { c.Publisher, c.Offer, c.Plan = "", "", "" },
		},
		"authority host without TLS": {
			mutate: func(c *azure.Config) { c.AuthorityHost = "http://127.0.0.1:1/" },
		},
		// The bounds the engine loads its settings with, no looser: a
		// backoff below 1 would shrink IMDS's waits instead of growing them.
		"retry settings out of their bounds": {
			mutate: func(c *azure.Config) { c.RetryMax, c.RetryBackoff = 21, 0.5 },
		},
	}
	msgs := testkit.NewMessages(t)
	msgs.Replace = []string{os.TempDir(), "<tmp>"}
	msgs.Varying = true
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			tc.mutate(&e.cfg)
			p, err := azure.New(e.cfg)
			require.Error(t, err)
			assert.Nil(t, p)
			assert.ErrorIs(t, err, azure.ErrConfig)
			assert.True(t, failure.IsPermanent(err))
			msgs.Add(name, err)
		})
	}
}
