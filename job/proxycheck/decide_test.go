package proxycheck_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/proxycheck"
)

const regURL = "https://smt-azure.susecloud.net"

func env(kv ...string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for i := 0; i < len(kv); i += 2 {
		out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

func TestDecide(t *testing.T) {
	const proxy = "http://user:pw@proxy.corp:3128"
	tests := map[string]struct {
		env          []corev1.EnvVar
		url          string
		wantVia      bool
		wantVariable string // "" when direct
		wantProxyVar string
	}{
		"no proxy at all":                           {env: env("PATH", "/bin")},
		"HTTPS_PROXY, no NO_PROXY":                  {env: env("HTTPS_PROXY", proxy), wantVia: true, wantVariable: "NO_PROXY", wantProxyVar: "HTTPS_PROXY"},
		"only HTTP_PROXY: an https URL goes direct": {env: env("HTTP_PROXY", proxy)},
		"lower case https_proxy":                    {env: env("https_proxy", proxy), wantVia: true, wantVariable: "NO_PROXY", wantProxyVar: "https_proxy"},
		"lower case wins over upper case":           {env: env("https_proxy", proxy, "HTTPS_PROXY", "http://other:1"), wantVia: true, wantVariable: "NO_PROXY", wantProxyVar: "https_proxy"},
		"an empty lower case counts as unset":       {env: env("https_proxy", "", "HTTPS_PROXY", proxy), wantVia: true, wantVariable: "NO_PROXY", wantProxyVar: "HTTPS_PROXY"},
		"NO_PROXY has the name":                     {env: env("HTTPS_PROXY", proxy, "NO_PROXY", "localhost,smt-azure.susecloud.net")},
		"NO_PROXY has the domain (subdomains too)":  {env: env("HTTPS_PROXY", proxy, "NO_PROXY", "susecloud.net")},
		"NO_PROXY has .domain":                      {env: env("HTTPS_PROXY", proxy, "NO_PROXY", ".susecloud.net")},
		"NO_PROXY is *":                             {env: env("HTTPS_PROXY", proxy, "NO_PROXY", "*")},
		"NO_PROXY with spaces and case":             {env: env("HTTPS_PROXY", proxy, "NO_PROXY", " 10.0.0.0/8 , SMT-Azure.SUSEcloud.net ")},
		"NO_PROXY: another domain":                  {env: env("HTTPS_PROXY", proxy, "NO_PROXY", "cluster.local,.svc,10.0.0.0/8"), wantVia: true, wantVariable: "NO_PROXY", wantProxyVar: "HTTPS_PROXY"},
		"NO_PROXY: the name on another port":        {env: env("HTTPS_PROXY", proxy, "NO_PROXY", "smt-azure.susecloud.net:8443"), wantVia: true, wantVariable: "NO_PROXY", wantProxyVar: "HTTPS_PROXY"},
		"NO_PROXY: the name on port 443":            {env: env("HTTPS_PROXY", proxy, "NO_PROXY", "smt-azure.susecloud.net:443")},
		"NO_PROXY: a suffix that is not a label":    {env: env("HTTPS_PROXY", proxy, "NO_PROXY", "cloud.net"), wantVia: true, wantVariable: "NO_PROXY", wantProxyVar: "HTTPS_PROXY"},
		"only no_proxy set: that is the one":        {env: env("HTTPS_PROXY", proxy, "no_proxy", "cluster.local"), wantVia: true, wantVariable: "no_proxy", wantProxyVar: "HTTPS_PROXY"},
		"no_proxy wins over NO_PROXY":               {env: env("HTTPS_PROXY", proxy, "no_proxy", "cluster.local", "NO_PROXY", "susecloud.net"), wantVia: true, wantVariable: "no_proxy", wantProxyVar: "HTTPS_PROXY"},
		"a later entry wins":                        {env: env("HTTPS_PROXY", proxy, "HTTPS_PROXY", "")},
		"an IP URL in a CIDR":                       {env: env("HTTPS_PROXY", proxy, "NO_PROXY", "20.38.0.0/16"), url: "https://20.38.0.80"},
		"an IP URL outside the CIDR":                {env: env("HTTPS_PROXY", proxy, "NO_PROXY", "10.0.0.0/8"), url: "https://20.38.0.80", wantVia: true, wantVariable: "NO_PROXY", wantProxyVar: "HTTPS_PROXY"},
		"loopback never uses a proxy":               {env: env("HTTPS_PROXY", proxy), url: "https://127.0.0.1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			u := tc.url
			if u == "" {
				u = regURL
			}
			d, variable, err := proxycheck.Decide(tc.env, u)
			require.NoError(t, err)
			assert.Equal(t, tc.wantVia, d.ViaProxy)
			assert.Equal(t, tc.wantVariable, variable)
			assert.Equal(t, tc.wantProxyVar, d.ProxyVariable)
			if d.ViaProxy {
				assert.Equal(t, "proxy.corp:3128", d.Proxy, "no credentials")
			}
			assert.Equal(t, tc.wantVia, viaGoProxy(t, tc.env, u), "Decide must agree with net/http's ProxyFromEnvironment in a process with this environment")
		})
	}
}

// viaGoProxy asks net/http itself: a child process would be cleaner, but
// httpproxy caches nothing per call when used through a fresh Config, and
// this is what ProxyFromEnvironment builds from the environment.
func viaGoProxy(t *testing.T, vars []corev1.EnvVar, target string) bool {
	t.Helper()
	for _, n := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "REQUEST_METHOD"} {
		t.Setenv(n, "")
		require.NoError(t, os.Unsetenv(n))
	}
	for _, e := range vars {
		if e.Name != "PATH" {
			require.NoError(t, os.Setenv(e.Name, e.Value))
		}
	}
	u, err := url.Parse(target)
	require.NoError(t, err)
	p, err := proxyFromEnvironmentFresh(&http.Request{URL: u})
	require.NoError(t, err)
	return p != nil
}

