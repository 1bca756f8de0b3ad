package controlplane

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestContainerEnv checks that a pod run by the process kubelet sees the
// environment a real kubelet would give it, so a binary that reads its
// downward-API variables behaves as it would in the cluster.
func TestContainerEnv(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "run-abc", Namespace: "cattle-scc-system", UID: "u-1",
		Labels:      map[string]string{"batch.kubernetes.io/job-name": "run"},
		Annotations: map[string]string{"cronjob.kubernetes.io/instantiate": "manual"},
	}, Spec: corev1.PodSpec{ServiceAccountName: "registration-engine"}}
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	yes := true
	src := envSources{
		configMaps: map[string]map[string]string{"cfg": {"B": "2", "A": "1"}},
		secrets:    map[string]map[string][]byte{"code": {"regCode": []byte("secret-code")}},
	}
	base := []string{
		"KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT=6443", "KUBERNETES_SERVICE_PORT_HTTPS=6443",
	}

	tests := map[string]struct {
		c       corev1.Container
		want    []string // after the service variables
		wantErr error
	}{
		"downward API": {
			c: corev1.Container{Env: []corev1.EnvVar{
				field("POD_NAME", "metadata.name"), field("NS", "metadata.namespace"), field("UID", "metadata.uid"),
				field("JOB", "metadata.labels['batch.kubernetes.io/job-name']"),
				field("MANUAL", "metadata.annotations['cronjob.kubernetes.io/instantiate']"),
				field("MISSING", "metadata.labels['absent']"),
				field("SA", "spec.serviceAccountName"), field("IP", "status.podIP"),
			}},
			want: []string{"POD_NAME=run-abc", "NS=cattle-scc-system", "UID=u-1", "JOB=run", "MANUAL=manual",
				"MISSING=", "SA=registration-engine", "IP=127.0.0.1"},
		},
		"expansion refers to earlier variables only": {
			c: corev1.Container{Env: []corev1.EnvVar{
				{Name: "A", Value: "a"},
				{Name: "B", Value: "$(A)-$(C)-$$(A)-$(KUBERNETES_SERVICE_PORT)-$(unclosed"},
				{Name: "C", Value: "c"},
			}},
			want: []string{"A=a", "B=a-$(C)-$(A)-6443-$(unclosed", "C=c"},
		},
		"envFrom in key order with prefix, env overrides": {
			c: corev1.Container{
				EnvFrom: []corev1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
				Env: []corev1.EnvVar{{Name: "CFG_A", Value: "override"}},
			},
			want: []string{"CFG_A=override", "CFG_B=2"},
		},
		"secret and configmap keys": {
			c: corev1.Container{Env: []corev1.EnvVar{
				{Name: "REGCODE", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "code"}, Key: "regCode"}}},
				{Name: "OPT", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "absent", Optional: &yes}}},
				{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "A"}}},
			}},
			want: []string{"REGCODE=secret-code", "A=1"},
		},
		"missing secret is a config error": {
			c: corev1.Container{Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Key: "k"}}}}},
			wantErr: ErrEnvSource,
		},
		"missing optional envFrom is skipped": {
			c: corev1.Container{EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Optional: &yes}}}},
		},
		"resource fields are not supported": {
			c: corev1.Container{Env: []corev1.EnvVar{{Name: "CPU", ValueFrom: &corev1.EnvVarSource{
				ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}}}},
			wantErr: ErrUnsupportedPod,
		},
		"unknown field path is not supported": {
			c:       corev1.Container{Env: []corev1.EnvVar{field("X", "status.phase")}},
			wantErr: ErrUnsupportedPod,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := containerEnv(pod, &tc.c, "127.0.0.1", "6443", src)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, append(append([]string{}, base...), tc.want...), got)
		})
	}
}
