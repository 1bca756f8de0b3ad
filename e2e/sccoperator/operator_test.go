package sccoperator_test

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/sccoperator"
)

func TestMain(m *testing.M) { os.Exit(controlplane.Main(m)) }

const updateServer = "smt-azure.susecloud.net"

// TestOperatorAgainstFakeUpdateServer checks the harness on its own: the
// operator add-rmt-support, run with the least RBAC of Install, reads a
// Secret shaped like the engine's (written here, not by the engine) and
// registers with the fake update server through the CONNECT proxy, or
// fails the way each SCC fault should make it fail. Name resolution: a
// static route smt-azure.susecloud.net:443 → the fake's loopback address.
func TestOperatorAgainstFakeUpdateServer(t *testing.T) {
	p := controlplane.Shared(t)
	bin := sccoperator.Binary(t, sccoperator.CommitRMT)
	t.Cleanup(func() { sccoperator.Forget(t, p) })

	u, _, err := fakecloud.NewUpdateServer(updateServer)
	require.NoError(t, err)
	httpsPort, _, stop, err := fakecloud.ServeUpdateServers(map[string]*fakecloud.UpdateServer{"127.0.0.1": u})
	require.NoError(t, err)
	t.Cleanup(stop)
	proxy, err := sccoperator.NewProxy(sccoperator.StaticRoute(map[string]string{
		updateServer + ":443": net.JoinHostPort("127.0.0.1", strconv.Itoa(httpsPort)),
	}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })

	const code = "HARNESS-CODE"
	tests := map[string]struct {
		faults      fakecloud.UpdateFaults
		wantDone    bool
		wantFailure string // part of the Failure message
	}{
		"registers":    {wantDone: true},
		"announce 500": {faults: fakecloud.UpdateFaults{SCCAnnounce5xx: true}, wantFailure: "(500)"},
		"code refused": {faults: fakecloud.UpdateFaults{SCCRefuseCode: true}, wantFailure: "Unknown Registration Code."},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sccoperator.Forget(t, p)
			u.Reset()
			u.SetRegCode(code)
			u.SetFaults(tc.faults)
			op := sccoperator.Run(t, p, sccoperator.Options{Binary: bin, ProxyURL: proxy.URL})
			rec, err := sccoperator.Record(ctx, p.Admin)
			require.NoError(t, err)
			defer rec.Stop()

			_, err = p.AdminClient(t).CoreV1().Secrets(sccoperator.Namespace).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: sccoperator.SecretName},
				Type:       corev1.SecretTypeOpaque,
				Data: map[string][]byte{
					"registrationType":    []byte("online"),
					"registrationUrl":     []byte("https://" + updateServer),
					"regCode":             []byte(code),
					"instanceData":        []byte("<document>x</document>"),
					"registrationUrlCert": u.CertPEM,
				},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			written := time.Now()
			reg, err := sccoperator.WaitForSecret(ctx, p.AdminClient(t), sccoperator.Namespace, sccoperator.SecretName)
			require.NoError(t, err)
			final, err := rec.Wait(ctx, reg, sccoperator.Registration.Terminal)
			require.NoError(t, err, op.LogTail(30))
			took := time.Since(written)

			reqs := u.SCCRequests()
			require.NotEmpty(t, reqs, "the operator never reached the fake")
			assert.Equal(t, code, reqs[0].RegCode)
			assert.Equal(t, updateServer, reqs[0].ServerName)
			if tc.wantDone {
				require.True(t, final.Done(), "%s", final)
				for _, s := range rec.States(reg) {
					assert.False(t, s.Failed(), "passed through Failure: %s", s)
				}
				t.Logf("proved: harness: the operator (%.7s, least RBAC, CONNECT proxy) made %s Done and activated %s after the Secret", sccoperator.CommitRMT, reg, took.Round(time.Millisecond))
				return
			}
			require.True(t, final.Failed(), "%s", final)
			assert.Contains(t, final.FailureMessage(), tc.wantFailure)
			t.Logf("proved: harness: fault %s ends %s Failure=True: %q", name, reg, final.FailureMessage())
		})
	}
}