func TestDecideRefusesWhatItCannotKnow(t *testing.T) {
	// What each says, the variable and where its value comes from among
	// it: the golden file.
	msgs := testkit.NewMessages(t)
	_, _, err := proxycheck.Decide([]corev1.EnvVar{{Name: "HTTPS_PROXY", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "proxy"}, Key: "url"}}}}, regURL)
	require.ErrorIs(t, err, proxycheck.ErrUnresolved)
	msgs.Add("HTTPS_PROXY from a ConfigMap", err)

	_, _, err = proxycheck.Decide(nil, "smt-azure.susecloud.net")
	require.ErrorIs(t, err, proxycheck.ErrBadURL)
	msgs.Add("a URL without a scheme", err)
}

func TestVerdictNamesVariableDeploymentAndName(t *testing.T) {
	d, variable, err := proxycheck.Decide(env("HTTPS_PROXY", "http://proxy.corp:3128", "NO_PROXY", "cluster.local,.svc"), regURL)
	require.NoError(t, err)
	require.Equal(t, "NO_PROXY", variable)
	v := d.Verdict("cattle-scc-system", "rancher-scc-operator", "rancher-scc-operator")
	assert.Contains(t, v, "through the proxy proxy.corp:3128 (HTTPS_PROXY of Deployment cattle-scc-system/rancher-scc-operator, container rancher-scc-operator)")
	assert.Contains(t, v, "kubectl -n cattle-scc-system set env deployment/rancher-scc-operator -c rancher-scc-operator NO_PROXY=cluster.local,.svc,smt-azure.susecloud.net")
}

func deployment(c corev1.Container) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "rancher-scc-operator", Namespace: "cattle-scc-system"},
		Spec:       appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}},
	}
}

