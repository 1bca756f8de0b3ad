package azure_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/providers/azure"
)

// TestCredentialModes runs phase 2 in each mode against the fake cloud:
// the managed identity's token comes from the IMDS token endpoint (which
// insists on Metadata: true, api-version, resource and the client_id of
// the node's identity), the workload identity's from Entra, and the log
// says which one ran.
func TestCredentialModes(t *testing.T) {
	tests := map[string]struct {
		managed   bool
		setup     func(t *testing.T, e *env)
		wantErr   error
		permanent bool
		settling  bool
		check     func(t *testing.T, e *env, log string, err error)
	}{
		"managed identity: token from IMDS, never from Entra": {
			managed: true,
			check: func(t *testing.T, e *env, log string, _ error) {
				assert.Equal(t, int32(1), e.fake.IdentityTokenRequests.Load())
				assert.Zero(t, e.fake.TokenRequests.Load(), "Entra is not asked")
				assert.Equal(t, int32(2), e.fake.ARMRequests.Load(), "ARM accepted the IMDS token for the extension and its cluster")
				assert.Equal(t, int32(1), e.fake.ManagedClusterRequests.Load())
				assert.Contains(t, log, "credentialMode=managed-identity")
				assert.Contains(t, log, "clientId="+e.cfg.ClientID)
			},
		},
		"managed identity: 429 then success": {
			managed: true,
			setup:   func(t *testing.T, e *env) { e.fake.IdentityToken429.Store(1) },
			check: func(t *testing.T, e *env, _ string, _ error) {
				assert.Equal(t, int32(2), e.fake.IdentityTokenRequests.Load(), "the throttled request is retried once")
			},
		},
		"managed identity: identity not found is settling and names AZURE_CLIENT_ID": {
			managed:  true,
			setup:    func(t *testing.T, e *env) { e.fake.IdentityNotFound.Store(true) },
			wantErr:  azure.ErrToken,
			settling: true,
			check: func(t *testing.T, e *env, _ string, err error) {
				assert.Equal(t, int32(1), e.fake.IdentityTokenRequests.Load(), "a 400 is not retried")
				assert.Zero(t, e.fake.ARMRequests.Load())
			},
		},
		"managed identity: a client ID the node does not have is settling": {
			managed:  true,
			setup:    func(t *testing.T, e *env) { e.cfg.ClientID = randomClientID(t) },
			wantErr:  azure.ErrToken,
			settling: true,
		},
		"managed identity: token endpoint failing beyond VERIFY_RETRY_MAX is transient": {
			managed: true,
			setup: func(t *testing.T, e *env) {
				var hits atomic.Int32
				e.withIMDS(t, func(next http.Handler) http.Handler {
					return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						if r.URL.Path == fakecloud.IdentityTokenPath {
							hits.Add(1)
							w.WriteHeader(http.StatusServiceUnavailable)
							return
						}
						next.ServeHTTP(w, r)
					})
				})
				t.Cleanup(func() { assert.Equal(t, int32(3), hits.Load(), "RetryMax attempts, no more") })
			},
			wantErr: azure.ErrToken,
		},
		"workload identity: token from Entra, IMDS is not asked for one": {
			check: func(t *testing.T, e *env, log string, _ error) {
				assert.Equal(t, int32(1), e.fake.TokenRequests.Load())
				assert.Zero(t, e.fake.IdentityTokenRequests.Load())
				assert.Contains(t, log, "credentialMode=workload-identity")
			},
		},
	}
	// What each refusal says: the client ID as AZURE_CLIENT_ID and the
	// chart value it comes from, IMDS's own words and the endpoint that
	// failed with its last answer.
	msgs := testkit.NewMessages(t)
	msgs.Varying = true
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			if tc.managed {
				e.useManagedIdentity()
			}
			if tc.setup != nil {
				tc.setup(t, e)
			}
			_, err := e.prove(t, tc.wantErr, tc.permanent)
			if err != nil {
				assert.Equal(t, tc.settling, failure.IsSettling(err), "settling: %v", err)
				msgs.Add(name, err, e.cfg.ClientID, "<client ID>")
			}
			if tc.check != nil {
				tc.check(t, e, e.logged(), err)
			}
		})
	}
}

// TestCredentialModeSettings: each mode asks for exactly its own settings.
func TestCredentialModeSettings(t *testing.T) {
	tests := map[string]struct {
		mutate  func(e *env)
		wantErr bool // refused by New; the message is in the golden file
	}{
		"managed identity needs no tenant and no token file": {
			mutate: func(e *env) { e.useManagedIdentity() },
		},
		"managed identity without AZURE_CLIENT_ID": {
			mutate:  func(e *env) { e.useManagedIdentity(); e.cfg.ClientID = "" },
			wantErr: true,
		},
		"no mode": {
			mutate:  func(e *env) { e.cfg.CredentialMode = "" },
			wantErr: true,
		},
		"unknown mode": {
			mutate:  func(e *env) { e.cfg.CredentialMode = "default" },
			wantErr: true,
		},
	}
	msgs := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			tc.mutate(e)
			p, err := azure.New(e.cfg)
			if !tc.wantErr {
				require.NoError(t, err)
				assert.NotNil(t, p)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, azure.ErrConfig)
			assert.True(t, failure.IsPermanent(err))
			msgs.Add(name, err)
			// Each problem on its own names the setting, not the sentinel:
			// the golden file shows New's joined message, whose prefix the
			// sentinel gives once.
			for i, err := range azure.CheckCredential(e.cfg) {
				assert.ErrorIs(t, err, azure.ErrConfig, "%v", err)
				msgs.Add(fmt.Sprintf("%s: CheckCredential's problem %d", name, i+1), err)
			}
		})
	}
}

// TestManagedIdentityReachesOnlyIMDS: when the environment points
// azidentity at another managed identity source (App Service, Cloud Shell,
// Arc), the engine refuses to start phase 2 rather than send the request
// there.
func TestManagedIdentityReachesOnlyIMDS(t *testing.T) {
	t.Setenv("MSI_ENDPOINT", "http://127.0.0.1:9/msi/token")
	e := newEnv(t)
	e.useManagedIdentity()
	_, err := azure.New(e.cfg)
	require.Error(t, err)
	assert.ErrorIs(t, err, azure.ErrConfig)
	assert.True(t, failure.IsPermanent(err))
	// The message names the source azidentity would use and the variables to
	// unset (no "<nil>" of a missing cause).
	msgs := testkit.NewMessages(t)
	msgs.Add("MSI_ENDPOINT set", err)
	assert.Zero(t, e.fake.IdentityTokenRequests.Load())
}
