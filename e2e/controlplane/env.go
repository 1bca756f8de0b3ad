package controlplane

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// envSources are the ConfigMaps and Secrets of the pod's namespace that its
// environment refers to, fetched beforehand; a name absent from the map does
// not exist.
type envSources struct {
	configMaps map[string]map[string]string
	secrets    map[string]map[string][]byte
}

// containerEnv computes the environment the kubelet would give container c
// of pod: the API server's service variables first, then envFrom in order
// (with its prefix), then env, where a later definition replaces an earlier
// one and $(NAME) refers to any variable defined before it. It returns
// "NAME=value" strings in first-definition order.
func containerEnv(pod *corev1.Pod, c *corev1.Container, host, port string, src envSources) ([]string, error) {
	var order []string
	vals := map[string]string{}
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	set("KUBERNETES_SERVICE_HOST", host)
	set("KUBERNETES_SERVICE_PORT", port)
	set("KUBERNETES_SERVICE_PORT_HTTPS", port)

	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			data, ok := src.configMaps[from.ConfigMapRef.Name]
			if !ok {
				if isOptional(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom configmap %q: %w", from.ConfigMapRef.Name, ErrEnvSource)
			}
			for _, k := range slices.Sorted(maps.Keys(data)) {
				set(from.Prefix+k, data[k])
			}
		case from.SecretRef != nil:
			data, ok := src.secrets[from.SecretRef.Name]
			if !ok {
				if isOptional(from.SecretRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom secret %q: %w", from.SecretRef.Name, ErrEnvSource)
			}
			for _, k := range slices.Sorted(maps.Keys(data)) {
				set(from.Prefix+k, string(data[k]))
			}
		}
	}

	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vals))
			continue
		}
		v, ok, err := valueFrom(pod, e.ValueFrom, src)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}

	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vals[k])
	}
	return env, nil
}

// valueFrom resolves one valueFrom; ok is false for an optional key that is
// absent (the variable is then not set at all).
func valueFrom(pod *corev1.Pod, from *corev1.EnvVarSource, src envSources) (v string, ok bool, err error) {
	switch {
	case from.FieldRef != nil:
		v, err := fieldRef(pod, from.FieldRef.FieldPath)
		return v, err == nil, err
	case from.ConfigMapKeyRef != nil:
		r := from.ConfigMapKeyRef
		data, found := src.configMaps[r.Name]
		v, has := data[r.Key]
		if found && has {
			return v, true, nil
		}
		if isOptional(r.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("configmap %q key %q: %w", r.Name, r.Key, ErrEnvSource)
	case from.SecretKeyRef != nil:
		r := from.SecretKeyRef
		data, found := src.secrets[r.Name]
		v, has := data[r.Key]
		if found && has {
			return string(v), true, nil
		}
		if isOptional(r.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("secret %q key %q: %w", r.Name, r.Key, ErrEnvSource)
	default:
		return "", false, fmt.Errorf("resourceFieldRef or fileKeyRef: %w", ErrUnsupportedPod)
	}
}

// fieldRef answers the downward-API paths a pod env var can name. The pod
// runs as a host process, so its IP and its host's are loopback.
func fieldRef(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs", "status.hostIP", "status.hostIPs":
		return "127.0.0.1", nil
	}
	for prefix, m := range map[string]map[string]string{
		"metadata.labels":      pod.Labels,
		"metadata.annotations": pod.Annotations,
	} {
		if key, ok := strings.CutPrefix(path, prefix+"['"); ok {
			if key, ok = strings.CutSuffix(key, "']"); ok {
				return m[key], nil
			}
		}
	}
	return "", fmt.Errorf("fieldRef %q: %w", path, ErrUnsupportedPod)
}

// expand replaces $(NAME) with the value of a variable defined before, and
// $$ with $, as the kubelet does; a reference to an unknown name and a "$("
// without ")" stay as written.
func expand(s string, vals map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vals[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func isOptional(p *bool) bool { return p != nil && *p }