func TestReadOperatorEnv(t *testing.T) {
	ctx := context.Background()
	// What each refusal says, the Deployment and the rule a Role lacks
	// among it: the golden file.
	msgs := testkit.NewMessages(t)
	t.Run("the operator's container", func(t *testing.T) {
		c := fake.NewClientset(deployment(corev1.Container{Name: "rancher-scc-operator", Env: env("HTTPS_PROXY", "http://proxy.corp:3128")}))
		got, err := proxycheck.ReadOperatorEnv(ctx, c.AppsV1().Deployments("cattle-scc-system"), "cattle-scc-system", "rancher-scc-operator", "")
		require.NoError(t, err)
		assert.Equal(t, "rancher-scc-operator", got.Container)
		assert.Equal(t, env("HTTPS_PROXY", "http://proxy.corp:3128"), got.Env)
		assert.Len(t, c.Actions(), 1, "one get")
		assert.Equal(t, "get", c.Actions()[0].GetVerb())
	})
	t.Run("no Deployment", func(t *testing.T) {
		c := fake.NewClientset()
		_, err := proxycheck.ReadOperatorEnv(ctx, c.AppsV1().Deployments("cattle-scc-system"), "cattle-scc-system", "rancher-scc-operator", "")
		require.ErrorIs(t, err, proxycheck.ErrNoDeployment)
		msgs.Add("no Deployment", err)
	})
	t.Run("envFrom", func(t *testing.T) {
		c := fake.NewClientset(deployment(corev1.Container{Name: "op", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{}}}}))
		_, err := proxycheck.ReadOperatorEnv(ctx, c.AppsV1().Deployments("cattle-scc-system"), "cattle-scc-system", "rancher-scc-operator", "")
		require.ErrorIs(t, err, proxycheck.ErrUnresolved)
		msgs.Add("envFrom", err)
	})
	t.Run("forbidden names the rule", func(t *testing.T) {
		_, err := proxycheck.ReadOperatorEnv(ctx, forbidden{}, "cattle-scc-system", "rancher-scc-operator", "")
		require.ErrorIs(t, err, kube.ErrForbidden)
		msgs.Add("forbidden names the rule", err)
	})
}

type forbidden struct{}

func (forbidden) Get(context.Context, string, metav1.GetOptions) (*appsv1.Deployment, error) {
	// The API server's reason, as it words it, so that the golden file
	// shows the whole message a person reads.
	return nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "rancher-scc-operator",
		errors.New(`User "system:serviceaccount:cattle-scc-system:registration-engine" cannot get resource "deployments" in API group "apps" in the namespace "cattle-scc-system"`))
}

// TestVerdictCommandPastesSafely: NO_PROXY is the operator Deployment's,
// text the engine did not write, and the verdict's kubectl command is
// pasted by a person with their credentials. Pasted into a shell with
// hostile values, it runs kubectl once with the value as one argument, and
// nothing else.
func TestVerdictCommandPastesSafely(t *testing.T) {
	const payload = "touch " + testkit.PasteMarker
	for name, noProxy := range map[string]string{
		"a plain list":           "cluster.local,.svc",
		"a semicolon":            "cluster.local;" + payload,
		"command substitution":   "$(" + payload + ")",
		"backquotes":             "`" + payload + "`",
		"a single quote":         "a'$(" + payload + ")'",
		"a newline":              "a\n" + payload,
		"a pipe and an and-list": "a|" + payload + "&&" + payload,
		"a space and a glob":     "a * " + payload,
		// What the quoting before missed: no space, no quote, no $.
		"a semicolon, a redirection": "cluster.local;>" + testkit.PasteMarker,
		"a newline, a redirection":   "a\n>" + testkit.PasteMarker,
		"an ampersand":               "a&>" + testkit.PasteMarker,
	} {
		t.Run(name, func(t *testing.T) {
			d, _, err := proxycheck.Decide(env("HTTPS_PROXY", "http://proxy.corp:3128", "NO_PROXY", noProxy), regURL)
			require.NoError(t, err)
			v := d.Verdict("cattle-scc-system", "rancher-scc-operator", "rancher-scc-operator")
			start := strings.Index(v, "kubectl ")
			end := strings.Index(v, ", or the same in Rancher's proxy settings")
			require.True(t, start >= 0 && end > start, v)
			calls := testkit.Paste(t, v[start:end])
			assert.Equal(t, []string{"kubectl -n cattle-scc-system set env deployment/rancher-scc-operator -c rancher-scc-operator NO_PROXY=" + noProxy + ",smt-azure.susecloud.net"}, calls)
		})
	}
}
