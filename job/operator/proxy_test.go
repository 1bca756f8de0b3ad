package operator_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/proxycheck"
)

// proxyEnv is the operator's Deployment as a ProxySource.
type proxyEnv struct {
	env []corev1.EnvVar
	err error
}

func (p proxyEnv) OperatorEnv(context.Context) (proxycheck.OperatorEnv, error) {
	return proxycheck.OperatorEnv{Namespace: "cattle-scc-system", Deployment: "rancher-scc-operator", Container: "rancher-scc-operator", Env: p.env}, p.err
}

// TestStepCheckProxy: before anything is written, the step asks how the
// operator's request to the update server would travel. Through a proxy
// that does not exempt the name: a permanent verdict naming the variable,
// the Deployment and the name. Exempted, direct, or unreadable settings:
// the run goes on (the last says so in the log).
func TestStepCheckProxy(t *testing.T) {
	const url = "https://smt-azure.susecloud.net"
	proxied := []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy.corp:3128"}, {Name: "NO_PROXY", Value: "cluster.local,.svc"}}
	// A refusal names the proxy, NO_PROXY, the Deployment and the update server.
	msgs := testkit.NewMessages(t)
	for name, tc := range map[string]struct {
		src     proxyEnv
		stops   bool
		logSays string
	}{
		"through the proxy: stopped with the fix": {src: proxyEnv{env: proxied}, stops: true},
		"the name in NO_PROXY: direct":            {src: proxyEnv{env: append(proxied[:1:1], corev1.EnvVar{Name: "NO_PROXY", Value: ".susecloud.net"})}},
		"no proxy at all":                         {src: proxyEnv{}},
		"the Deployment cannot be read":           {src: proxyEnv{err: errors.New("forbidden")}, logSays: "cannot tell whether rancher/scc-operator's request goes through a proxy"},
	} {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			s := &operator.Step{Proxy: tc.src}
			err := s.CheckProxy(context.Background(), slog.New(slog.NewJSONHandler(&logs, nil)), url)
			if !tc.stops {
				require.NoError(t, err)
				assert.Contains(t, logs.String(), tc.logSays)
				return
			}
			require.ErrorIs(t, err, operator.ErrOperatorProxied)
			assert.True(t, failure.IsPermanent(err))
			msgs.Add(name, err)
		})
	}
	var nilStep *operator.Step
	assert.NoError(t, nilStep.CheckProxy(context.Background(), slog.New(slog.DiscardHandler), url), "no cluster, no check")
}
