package manifests

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http/httpproxy"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// goReadsProxy is the proxy Go's net/http takes from HTTPS_PROXY=v for an
// https request (httpproxy.FromEnvironment's reading, which the engine's
// transports use), or nil with the error when Go drops it.
func goReadsProxy(v string) (*url.URL, error) {
	cfg := httpproxy.Config{HTTPSProxy: v}
	return cfg.ProxyFunc()(&url.URL{Scheme: "https", Host: "management.azure.com"})
}

// A proxy URL the chart renders is one Go reads as given (scheme, host,
// port and user information), with a port a dial can use; one Go would
// drop (Entra, ARM and the region servers then go direct, failing with
// timeouts that never name the proxy) or read as another is refused at
// render, naming the value and the fix, its password never shown: not when
// it holds "/", "#", "?" or "@" (the old mask stopped at the first of them)
// nor when the URL has no scheme.
func TestChartProxyURLsAsGoReadsThem(t *testing.T) {
	tests := []struct {
		url string
		// refused: what helm's message must say; "" when the chart renders it.
		refused string
	}{
		{url: "http://proxy.example:3128"},
		{url: "HTTPS://proxy.example:3129/"},
		{url: "socks5h://[fd00::1]:1080"},
		{url: "http://user:PASSWORD-SECRET@proxy.example:3128"},
		{url: "http://user:PASSWORD%2FSECRET@proxy.example:3128"},
		// Go takes the last "@" of the authority.
		{url: "http://user:PASSWORD@SECRET@proxy.example:3128"},
		{url: "http://user:Pa%ss-PASSWORD-SECRET@proxy.example:3128", refused: "percent-encode it"},
		{url: "http://user:PASSWORD/SECRET@proxy.example:3128", refused: "percent-encode it"},
		{url: "http://user:PASSWORD#SECRET@proxy.example:3128", refused: "percent-encode it"},
		{url: "http://user:PASSWORD?SECRET@proxy.example:3128", refused: "percent-encode it"},
		{url: "http://user:PASSWORD SECRET@proxy.example:3128", refused: "percent-encode it"},
		{url: "http://user:PASSWORD@SECRET@proxy example:3128", refused: "not a proxy URL"},
		{url: "http://user:PASSWORD/SECRET@proxy example:3128", refused: "not a proxy URL"},
		{url: "user:PASSWORD-SECRET@proxy.example:3128", refused: "not a proxy URL"},
		{url: "notaurl", refused: "not a proxy URL"},
		{url: "ftp://proxy.example:21", refused: "not a proxy URL"},
		{url: "http://proxy.example:3128/path", refused: "not a proxy URL"},
		{url: "http://proxy.example:99999", refused: "port 99999 is out of range 1-65535"},
		{url: "http://user:PASSWORD-SECRET@proxy.example:0", refused: "port 0 is out of range 1-65535"},
	}
	helm := helmBin(t)
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			out, err := helmTemplateErr(helm, chartDir, minimal,
				"Azure.proxySettings.isProxyEnabled=true", "Azure.proxySettings.httpsProxy="+tc.url)
			if tc.refused != "" {
				require.Error(t, err, "the chart renders %s", tc.url)
				msg := helmStderr(err)
				assert.Contains(t, msg, "Azure.proxySettings.httpsProxy")
				assert.Contains(t, msg, tc.refused)
				assert.NotContains(t, msg, "SECRET", "the refusal shows the password")
				t.Logf("proved: refused at render: %s", msg[strings.Index(msg, "Azure.proxySettings.httpsProxy"):])
				return
			}
			require.NoError(t, err)
			chartCronJob(t, splitObjects(t, out))
			proxy, err := goReadsProxy(tc.url)
			require.NoError(t, err, "Go reads what the chart renders")
			require.NotNil(t, proxy)
			given, err := url.Parse(tc.url)
			require.NoError(t, err)
			assert.Equal(t, strings.ToLower(given.Scheme), proxy.Scheme)
			assert.Equal(t, given.Host, proxy.Host)
			assert.Equal(t, given.User.String(), proxy.User.String())
			port, err := strconv.Atoi(proxy.Port())
			require.NoError(t, err, "a port is given")
			assert.True(t, port >= 1 && port <= 65535)
		})
	}

	// extraEnv's proxy variables are read by Go the same way.
	_, err := helmTemplateErr(helm, chartDir, minimal, "extraEnv[0].name=https_proxy", "extraEnv[0].value=notaurl")
	require.Error(t, err)
	assert.Contains(t, helmStderr(err), `extraEnv[0] https_proxy "notaurl": not a proxy URL`)
}

// The proxy URLs Azure passes, password included, are in no pod spec (a
// plain env value is readable with Kubernetes' view role and by whoever
// may list pods): every pod that runs the engine (the CronJob's, the retry
// CronJob's, the run at install's) takes HTTPS_PROXY and HTTP_PROXY from
// the Secret the chart renders, which holds them as given; NO_PROXY, no
// credential, stays a value. A change of the proxy still changes the run's
// inputs (a new run Job).
func TestChartProxyCredentialsOnlyInTheSecret(t *testing.T) {
	const secretURL = "http://user:PASSWORD-SECRET@proxy.example:3128"
	render := func(httpsProxy string) map[string]rendered {
		return splitObjects(t, helmTemplate(t, chartDir, minimal,
			"Azure.proxySettings.isProxyEnabled=true", "Azure.proxySettings.httpsProxy="+httpsProxy,
			"Azure.proxySettings.httpProxy="+httpsProxy, "Azure.proxySettings.noProxy=.svc"))
	}
	objs := render(secretURL)
	secret := renderedAs[*corev1.Secret](t, objs, "Secret/"+chartNamespace+"/registration-engine-proxy")
	assert.Equal(t, map[string][]byte{"HTTPS_PROXY": []byte(secretURL), "HTTP_PROXY": []byte(secretURL)}, secret.Data)

	for key, o := range objs {
		if key == "Secret/"+chartNamespace+"/registration-engine-proxy" {
			continue
		}
		data, err := json.Marshal(o.obj)
		require.NoError(t, err)
		assert.NotContains(t, string(data), "PASSWORD-SECRET", "%s shows the proxy's password", key)
	}
	runs, cleanup := enginePods(t, objs)
	assert.Empty(t, proxyEnv(t, objs, cleanup))
	for k, pod := range runs {
		assert.Equal(t, map[string]string{"HTTPS_PROXY": secretURL, "HTTP_PROXY": secretURL, "NO_PROXY": ".svc"},
			proxyEnv(t, objs, pod), "%s: what the engine's container gets", k)
		for _, e := range pod.Containers[0].Env {
			if e.Name == "HTTPS_PROXY" || e.Name == "HTTP_PROXY" {
				require.NotNil(t, e.ValueFrom, "%s: %s", k, e.Name)
				assert.Equal(t, &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret.Name}, Key: e.Name},
					e.ValueFrom.SecretKeyRef, "%s: %s from the Secret, not optional", k, e.Name)
			}
		}
	}
	t.Logf("proved: %d pod templates take HTTPS_PROXY and HTTP_PROXY from Secret %s; no object but it holds the password", len(runs), secret.Name)

	// Another proxy, another run: the URL left the Job spec, not the
	// run's inputs.
	runJobName := func(objs map[string]rendered) string {
		for _, o := range objs {
			if j, ok := o.typed.(*batchv1.Job); ok && strings.Contains(j.Name, "-run-") {
				return j.Name
			}
		}
		return ""
	}
	assert.NotEqual(t, runJobName(objs), runJobName(render("http://user:OTHER@proxy.example:3128")))
}
