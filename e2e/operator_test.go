package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/sccoperator"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/kube"
)

// TestOperator runs the real rancher/scc-operator (built by make
// scc-operator at its pinned commits) against the Secret that the engine's
// CronJob Job writes, on the real control plane: CronJob → Job → the six
// phases → the Corefile's hosts entry → scc-registration → the operator →
// the Registration.
//
// Name resolution: the process tier has no CoreDNS, so the operator reaches
// the fake update server through an HTTP CONNECT proxy on loopback that it
// uses through HTTPS_PROXY (sccoperator.Proxy). The proxy answers CONNECT
// smt-azure.susecloud.net:443 with the address that name has in the hosts
// block the engine wrote into kube-system/coredns (what CoreDNS would
// answer in a pod), on the fake update server's port. TLS runs end to end,
// so the operator checks the update server's certificate for that name.
//
// The cases run one after another: they share cattle-scc-system's Secret,
// and only one operator runs at a time (it binds :8080).
func TestOperator(t *testing.T) {
	e := setupCluster(t)
	rmt := sccoperator.Binary(t, sccoperator.CommitRMT)
	t.Cleanup(func() { sccoperator.Forget(t, e.p) })

	t.Run("add-rmt-support registers from the engine's Secret", func(t *testing.T) {
		oc := e.runOperatorCase(t, rmt, "op-register", "--reg-code", overlayRegCode)
		require.True(t, oc.final.Done(), "the Registration ended %s", oc.final)
		assert.Equal(t, sccoperator.ConditionDone, oc.final.Current)
		assert.Equal(t, "Rancher Prime "+sccoperator.RancherVersion, oc.final.RegisteredProduct)
		assert.NotZero(t, oc.final.SystemID)
		for _, s := range oc.states {
			assert.False(t, s.Failed(), "the Registration passed through Failure=True: %s", s)
		}

		announce := oc.request(t, http.MethodPost, "/connect/subscriptions/systems")
		require.NotNil(t, announce, "the update server saw no announce: %+v", oc.sccRequests)
		assert.Equal(t, overlayRegCode, announce.RegCode, "the operator announced with the CronJob's registration code")
		assert.Equal(t, updateServer, announce.ServerName, "TLS server name")
		assert.Equal(t, updateServer, announce.Host, "Host header")
		assert.Equal(t, sccoperator.ServerURL, announce.Hostname, "the operator announces Rancher's server-url")
		assert.Equal(t, http.StatusCreated, announce.Status)
		activations := oc.request(t, http.MethodGet, "/connect/systems/activations")
		require.NotNil(t, activations, "%+v", oc.sccRequests)
		assert.Equal(t, http.StatusOK, activations.Status)
		t.Logf("proved: rancher/scc-operator %.7s (add-rmt-support) read the Secret the engine's Job wrote, reached %s at %s (the address of the Corefile's hosts entry) through the CONNECT proxy with TLS checked against registrationUrlCert, announced with the CronJob's code and made Registration %s Done with activationStatus.activated=true %s after the Job was created, passing through %d states, none Failure=True",
			sccoperator.CommitRMT, updateServer, oc.tunnel.Dialed, oc.final.Name, oc.took.Round(time.Millisecond), len(oc.states))
	})

	t.Run("main refuses the update server's certificate", func(t *testing.T) {
		main := sccoperator.Binary(t, sccoperator.CommitMain)
		oc := e.runOperatorCase(t, main, "op-main", "--reg-code", overlayRegCode)
		require.True(t, oc.final.Failed(), "the Registration ended %s", oc.final)
		assert.False(t, oc.final.Activated)
		msg := oc.final.FailureMessage()
		assert.Contains(t, msg, "x509: certificate signed by unknown authority",
			"main trusts only the system roots, not registrationUrlCert")
		assert.Empty(t, oc.sccRequests, "no request got through the TLS handshake")
		t.Logf("proved: rancher/scc-operator %.7s (main) ignores registrationUrlCert: with the update server's certificate only there, Registration %s ends Failure=True (%q); the engine needs add-rmt-support (%.7s) or later",
			sccoperator.CommitMain, oc.final.Name, msg, sccoperator.CommitRMT)
	})

	t.Run("unknown registration code", func(t *testing.T) {
		const known = "ANOTHER-CUSTOMERS-CODE"
		oc := e.runOperatorCase(t, rmt, "op-401", "--reg-code", known)
		require.True(t, oc.final.Failed(), "the Registration ended %s", oc.final)
		msg := oc.final.FailureMessage()
		assert.Contains(t, msg, "Unknown Registration Code.")
		assert.Contains(t, msg, "(401)")
		announce := oc.request(t, http.MethodPost, "/connect/subscriptions/systems")
		require.NotNil(t, announce, "%+v", oc.sccRequests)
		assert.Equal(t, overlayRegCode, announce.RegCode)
		assert.Equal(t, http.StatusUnauthorized, announce.Status)
		assert.Nil(t, oc.request(t, http.MethodGet, "/connect/systems/activations"), "nothing after a refused announce")
		t.Logf("proved: a registration code the update server does not know (401) ends Registration %s Failure=True with the operator's message %q", oc.final.Name, msg)
	})
}

