package controlplane

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClassify: the RequestLog names requests as the API server's metrics
// do, so that benchrun's counts read like them.
func TestClassify(t *testing.T) {
	tests := map[string]struct {
		method, contentType, path                 string
		wantVerb, wantResource, wantSub, wantName string
	}{
		"get a secret":       {"GET", "", "/api/v1/namespaces/cattle-scc-system/secrets/scc-registration", "GET", "secrets", "", "scc-registration"},
		"list secrets":       {"GET", "", "/api/v1/namespaces/cattle-scc-system/secrets", "LIST", "secrets", "", ""},
		"watch leases":       {"GET", "", "/apis/coordination.k8s.io/v1/namespaces/x/leases?watch=true", "WATCH", "leases", "", ""},
		"server-side apply":  {"PATCH", "application/apply-patch+yaml", "/api/v1/namespaces/x/secrets/s", "APPLY", "secrets", "", "s"},
		"merge patch":        {"PATCH", "application/merge-patch+json", "/api/v1/namespaces/kube-system/configmaps/coredns", "PATCH", "configmaps", "", "coredns"},
		"update a lease":     {"PUT", "application/json", "/apis/coordination.k8s.io/v1/namespaces/x/leases/l", "PUT", "leases", "", "l"},
		"subresource":        {"PATCH", "application/merge-patch+json", "/apis/apps/v1/namespaces/kube-system/deployments/coredns/scale", "PATCH", "deployments", "scale", "coredns"},
		"a namespace itself": {"GET", "", "/api/v1/namespaces/cattle-scc-system", "GET", "namespaces", "", "cattle-scc-system"},
		"not a resource":     {"GET", "", "/version", "GET", "/version", "", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			u, err := url.Parse(tc.path)
			require.NoError(t, err)
			verb, resource, sub, obj := classify(tc.method, tc.contentType, u)
			assert.Equal(t, tc.wantVerb, verb)
			assert.Equal(t, tc.wantResource, resource)
			assert.Equal(t, tc.wantSub, sub)
			assert.Equal(t, tc.wantName, obj)
		})
	}
}
