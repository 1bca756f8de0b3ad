package operator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/proxycheck"
)

// ErrOperatorProxied means rancher/scc-operator would send its request to
// the update server through an HTTP proxy, which resolves the name in its
// own DNS and never sees the engine's CoreDNS entry: a Secret written now
// is bound to fail, and a recovery would fail the same way. Permanent: the
// fix is the operator's NO_PROXY.
var ErrOperatorProxied = errors.New("rancher/scc-operator's request to the update server would go through a proxy")

// ProxySource is where the operator's proxy settings are read: its
// Deployment (ProxyDeployment is the production one).
type ProxySource interface {
	OperatorEnv(ctx context.Context) (proxycheck.OperatorEnv, error)
}

// ProxyDeployment reads the operator's container environment from its
// Deployment, read-only and by name.
type ProxyDeployment struct {
	Deployments kube.DeploymentsGetter
	// Namespace and Name default to proxycheck's (cattle-scc-system,
	// rancher-scc-operator); Container to the Deployment's first.
	Namespace, Name, Container string
}

// OperatorEnv reads the Deployment.
func (p ProxyDeployment) OperatorEnv(ctx context.Context) (proxycheck.OperatorEnv, error) {
	ns, name := cmp.Or(p.Namespace, Namespace), cmp.Or(p.Name, Deployment)
	return proxycheck.ReadOperatorEnv(ctx, p.Deployments.Deployments(ns), ns, name, p.Container)
}

// CheckProxy is the step's check before anything is written: would the
// operator's request to registrationURL go through a proxy? If it would,
// a permanent ErrOperatorProxied whose text says which variable of which
// Deployment must carry which name. When the settings cannot be read (no
// Deployment, RBAC, values from a ConfigMap or Secret) it says so once in
// the log and goes on: the check never stops a run it cannot judge.
func (s *Step) CheckProxy(ctx context.Context, log *slog.Logger, registrationURL string) error {
	if s == nil || s.Proxy == nil {
		return nil
	}
	env, err := s.Proxy.OperatorEnv(ctx)
	if err != nil {
		log.Warn("cannot tell whether rancher/scc-operator's request goes through a proxy; going on", slog.String("reason", err.Error()))
		return nil
	}
	d, _, err := proxycheck.Decide(env.Env, registrationURL)
	if err != nil {
		log.Warn("cannot tell whether rancher/scc-operator's request goes through a proxy; going on", slog.String("reason", err.Error()))
		return nil
	}
	if !d.ViaProxy {
		log.Debug("rancher/scc-operator reaches the update server directly", slog.String("deployment", env.Namespace+"/"+env.Deployment))
		return nil
	}
	return failure.Permanent(fmt.Errorf("%w: %s", ErrOperatorProxied, d.Verdict(env.Namespace, env.Deployment, env.Container)))
}
