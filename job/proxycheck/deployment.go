package proxycheck

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rancher/registration-engine/job/kube"
)

// DeploymentGetter reads one Deployment by name; client-go's
// AppsV1().Deployments(namespace) is one. The engine's Role grants get on
// the operator's Deployment by resourceNames and nothing else of apps.
type DeploymentGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*appsv1.Deployment, error)
}

// OperatorEnv is the environment of the operator's container as its
// Deployment spells it.
type OperatorEnv struct {
	Namespace, Deployment, Container string
	Env                              []corev1.EnvVar
}

// ReadOperatorEnv reads Deployment namespace/name (one get) and returns the
// environment of its container named container, or of its only (first)
// container when container is "". A missing Deployment is ErrNoDeployment;
// a container that imports whole ConfigMaps or Secrets (envFrom) is
// ErrUnresolved, since a proxy variable may hide there; an API refusal
// comes back as kube.APIError names it (the Role must grant get on
// deployments/<name>). The caller says any of them once and goes on.
func ReadOperatorEnv(ctx context.Context, deployments DeploymentGetter, namespace, name, container string) (OperatorEnv, error) {
	out := OperatorEnv{Namespace: namespace, Deployment: name}
	d, err := deployments.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return out, fmt.Errorf("proxycheck: %w: %s/%s", ErrNoDeployment, namespace, name)
	case err != nil:
		return out, fmt.Errorf("proxycheck: %w", kube.APIError(err, kube.Access{Verbs: []string{"get"}, Resource: "deployments.apps/" + name, Namespace: namespace}))
	}
	containers := d.Spec.Template.Spec.Containers
	var c *corev1.Container
	for i := range containers {
		if containers[i].Name == container || (container == "" && i == 0) {
			c = &containers[i]
			break
		}
	}
	if c == nil {
		return out, fmt.Errorf("proxycheck: %w: %s/%s has no container %q", ErrNoDeployment, namespace, name, container)
	}
	out.Container = c.Name
	if len(c.EnvFrom) > 0 {
		return out, fmt.Errorf("proxycheck: %w: container %s of %s/%s imports its environment with envFrom", ErrUnresolved, c.Name, namespace, name)
	}
	out.Env = c.Env
	return out, nil
}
