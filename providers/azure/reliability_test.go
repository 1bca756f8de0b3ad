package azure_test

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/providers/azure"
)

// The failures of the reliability matrix (docs/RELIABILITY.md) that phase 2
// must survive or report clearly. Each wraps the fake's handler to break one
// thing the way a real peer or network does.

// withIMDS serves wrap(fake IMDS) and points the config at it.
func (e *env) withIMDS(t *testing.T, wrap func(next http.Handler) http.Handler) {
	srv := httptest.NewServer(wrap(e.fake.IMDSHandler()))
	t.Cleanup(srv.Close)
	e.cfg.IMDSEndpoint = srv.URL
	e.cfg.AIAAllowedHosts = []string{strings.TrimPrefix(srv.URL, "http://")}
}

// withARM serves wrap(fake ARM) over TLS and points the config at it.
func (e *env) withARM(t *testing.T, wrap func(next http.Handler) http.Handler) {
	e.cfg.ARMEndpoint = e.serveTLS(t, wrap(e.fake.ARMHandler()))
}

// serveTLS serves h over TLS with a new CA that the config's client trusts.
func (e *env) serveTLS(t *testing.T, h http.Handler) string {
	ca, err := fakecloud.NewCA("test CA")
	require.NoError(t, err)
	cert, err := ca.Issue("127.0.0.1")
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	tr := e.cfg.HTTPClient.Transport.(*http.Transport)
	pool := tr.TLSClientConfig.RootCAs.Clone()
	pool.AddCert(ca.Cert)
	tr = tr.Clone()
	tr.TLSClientConfig.RootCAs = pool
	e.cfg.HTTPClient = &http.Client{Transport: tr, Timeout: e.cfg.HTTPClient.Timeout}
	return srv.URL
}

// withEntra serves wrap(fake Entra) over TLS and points the config at it.
func (e *env) withEntra(t *testing.T, wrap func(next http.Handler) http.Handler) {
	url := e.serveTLS(t, wrap(e.fake.EntraHandler()))
	e.cfg.AuthorityHost = url + "/"
}

// endless streams a JSON prefix and then bytes without end, counting them.
func endless(e *env, prefix string) func(http.Handler) http.Handler {
	return func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(prefix))
			chunk := []byte(strings.Repeat("a", 64<<10))
			for r.Context().Err() == nil {
				n, err := w.Write(chunk)
				e.served.Add(int64(n))
				if err != nil {
					return
				}
			}
		})
	}
}

// boundedRead asserts after the run that the engine stopped reading.
func boundedRead(e *env) {
	e.check = func(t *testing.T) {
		// The cap is 1 MiB; socket buffers let a few more through.
		// Without a cap this is gigabytes.
		assert.Less(t, e.served.Load(), int64(64<<20), "the engine read an unbounded body")
	}
}

// resetFirst closes the connection without an answer for the first n
// requests: a TCP reset mid-request.
func resetFirst(n int32, hits *atomic.Int32) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hits.Add(1) <= n {
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					if tc, ok := conn.(interface{ SetLinger(int) error }); ok {
						_ = tc.SetLinger(0) // RST, not FIN
					}
					_ = conn.Close()
				}
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// rewrite lets next answer, then replaces the body of responses to path.
func rewrite(path string, body func(orig []byte) []byte) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != path {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			w.WriteHeader(rec.Code)
			_, _ = w.Write(body(rec.Body.Bytes()))
		})
	}
}