// operatorCase is what one run of the engine's Job with the operator
// watching produced.
type operatorCase struct {
	final       sccoperator.Registration
	states      []sccoperator.Registration
	sccRequests []fakecloud.SCCRequest
	tunnel      sccoperator.Tunnel
	// took is from the Job's creation to the Registration's terminal
	// state (as the test saw it): the engine's whole run included.
	took time.Duration
}

// request returns the first SCC API request with method and path.
func (oc operatorCase) request(t *testing.T, method, path string) *fakecloud.SCCRequest {
	t.Helper()
	for i, r := range oc.sccRequests {
		if r.Method == method && r.Path == path {
			return &oc.sccRequests[i]
		}
	}
	return nil
}

// runOperatorCase starts from a cluster the operator never saw, starts a
// fake cloud with cloudArgs, the CONNECT proxy and the operator bin, runs
// the engine's CronJob as Job jobName through the process kubelet, and waits
// for the operator's Registration to be Done or Failed.
func (e *clusterEnv) runOperatorCase(t *testing.T, bin, jobName string, cloudArgs ...string) operatorCase {
	ctx := testContext(t)
	sccoperator.Forget(t, e.p)
	e.resetCoreDNS(ctx, t)
	c := startCloudArgs(t, cloudArgs...)
	env := envMap(c.Env)
	httpsPort, err := strconv.Atoi(env["UPDATE_SERVER_HTTPS_PORT"])
	require.NoError(t, err)
	proxy, err := sccoperator.NewProxy(sccoperator.CoreDNSRoute(e.admin, httpsPort))
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	op := sccoperator.Run(t, e.p, sccoperator.Options{Binary: bin, ProxyURL: proxy.URL})
	rec, err := sccoperator.Record(ctx, e.p.Admin)
	require.NoError(t, err)
	t.Cleanup(rec.Stop)

	runs := e.startKubelet(ctx, t, kube.Namespace, c)
	created := time.Now()
	e.p.Kubectl(t, "-n", kube.Namespace, "create", "job", "--from=cronjob/"+cronJobName, jobName)
	t.Cleanup(func() { e.deleteJob(t, kube.Namespace, jobName) })
	done := controlplane.WaitJobFinished(ctx, t, e.admin, kube.Namespace, jobName)
	pr := runs.forJob(t, jobName)
	require.Len(t, pr, 1, "one pod")
	cond := controlplane.FinishedCondition(done)
	require.NotNil(t, cond)
	require.Equal(t, batchv1.JobComplete, cond.Type, "%s: %s\n%s", cond.Reason, cond.Message, pr[0].res)
	require.Equal(t, job.OutcomeRegistered, summary(t, pr[0].res.stderr)["outcome"])

	name, err := sccoperator.WaitForSecret(ctx, e.admin, kube.Namespace, kube.SecretName)
	require.NoError(t, err, "operator log:\n%s", op.LogTail(30))
	final, err := rec.Wait(ctx, name, sccoperator.Registration.Terminal)
	require.NoError(t, err, "operator log:\n%s", op.LogTail(30))
	took := time.Since(created)

	oc := operatorCase{final: final, states: rec.States(name), took: took}
	oc.sccRequests = sccRequests(ctx, t, env["AZURE_IMDS_ENDPOINT"])
	for _, tn := range proxy.Tunnels() {
		if tn.Target == updateServer+":443" {
			oc.tunnel = tn
		}
	}
	require.NotEmpty(t, oc.tunnel.Target, "the operator never asked the proxy for %s:443: %+v", updateServer, proxy.Tunnels())
	require.Empty(t, oc.tunnel.Err, "the proxy refused the operator's tunnel")
	addr, _ := summary(t, pr[0].res.stderr)["address"].(string)
	dialed, err := netip.ParseAddrPort(oc.tunnel.Dialed)
	require.NoError(t, err)
	assert.Equal(t, addr, dialed.Addr().String(), "the proxy sent the operator where the engine's hosts entry points")
	t.Logf("registration %s: %d states, last %s", name, len(oc.states), final)
	return oc
}

// sccRequests reads what the fake cloud's update servers recorded.
func sccRequests(ctx context.Context, t *testing.T, imds string) []fakecloud.SCCRequest {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, imds+"/fakecloud/scc-requests", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out []fakecloud.SCCRequest
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

// envMap turns KEY=value lines into a map.
func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}