func TestReliability(t *testing.T) {
	tests := map[string]struct {
		setup     func(t *testing.T, e *env)
		wantErr   error // nil: the run survives
		permanent bool
		// message: the error's message is the engine's own words, the same
		// every run, and goes to the golden file. Not where it is the SDK's
		// (a 429's dump) or the network's (EOF or a reset, as it happens).
		message bool
		check   func(t *testing.T, e *env, err error)
	}{
		"ARM connection reset mid-request is retried": {
			setup: func(t *testing.T, e *env) {
				var hits atomic.Int32
				e.withARM(t, resetFirst(2, &hits))
			},
		},
		"ARM resets on every attempt: transient after VERIFY_RETRY_MAX": {
			setup: func(t *testing.T, e *env) {
				var hits atomic.Int32
				e.withARM(t, resetFirst(100, &hits))
			},
			wantErr: azure.ErrARM,
		},
		"ARM 429 storm: transient after VERIFY_RETRY_MAX attempts": {
			setup: func(t *testing.T, e *env) {
				e.fake.ARM429.Store(100)
				e.fake.RetryAfterSeconds.Store(0)
			},
			wantErr: azure.ErrARM,
			check: func(t *testing.T, e *env, _ error) {
				assert.Len(t, e.armRequestTimes(), e.cfg.RetryMax, "bounded: exactly VERIFY_RETRY_MAX attempts")
			},
		},
		"IMDS compute without subscriptionId": {
			setup: func(t *testing.T, e *env) {
				e.withIMDS(t, rewrite("/metadata/instance/compute", func([]byte) []byte { return []byte(`{"vmId":"x","location":"westeurope"}`) }))
			},
			wantErr: azure.ErrIMDS,
			message: true,
		},
		"IMDS compute without resourceGroupName: the cluster cannot be bound, transient": {
			setup: func(t *testing.T, e *env) {
				e.withIMDS(t, rewrite("/metadata/instance/compute", func(b []byte) []byte {
					var m map[string]any
					require.NoError(t, json.Unmarshal(b, &m))
					delete(m, "resourceGroupName")
					out, err := json.Marshal(m)
					require.NoError(t, err)
					return out
				}))
			},
			wantErr: azure.ErrIMDS,
			message: true,
			check: func(t *testing.T, e *env, _ error) {
				assert.Zero(t, e.fake.AttestedRequests.Load(), "fail closed: no document without the binding")
				assert.Zero(t, e.fake.ARMRequests.Load(), "stopped at the compute read, before ARM")
			},
		},
		"IMDS compute with non-UTF-8 bytes": {
			setup: func(t *testing.T, e *env) {
				e.withIMDS(t, rewrite("/metadata/instance/compute", func([]byte) []byte {
					return []byte("{\"subscriptionId\":\"\xff\xfe\xfd\",\"resourceGroupName\":\"MC_rg-fake_aks-fake_westeurope\"}")
				}))
			},
			// Garbage is not this machine's subscription: fail closed.
			wantErr: azure.ErrSubscriptionMismatch, permanent: true,
		},
		"IMDS compute is not JSON": {
			setup: func(t *testing.T, e *env) {
				e.withIMDS(t, rewrite("/metadata/instance/compute", func([]byte) []byte { return []byte("<html>captive portal</html>") }))
			},
			wantErr: azure.ErrIMDS,
			message: true,
		},
		"attested document without signature": {
			setup: func(t *testing.T, e *env) {
				e.withIMDS(t, rewrite("/metadata/attested/document", func([]byte) []byte { return []byte(`{"encoding":"pkcs7"}`) }))
			},
			// Fail closed: a document that cannot be verified is never sent.
			wantErr: azure.ErrAttestation, permanent: true,
			message: true,
		},
		"attested document signature is not base64": {
			setup: func(t *testing.T, e *env) {
				e.withIMDS(t, rewrite("/metadata/attested/document", func([]byte) []byte { return []byte(`{"encoding":"pkcs7","signature":"%%%"}`) }))
			},
			wantErr: azure.ErrAttestation, permanent: true,
			message: true,
		},
		"IMDS sends an endless body": {
			setup: func(t *testing.T, e *env) {
				e.withIMDS(t, rewrite("/metadata/instance/compute", func([]byte) []byte {
					return []byte(`{"subscriptionId":"` + strings.Repeat("a", 8<<20) + `"}`)
				}))
			},
			wantErr: azure.ErrIMDS,
			message: true,
		},
		"ARM sends an endless body": {
			setup: func(t *testing.T, e *env) {
				boundedRead(e)
				e.withARM(t, endless(e, `{"plan":{"name":"`))
			},
			wantErr: azure.ErrARM,
			message: true,
		},
		"Entra sends an endless body": {
			setup: func(t *testing.T, e *env) {
				boundedRead(e)
				e.withEntra(t, func(next http.Handler) http.Handler {
					return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						if strings.HasSuffix(r.URL.Path, "/token") {
							endless(e, `{"access_token":"`)(nil).ServeHTTP(w, r)
							return
						}
						next.ServeHTTP(w, r)
					})
				})
			},
			wantErr: azure.ErrToken,
		},
		"IMDS versions list is never needed: the API version is pinned": {
			setup: func(t *testing.T, e *env) {
				e.withIMDS(t, func(next http.Handler) http.Handler {
					return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						if r.URL.Path == "/metadata/versions" {
							t.Errorf("the engine asked for /metadata/versions")
							_, _ = w.Write([]byte(`{"apiVersions":[]}`))
							return
						}
						next.ServeHTTP(w, r)
					})
				})
			},
		},
		"federated token file disappears after start": {
			setup: func(t *testing.T, e *env) {
				// Removed after New checked it, before the token is requested.
				e.afterNew = func(t *testing.T) { require.NoError(t, os.Remove(e.cfg.TokenFile)) }
			},
			// kubelet replaces the projected token atomically; a missing
			// file mid-run is worth one more attempt of the Job.
			// The message names the file: <testdir>/azure-identity-token in
			// the golden file.
			wantErr: azure.ErrToken,
			message: true,
		},
	}
	// What each failure says, the field IMDS left out and the file that
	// went missing among it: the golden file.
	msgs := testkit.NewMessages(t)
	msgs.Varying = true
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			tc.setup(t, e)
			_, err := e.prove(t, tc.wantErr, tc.permanent)
			if tc.message {
				msgs.Add(name, err, e.cfg.ClientID, "<client ID>")
			}
			if tc.check != nil {
				tc.check(t, e, err)
			}
			if e.check != nil {
				e.check(t)
			}
		})
	}
}
